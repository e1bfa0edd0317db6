"""The Kafka source plug-in: value types, kafkaParams, driver-side metadata and planning, the
source (:mod:`.source`), the executor-side range reader (:mod:`.range_reader`). Nothing here
imports Spark; the Spark glue is ``streaming/direct.py`` and ``streaming/kafka_rdd.py``."""
