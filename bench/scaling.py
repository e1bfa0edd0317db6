"""B5 scaling: local[1] vs local[2] on B1(a) (KafkaRDD read) and B2 (exactly-once SQLite pipeline).

Measured here rather than reused from B1/B2, in ``b5_repeats`` rounds that alternate the two
masters (local[2] then local[1], then local[1] then local[2], …; a new SparkContext each time), so
a change in the machine's speed during the run — large on a shared VM — falls on both sides alike.
Each round times one read of the whole topic (after an untimed pass) and one pipeline run (after
a small warm-up batch) per master; medians over the rounds are reported. The Kafka broker and
Spark's JVM share the same cores as the Python workers, so on a 2-core machine the ceiling is
below 2x.
"""

from __future__ import annotations

from typing import Dict, List, Tuple

from .common import Context, median
from .pipeline import plan_batches, run_exactly_once, warm_up
from .read import kafkardd_runs

TARGET = 1.8
MASTERS = ("local[2]", "local[1]")


def run_b5(ctx: Context) -> None:
    res, s = ctx.results, ctx.settings
    total = ctx.read_topic().total
    batches = plan_batches(ctx, s.b2_records, s.b2_batches)
    rates: Dict[Tuple[str, str], List[float]] = {}
    for rnd in range(s.b5_repeats):
        for master in (MASTERS if rnd % 2 == 0 else MASTERS[::-1]):
            ctx.stop_spark()  # a fresh SparkContext per round and master
            rates.setdefault(("read", master), []).append(total / kafkardd_runs(ctx, master, 1)[0])
            warm_up(ctx, master, batches)
            run = run_exactly_once(ctx, master, "sqlite", ctx.store_url("sqlite"), batches)
            if not run.ok:
                res.note("B5", "RESULT MISMATCH: " + run.detail)
            rates.setdefault(("pipeline", master), []).append(run.rate)
    res.note("B5", f"{s.b5_repeats} round(s) alternating the masters, a new SparkContext each; per round and master "
                   f"one timed B1(a) read of {total:,} records (after an untimed pass) and one run of B2's "
                   f"exactly-once SQLite workload; medians")
    med = {k: median(v) for k, v in rates.items()}
    for workload, label in (("read", "B1(a) KafkaRDD read"), ("pipeline", "B2 SQLite exactly-once pipeline")):
        for master in ("local[1]", "local[2]"):
            runs = rates[(workload, master)]
            res.add("B5", f"{label}, {master}", med[(workload, master)], "records/s",
                    "runs " + ", ".join(f"{r:,.0f}" for r in runs), master=master, workload=workload, runs=runs)
    res.check("B5", "B1(a) read local[2] / local[1]", med[("read", "local[2]")] / med[("read", "local[1]")],
              ">=", TARGET, "x")
    res.check("B5", "B2 SQLite pipeline local[2] / local[1]",
              med[("pipeline", "local[2]")] / med[("pipeline", "local[1]")], ">=", TARGET, "x")
