"""The Structured Streaming half of the DStream → Structured Streaming move, as a child driver.

``python -m tests.integration.structured_migration_proc BOOTSTRAP TOPIC STORE APP CHECKPOINT STARTING EXPECTED``

Spark's own Kafka source starts at ``STARTING`` (the JSON ``dstream-eo offsets export`` prints)
and the ``deo-store`` sink commits, per record, what the DStream half commits: namespace ``count``
(key = partition) + 1, ``sum`` (key = partition) + the record's value, and ``seen`` (key =
``"partition:offset"``) + 1. At most 60 offsets a trigger, so the run takes several micro-batches.
Prints ``DONE`` once ``count`` totals ``EXPECTED`` records, then stops the query.
"""

from __future__ import annotations

import sys
import time


def main(bootstrap: str, topic: str, store: str, app: str, checkpoint: str, starting: str, expected: int) -> None:
    from dstream_exactly_once.stores import open_store
    from dstream_exactly_once.structured import store_sink_options

    from .structured_sink_proc import kafka_query_session

    spark = kafka_query_session("structured-migration")
    records = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
               .option("subscribe", topic).option("startingOffsets", starting).option("maxOffsetsPerTrigger", 60)
               .option("failOnDataLoss", "true").load()
               .selectExpr("CAST(partition AS STRING) AS p", "offset", "CAST(CAST(value AS STRING) AS BIGINT) AS v"))
    rows = records.selectExpr(
        "inline(array("
        "named_struct('namespace', 'count', 'key', p, 'op', 'incr', 'value', CAST(1 AS BIGINT)),"
        "named_struct('namespace', 'sum', 'key', p, 'op', 'incr', 'value', v),"
        "named_struct('namespace', 'seen', 'key', concat(p, ':', CAST(offset AS STRING)), 'op', 'incr',"
        " 'value', CAST(1 AS BIGINT))))")
    query = (rows.writeStream.format("deo-store").options(**store_sink_options(store, app))
             .option("checkpointLocation", checkpoint).trigger(processingTime="200 milliseconds").start())
    print("STARTED", flush=True)
    with open_store(store, app) as s:
        while sum(s.get_values("count").values()) < expected:
            if query.exception() is not None:
                raise SystemExit(f"query failed: {query.exception()}")
            time.sleep(0.2)
    query.stop()
    print("DONE", flush=True)


if __name__ == "__main__":
    a = sys.argv[1:]
    main(a[0], a[1], a[2], a[3], a[4], a[5], int(a[6]))
