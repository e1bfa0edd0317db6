"""The PySpark side: KafkaRDD, the direct DStream and the Spark-2.4-compatible KafkaUtils."""
