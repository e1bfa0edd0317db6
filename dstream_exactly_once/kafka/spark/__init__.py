"""The Kafka source's Spark glue for the DStream API (the only part of ``kafka/`` that imports Spark).

:mod:`._utils` is ``KafkaUtils`` (the Spark 2.4 facade), :mod:`._direct` the driver-side batch
builder over the planner of :mod:`dstream_exactly_once.kafka._planner`, :mod:`._rdd` the batch RDD
(``KafkaRDD``), :mod:`._commit_async` ``commitAsync`` to a consumer group, :mod:`._receiver_stream`
Spark 2.4's ``createStream`` over the direct design, and :mod:`._convert` ``exactly_once(stream, store)``.
The Spark conf keys they read are declared in :mod:`dstream_exactly_once.kafka._spark_conf`.
"""
