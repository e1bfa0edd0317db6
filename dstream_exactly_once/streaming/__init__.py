"""The PySpark DStream side that every source shares: the range RDD and stream, the exactly-once output
patterns, task context, input tracking and lifecycle. Each source's own glue lives with the source
(``kafka/spark/``: ``KafkaUtils``, ``KafkaRDD``; ``files/spark/``: ``FileUtils``)."""
