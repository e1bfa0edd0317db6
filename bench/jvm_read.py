"""B1(c) in its own process: Spark's JVM Kafka source reading the read topic in batch mode.

``python -m bench.jvm_read '<json spec>'`` prints one ``RESULT {"runs": [seconds…]}`` line (or
``RESULT {"error": …}``). A warm-up count of the whole topic comes first (resolves the classpath,
starts executors, fills the consumer pool, warms the JIT, as case (a) gets), then ``repeats``
timed ``spark.read.format("kafka")…load().count()`` over the whole topic.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any, Dict


def read_count(spark: Any, bootstrap: str, topic: str, ends: Dict[str, int], limit: int = 0) -> int:
    start = {topic: {p: 0 for p in ends}}
    end = {topic: {p: (min(e, limit) if limit else e) for p, e in ends.items()}}
    df = (spark.read.format("kafka")
          .option("kafka.bootstrap.servers", bootstrap)
          .option("assign", json.dumps({topic: sorted(int(p) for p in ends)}))
          .option("startingOffsets", json.dumps(start))
          .option("endingOffsets", json.dumps(end))
          .load())
    return int(df.count())


def main() -> int:
    spec = json.loads(sys.argv[1])
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master(spec["master"]).appName("deo-bench-jvm-kafka")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.driver.memory", "2g")
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.jars.packages", spec["packages"])
               .config("spark.jars.ivy", spec["ivy"]))
    if spec.get("excludes"):
        builder = builder.config("spark.jars.excludes", spec["excludes"])
    if spec.get("jars"):
        builder = builder.config("spark.jars", ",".join(spec["jars"]))
    try:
        spark = builder.getOrCreate()
    except Exception as exc:  # noqa: BLE001 - reported to the parent as data
        print("RESULT " + json.dumps({"error": f"cannot start a SparkSession with {spec['packages']}: "
                                      f"{type(exc).__name__}: {str(exc)[:1500]}"}), flush=True)
        return 0
    spark.sparkContext.setLogLevel("ERROR")
    ends = {str(p): int(e) for p, e in spec["ends"].items()}
    try:
        read_count(spark, spec["bootstrap"], spec["topic"], ends)
        runs = []
        for _ in range(int(spec["repeats"])):
            t0 = time.perf_counter()
            n = read_count(spark, spec["bootstrap"], spec["topic"], ends)
            runs.append(time.perf_counter() - t0)
            if n != spec["expected"]:
                raise RuntimeError(f"the JVM source counted {n} records, expected {spec['expected']}")
        print("RESULT " + json.dumps({"runs": runs, "version": spark.version}), flush=True)
    except Exception as exc:  # noqa: BLE001 - reported to the parent as data
        print("RESULT " + json.dumps({"error": f"{type(exc).__name__}: {str(exc)[:1500]}"}), flush=True)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
