"""B5 scaling: local[1] vs local[2] on B1(a) (KafkaRDD read) and B2 (exactly-once SQLite pipeline).

Measured here, back to back (local[2] first, then a new local[1] SparkContext), rather than
reused from B1/B2, so both sides run minutes apart at most. The Kafka broker and Spark's JVM share
the same cores as the Python workers, so on a 2-core machine the ceiling is below 2x.
"""

from __future__ import annotations

from .common import Context
from .pipeline import pipeline_rate
from .read import read_rate

TARGET = 1.8


def run_b5(ctx: Context) -> None:
    res, s = ctx.results, ctx.settings
    rates = {}
    for master in ("local[2]", "local[1]"):
        rates[("read", master)] = read_rate(ctx, master)
        rates[("pipeline", master)] = pipeline_rate(ctx, master)
    res.note("B5", f"read: B1(a), {ctx.read_topic().total:,} records, median of {s.b1_repeats}; pipeline: B2's "
                   f"exactly-once SQLite workload, median of {s.b5_repeats}")
    for workload, label in (("read", "B1(a) KafkaRDD read"), ("pipeline", "B2 SQLite exactly-once pipeline")):
        for master in ("local[1]", "local[2]"):
            res.add("B5", f"{label}, {master}", rates[(workload, master)], "records/s", master=master,
                    workload=workload)
    res.check("B5", "B1(a) read local[2] / local[1]", rates[("read", "local[2]")] / rates[("read", "local[1]")],
              ">=", TARGET, "x")
    res.check("B5", "B2 SQLite pipeline local[2] / local[1]",
              rates[("pipeline", "local[2]")] / rates[("pipeline", "local[1]")], ">=", TARGET, "x")
