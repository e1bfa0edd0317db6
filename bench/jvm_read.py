"""B1(c) in its own, persistent process: Spark's JVM Kafka source, triggered once per round.

``python -m bench.jvm_read '<json spec>'`` starts ONE SparkSession (its own JVM: the session and
``spark.jars.packages`` must not clash with the parent's SparkContext), prints ``READY`` (or
``RESULT {"error": …}``), then serves one request per stdin line — ``{"op": "count"}`` or
``{"op": "columns"}`` — answering each with one ``RESULT {"records": n}`` line; EOF ends it.

The session lives across all rounds, and every query uses the same ``kafka.group.id``, so the
executors' Kafka consumer pool (keyed by group id and partition) is filled by the warm-up and
reused by every timed query, as the KafkaRDD's consumer cache is. The consumer settings of the
parent's :data:`bench.common.READ_SETTINGS` are passed as ``kafka.*`` options (Spark only sets
``receive.buffer.bytes`` to 64 KiB when it is unset).

- ``count``: ``spark.read.format("kafka")…load().count()``;
- ``columns``: the parity case (c′) — ``offset``, ``timestamp`` and ``key``/``value`` cast to
  strings, every column consumed by an aggregate so the optimizer cannot drop the decoding.
"""

from __future__ import annotations

import json
import sys
from typing import Any, Dict

GROUP_ID = "deo-bench-jvm-source"


def load(spark: Any, spec: Dict[str, Any]) -> Any:
    topic, ends = spec["topic"], {str(p): int(e) for p, e in spec["ends"].items()}
    reader = (spark.read.format("kafka")
              .option("kafka.bootstrap.servers", spec["bootstrap"])
              .option("kafka.group.id", GROUP_ID)
              .option("assign", json.dumps({topic: sorted(int(p) for p in ends)}))
              .option("startingOffsets", json.dumps({topic: {p: 0 for p in ends}}))
              .option("endingOffsets", json.dumps({topic: ends})))
    for key, value in spec.get("settings", {}).items():
        reader = reader.option(f"kafka.{key}", str(value))
    return reader.load()


def run(spark: Any, spec: Dict[str, Any], op: str) -> int:
    from pyspark.sql import functions as F  # noqa: N812 - PySpark's convention

    df = load(spark, spec)
    if op == "count":
        return int(df.count())
    if op == "columns":
        cols = df.selectExpr("offset", "timestamp", "CAST(key AS STRING) AS k", "CAST(value AS STRING) AS v")
        row = cols.agg(F.count(F.lit(1)).alias("n"), F.max("offset"), F.max("timestamp"), F.count("k"),
                       F.sum(F.length("v"))).collect()[0]
        return int(row["n"])
    raise ValueError(f"unknown op {op!r}; allowed: 'count', 'columns'")


def session_builder(spec: Dict[str, Any], master: str, name: str, shuffle_partitions: int) -> Any:
    """A SparkSession builder with Spark's Kafka connector of ``spec`` (``packages``, ``ivy``, and
    ``excludes``/``jars`` when the exact connector is not on Maven Central), loopback networking, no UI."""
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master(master).appName(name)
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.driver.memory", "2g")
               .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
               .config("spark.jars.packages", spec["packages"])
               .config("spark.jars.ivy", spec["ivy"]))
    if spec.get("excludes"):
        builder = builder.config("spark.jars.excludes", spec["excludes"])
    if spec.get("jars"):
        builder = builder.config("spark.jars", ",".join(spec["jars"]))
    return builder


def main() -> int:
    spec = json.loads(sys.argv[1])
    builder = session_builder(spec, spec["master"], "deo-bench-jvm-kafka", shuffle_partitions=4)
    try:
        spark = builder.getOrCreate()
    except Exception as exc:  # noqa: BLE001 - reported to the parent as data
        print("RESULT " + json.dumps({"error": f"cannot start a SparkSession with {spec['packages']}: "
                                      f"{type(exc).__name__}: {str(exc)[:1500]}"}), flush=True)
        return 0
    spark.sparkContext.setLogLevel("ERROR")
    print("READY " + json.dumps({"version": spark.version}), flush=True)
    try:
        for line in sys.stdin:
            if not line.strip():
                continue
            op = json.loads(line)["op"]
            try:
                n = run(spark, spec, op)
                print("RESULT " + json.dumps({"records": n}), flush=True)
            except Exception as exc:  # noqa: BLE001 - reported to the parent as data
                print("RESULT " + json.dumps({"error": f"{type(exc).__name__}: {str(exc)[:1500]}"}), flush=True)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
