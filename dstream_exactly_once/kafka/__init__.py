"""The Kafka source plug-in: value types, kafkaParams, driver-side metadata and planning, the
source (:mod:`._source`), the executor-side range reader (:mod:`._range_reader`). Nothing here
imports Spark but its sub-package ``kafka/spark/`` (the DStream glue: ``KafkaUtils``, the batch builder,
the batch RDD); the Spark conf keys the source reads are declared in :mod:`._spark_conf`.

Importing the package registers the range kind ``"kafka"`` (:mod:`._offsets`) and the broker
look-ups operator tools ask by that kind (:mod:`._live_log`)."""

from . import _live_log  # noqa: F401 - registers the live log of range kind "kafka"
