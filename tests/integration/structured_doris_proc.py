"""A Structured Streaming query from the ``rate-micro-batch`` source into the deo-doris sink, as a child driver.

``python -m tests.integration.structured_doris_proc FE_URL STORE APP CHECKPOINT``

Each micro-batch holds 10 consecutive ``value`` s in 2 partitions; each row is loaded as one CSV
column. Prints ``STARTED`` once the query runs and then runs until it is killed (the tests SIGKILL it
at a point of the sink's protocol and restart it from its checkpoint).
"""

from __future__ import annotations

import sys
import time


def main(fe_url: str, store: str, app: str, checkpoint: str) -> None:
    import os

    from pyspark.sql import SparkSession

    from dstream_exactly_once.structured import doris_sink_options, register_sinks
    from dstream_exactly_once.testing._spark import spark_env

    os.environ.update(spark_env())
    spark = (SparkSession.builder.master("local[2]").appName("structured-doris")
             .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register_sinks(spark)
    rows = (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 10).option("numPartitions", 2)
            .load().selectExpr("CAST(value AS STRING) AS v"))
    query = (rows.writeStream.format("deo-doris")
             .options(**doris_sink_options(store, app, fe_url, "db", "t", password="doris-pw"))
             .option("checkpointLocation", checkpoint).trigger(processingTime="300 milliseconds").start())
    print("STARTED", flush=True)
    while query.exception() is None:
        time.sleep(0.2)
    raise SystemExit(f"query failed: {query.exception()}")


if __name__ == "__main__":
    a = sys.argv[1:]
    main(a[0], a[1], a[2], a[3])
