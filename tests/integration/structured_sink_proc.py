"""A Structured Streaming query from Spark's Kafka source into the deo-store sink, as a child driver.

``python -m tests.integration.structured_sink_proc BOOTSTRAP TOPIC STORE APP CHECKPOINT STARTING EXPECTED``

Every record's value becomes one ``incr`` of namespace ``seen``, key = the value; at most 20
offsets a trigger, so a run takes several micro-batches. ``STARTING`` is Spark's
``startingOffsets`` (``earliest`` or the JSON ``dstream-eo offsets export`` prints; only used on a
fresh checkpoint). Prints ``STARTED`` once the query runs and ``DONE`` once ``EXPECTED`` distinct
values are in the store; the tests SIGKILL it at any moment in between and restart it from its
checkpoint.
"""

from __future__ import annotations

import sys
import time
from typing import Any


def kafka_query_session(name: str) -> Any:
    """A local[2] SparkSession with Spark's Kafka source on its classpath and this library's sinks
    registered (the child drivers of the Structured Streaming fault tests)."""
    import os

    from pyspark.sql import SparkSession

    from dstream_exactly_once.structured import register_sinks
    from dstream_exactly_once.testing.spark import spark_env
    from dstream_exactly_once.testing.spark_kafka import spark_kafka_jars

    os.environ.update(spark_env())
    spark = (SparkSession.builder.master("local[2]").appName(name)
             .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1").config("spark.sql.shuffle.partitions", "2")
             .config("spark.jars", spark_kafka_jars()).getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register_sinks(spark)
    return spark


def main(bootstrap: str, topic: str, store: str, app: str, checkpoint: str, starting: str, expected: int) -> None:
    from dstream_exactly_once.stores import open_store
    from dstream_exactly_once.structured import store_sink_options

    spark = kafka_query_session("structured-sink")
    rows = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic).option("startingOffsets", starting).option("maxOffsetsPerTrigger", 20)
            .option("failOnDataLoss", "true").load()
            .selectExpr("'seen' AS namespace", "CAST(value AS STRING) AS key", "'incr' AS op",
                        "CAST(1 AS BIGINT) AS value"))
    query = (rows.writeStream.format("deo-store").options(**store_sink_options(store, app))
             .option("checkpointLocation", checkpoint).trigger(processingTime="200 milliseconds").start())
    print("STARTED", flush=True)
    with open_store(store, app) as s:
        while len(s.get_values("seen")) < expected:
            if query.exception() is not None:
                raise SystemExit(f"query failed: {query.exception()}")
            time.sleep(0.2)
    query.stop()
    print("DONE", flush=True)


if __name__ == "__main__":
    a = sys.argv[1:]
    main(a[0], a[1], a[2], a[3], a[4], a[5], int(a[6]))
