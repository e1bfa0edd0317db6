"""A Structured Streaming query from Spark's Kafka source into the deo-kafka sink, as a child driver.

``python -m tests.integration.structured_kafka_sink_proc BOOTSTRAP IN_TOPIC OUT_TOPIC STORE APP CHECKPOINT EXPECTED``

Every input record becomes one output record (key and value = the input value, a header naming the
input partition); at most 20 offsets a trigger, so a run takes several micro-batches. Prints
``STARTED`` once the query runs and ``DONE`` once a ``read_committed`` consumer of the output topic
has seen ``EXPECTED`` distinct values; the tests SIGKILL it at any moment in between and restart it
from its checkpoint.
"""

from __future__ import annotations

import sys


def main(bootstrap: str, in_topic: str, out_topic: str, store: str, app: str, checkpoint: str,
         expected: int) -> None:
    import os

    from kafka import KafkaConsumer
    from pyspark.sql import SparkSession

    from dstream_exactly_once.structured import kafka_sink_options, register_sinks
    from dstream_exactly_once.testing.spark import spark_env
    from dstream_exactly_once.testing.spark_kafka import spark_kafka_jars

    os.environ.update(spark_env())
    spark = (SparkSession.builder.master("local[2]").appName("structured-kafka-sink")
             .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1").config("spark.sql.shuffle.partitions", "2")
             .config("spark.jars", spark_kafka_jars()).getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register_sinks(spark)
    rows = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", in_topic).option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", 20)
            .option("failOnDataLoss", "true").load()
            .selectExpr("CAST(value AS STRING) AS key", "value",
                        "array(named_struct('key', 'from', 'value', CAST(CAST(partition AS STRING) AS BINARY))) "
                        "AS headers"))
    query = (rows.writeStream.format("deo-kafka")
             .options(**kafka_sink_options(store, app, out_topic, {"bootstrap.servers": bootstrap},
                                           transaction_timeout_ms=20000))
             .option("checkpointLocation", checkpoint).trigger(processingTime="200 milliseconds").start())
    print("STARTED", flush=True)
    consumer = KafkaConsumer(out_topic, bootstrap_servers=bootstrap, isolation_level="read_committed",
                             auto_offset_reset="earliest", enable_auto_commit=False, group_id=None)
    seen = set()
    try:
        while len(seen) < expected:
            if query.exception() is not None:
                raise SystemExit(f"query failed: {query.exception()}")
            for records in consumer.poll(timeout_ms=200).values():
                seen.update(r.value for r in records)
    finally:
        consumer.close()
    query.stop()
    print("DONE", flush=True)


if __name__ == "__main__":
    a = sys.argv[1:]
    main(a[0], a[1], a[2], a[3], a[4], a[5], int(a[6]))
