"""Structured Streaming queries from Spark's Kafka source into the deo-store sink, as a child driver.

``python -m tests.integration.structured_sink_proc BOOTSTRAP TOPIC CHECKPOINTS STARTING EXPECTED STORE APP
[STORE APP …]``

One query per ``STORE APP`` pair, all reading ``TOPIC``, each with its own checkpoint
(``CHECKPOINTS/APP``), application id and store; they share the driver (one JVM start serves them
all). Every record's value becomes one ``incr`` of namespace ``seen``, key = the value; at most 10
offsets a trigger, so a run takes several micro-batches. ``STARTING`` is Spark's
``startingOffsets`` (``earliest`` or the JSON ``dstream-eo offsets export`` prints; only used on a
fresh checkpoint). Prints ``STARTED`` once the queries run and ``DONE`` once every store holds
``EXPECTED`` distinct values; the tests SIGKILL it at any moment in between and restart it from its
checkpoints.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any, Sequence, Tuple


def kafka_query_session(name: str) -> Any:
    """A local[2] SparkSession with Spark's Kafka source on its classpath and this library's sinks
    registered (the child drivers of the Structured Streaming fault tests)."""
    from pyspark.sql import SparkSession

    from dstream_exactly_once.structured import register_sinks
    from dstream_exactly_once.testing._spark import spark_env
    from dstream_exactly_once.testing._spark_kafka import spark_kafka_jars

    os.environ.update(spark_env())
    spark = (SparkSession.builder.master("local[2]").appName(name)
             .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1").config("spark.sql.shuffle.partitions", "2")
             .config("spark.jars", spark_kafka_jars()).getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register_sinks(spark)
    return spark


def main(bootstrap: str, topic: str, checkpoints: str, starting: str, expected: int,
         targets: Sequence[Tuple[str, str]]) -> None:
    from dstream_exactly_once.stores import open_store
    from dstream_exactly_once.structured import store_sink_options

    spark = kafka_query_session("structured-sink")
    rows = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic).option("startingOffsets", starting).option("maxOffsetsPerTrigger", 10)
            .option("failOnDataLoss", "true").load()
            .selectExpr("'seen' AS namespace", "CAST(value AS STRING) AS key", "'incr' AS op",
                        "CAST(1 AS BIGINT) AS value"))
    queries = [rows.writeStream.format("deo-store").options(**store_sink_options(store, app))
               .option("checkpointLocation", os.path.join(checkpoints, app))
               .trigger(processingTime="200 milliseconds").start() for store, app in targets]
    print("STARTED", flush=True)
    stores = [open_store(store, app) for store, app in targets]
    try:
        while min(len(s.get_values("seen")) for s in stores) < expected:
            for query in queries:
                if query.exception() is not None:
                    raise SystemExit(f"query failed: {query.exception()}")
            time.sleep(0.2)
    finally:
        for s in stores:
            s.close()
    for query in queries:
        query.stop()
    print("DONE", flush=True)


if __name__ == "__main__":
    a = sys.argv[1:]
    pairs = a[5:]
    if not pairs or len(pairs) % 2:
        sys.exit(f"want: BOOTSTRAP TOPIC CHECKPOINTS STARTING EXPECTED STORE APP [STORE APP …]; got {a!r}")
    main(a[0], a[1], a[2], a[3], int(a[4]), list(zip(pairs[::2], pairs[1::2], strict=True)))
