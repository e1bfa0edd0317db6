"""The Kafka source plug-in: value types, kafkaParams, driver-side metadata and planning, the
source (:mod:`.source`), the executor-side range reader (:mod:`.range_reader`). Nothing here
imports Spark; the Spark glue is ``streaming/direct.py`` and ``streaming/kafka_rdd.py``.

Importing the package registers the range kind ``"kafka"`` (:mod:`.offsets`) and the broker
look-ups operator tools ask by that kind (:mod:`.live_log`)."""

from . import live_log as _live_log  # noqa: F401 - registers the live log of range kind "kafka"
