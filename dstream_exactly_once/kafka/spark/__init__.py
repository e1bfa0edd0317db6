"""The Kafka source's Spark glue for the DStream API (the only part of ``kafka/`` that imports Spark).

:mod:`.utils` is ``KafkaUtils`` (the Spark 2.4 facade), :mod:`.direct` the driver-side batch
builder over the planner of :mod:`dstream_exactly_once.kafka.planner`, :mod:`.rdd` the batch RDD
(``KafkaRDD``), :mod:`.commit_async` ``commitAsync`` to a consumer group, :mod:`.receiver_stream`
Spark 2.4's ``createStream`` over the direct design, and :mod:`.convert` ``exactly_once(stream, store)``.
The Spark conf keys they read are declared in :mod:`dstream_exactly_once.kafka.spark_conf`.
"""
