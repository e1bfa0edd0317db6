"""The Kafka source plug-in: value types, kafkaParams, driver-side metadata and planning, the
source (:mod:`.source`), the executor-side range reader (:mod:`.range_reader`). Nothing here
imports Spark but its sub-package ``kafka/spark/`` (the DStream glue: ``KafkaUtils``, the batch builder,
the batch RDD); the Spark conf keys the source reads are declared in :mod:`.spark_conf`.

Importing the package registers the range kind ``"kafka"`` (:mod:`.offsets`) and the broker
look-ups operator tools ask by that kind (:mod:`.live_log`)."""

from . import live_log as _live_log  # noqa: F401 - registers the live log of range kind "kafka"
