"""Structured Streaming queries from the ``rate-micro-batch`` source into the deo-doris sink, in one child driver.

``python -m tests.integration.structured_doris_proc FE_URL STORE APP CHECKPOINT [FE_URL STORE APP CHECKPOINT …]``

One SparkSession runs one query per ``FE_URL STORE APP CHECKPOINT`` group (each its own Doris, store
and checkpoint), so one JVM start serves every case of a run. Each micro-batch holds 10 consecutive
``value`` s in 2 partitions; each row is loaded as one CSV column. Prints ``STARTED`` once the
queries run and then runs until it is killed (the tests SIGKILL it at a point of the sink's protocol
and restart it from the checkpoints).
"""

from __future__ import annotations

import sys
import time
from typing import Any, Sequence, Tuple

from .faults import restartable


def main(targets: Sequence[Tuple[str, str, str, str]]) -> None:
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

    def start(fe_url: str, store: str, app: str, checkpoint: str) -> Any:
        return (rows.writeStream.format("deo-doris")
                .options(**doris_sink_options(store, app, fe_url, "db", "t", password="doris-pw"))
                .option("checkpointLocation", checkpoint).trigger(processingTime="300 milliseconds").start())

    queries = [start(*target) for target in targets]
    print("STARTED", flush=True)
    while True:
        for i, query in enumerate(queries):
            failure = query.exception()
            if restartable(failure):
                print(f"RESTARTED {targets[i][2]} {str(failure)[:200]!r}", flush=True)
                queries[i] = start(*targets[i])
            elif failure is not None:
                raise SystemExit(f"query failed: {failure}")
        time.sleep(0.2)


if __name__ == "__main__":
    a = sys.argv[1:]
    if not a or len(a) % 4:
        sys.exit(f"want: FE_URL STORE APP CHECKPOINT [FE_URL STORE APP CHECKPOINT …]; got {a!r}")
    main([(a[i], a[i + 1], a[i + 2], a[i + 3]) for i in range(0, len(a), 4)])
