"""Child drivers of the deo-kafka source's integration tests (one JVM start each).

``python -m tests.integration.structured_kafka_source_proc compare BOOTSTRAP CHECKPOINTS OPTIONS_JSON``
    Runs one ``Trigger.AvailableNow`` query per format — ``kafka`` (Spark's JVM connector) and
    ``deo-kafka`` (this library) — with the same options (``OPTIONS_JSON``; ``deo.``-prefixed options
    go to ``deo-kafka`` only) and prints ``RESULT <json>``: per format the rows (every column, sorted
    by topic, partition, offset) and the Spark partition counts of its micro-batches.

``python -m tests.integration.structured_kafka_source_proc store BOOTSTRAP TOPIC CHECKPOINT EXPECTED STORE APP``
    ``deo-kafka`` (at most 10 offsets a trigger) → ``deo-store``: each record's value one ``incr`` of
    namespace ``seen``. Prints ``STARTED`` and, once the store holds ``EXPECTED`` distinct values,
    ``DONE``; the fault test SIGKILLs it in between and restarts it from its checkpoint. With a last
    argument ``anchored`` the sink keeps the source's offsets in the store (``anchor=True``) and the
    source starts a new checkpoint from them (``starting.positions.store``/``.app``).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any, Dict, List

from tests.integration.structured_sink_proc import kafka_query_session


def _row(r: Any) -> List[Any]:
    def hexed(b: Any) -> Any:
        return None if b is None else bytes(b).hex()

    d = r.asDict()
    headers = d.get("headers")
    return [hexed(d["key"]), hexed(d["value"]), d["topic"], d["partition"], d["offset"], d["timestamp"].isoformat(),
            d["timestampType"], None if headers is None else [[h["key"], hexed(h["value"])] for h in headers]]


def compare(bootstrap: str, checkpoints: str, options: Dict[str, str]) -> None:
    spark = kafka_query_session("deo-kafka-compare")
    out: Dict[str, Any] = {}
    for fmt in ("kafka", "deo-kafka"):
        rows: List[List[Any]] = []
        partitions: List[int] = []

        def collect(df: Any, batch_id: int, rows: List[List[Any]] = rows, partitions: List[int] = partitions) -> None:
            partitions.append(df.rdd.getNumPartitions())
            rows.extend(_row(r) for r in df.collect())

        reader = spark.readStream.format(fmt).option("kafka.bootstrap.servers", bootstrap)
        for key, value in options.items():
            if key.startswith("deo."):
                if fmt == "deo-kafka":
                    reader = reader.option(key[len("deo."):], value)
            else:
                reader = reader.option(key, value)
        query = (reader.load().writeStream.foreachBatch(collect).trigger(availableNow=True)
                 .option("checkpointLocation", os.path.join(checkpoints, fmt)).start())
        query.awaitTermination(300)
        if query.exception() is not None:
            raise SystemExit(f"{fmt} query failed: {query.exception()}")
        out[fmt] = {"rows": sorted(rows, key=lambda r: (r[2], r[3], r[4])), "partitions": partitions}
    print("RESULT " + json.dumps(out), flush=True)


def store(bootstrap: str, topic: str, checkpoint: str, expected: int, url: str, app: str,
          anchored: bool = False) -> None:
    from dstream_exactly_once.stores import open_store
    from dstream_exactly_once.structured import store_sink_options

    spark = kafka_query_session("deo-kafka-to-store")
    rows = (spark.readStream.format("deo-kafka").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic).option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", 10)
            .option("tasks.target.count", 1)
            .options(**({"starting.positions.store": url, "starting.positions.app": app} if anchored else {})).load()
            .selectExpr("'seen' AS namespace", "CAST(value AS STRING) AS key", "'incr' AS op",
                        "CAST(1 AS BIGINT) AS value"))
    query = (rows.writeStream.format("deo-store").options(**store_sink_options(url, app, anchor=anchored))
             .option("checkpointLocation", checkpoint).trigger(processingTime="200 milliseconds").start())
    print("STARTED", flush=True)
    with open_store(url, app) as s:
        while len(s.get_values("seen")) < expected:
            if query.exception() is not None:
                raise SystemExit(f"query failed: {query.exception()}")
            time.sleep(0.2)
    query.stop()
    print("DONE", flush=True)


if __name__ == "__main__":
    a = sys.argv[1:]
    if a[:1] == ["compare"] and len(a) == 4:
        compare(a[1], a[2], json.loads(a[3]))
    elif a[:1] == ["store"] and len(a) in (7, 8) and a[7:] in ([], ["anchored"]):
        store(a[1], a[2], a[3], int(a[4]), a[5], a[6], anchored=a[7:] == ["anchored"])
    else:
        sys.exit(f"want: compare BOOTSTRAP CHECKPOINTS OPTIONS_JSON | store BOOTSTRAP TOPIC CHECKPOINT EXPECTED STORE "
                 f"APP; got {a!r}")
