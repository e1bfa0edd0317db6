"""B5 scaling: local[1] vs local[2] on B1(a) (KafkaRDD read) and B2 (exactly-once SQLite pipeline).

``b5_repeats`` rounds alternate the two masters (local[2] then local[1], then local[1] then
local[2], …; a new SparkContext each time), so a change in the machine's speed during the run
falls on both sides alike. Per round and master: one untimed read pass, one timed read of the
whole topic, a small pipeline warm-up and one timed pipeline run; each timed step records wall
and CPU time (every benchmark process, broker included) and the CPU other processes took.

A ratio above the machine's core count cannot come from the extra core: such a result is
reported as FLAGGED invalid (a slower phase of a shared machine during the local[1] runs), never
as a pass. So is a ratio measured while other processes left local[2] less than 1.5 cores (the
machine saturated: ours + others' CPU >= 90% of the cores): it cannot show scaling either way.
The Kafka broker and Spark's JVM share the same cores as the Python workers.
"""

from __future__ import annotations

import functools
import os
from typing import Dict, List, Tuple

from .common import Context, median, spread
from .cpu import CpuSample
from .pipeline import plan_batches, run_exactly_once, warm_up
from .read import kafkardd_pass, timed_pass

TARGET = 1.8
MASTERS = ("local[2]", "local[1]")


def run_b5(ctx: Context) -> None:
    res, s = ctx.results, ctx.settings
    total = ctx.read_topic().total
    batches = plan_batches(ctx, s.b2_records, s.b2_batches)
    samples: Dict[Tuple[str, str], List[CpuSample]] = {}
    records: Dict[str, int] = {"read": total}
    for rnd in range(s.b5_repeats):
        for master in (MASTERS if rnd % 2 == 0 else MASTERS[::-1]):
            ctx.stop_spark()  # a fresh SparkContext per round and master
            kafkardd_pass(ctx, master)  # untimed: starts the workers, fills the consumer cache
            samples.setdefault(("read", master), []).append(
                timed_pass(ctx, functools.partial(kafkardd_pass, ctx, master), f"B5 read {master}"))
            warm_up(ctx, master, batches)
            meter = ctx.meter()
            run = run_exactly_once(ctx, master, "sqlite", ctx.store_url("sqlite"), batches)
            sample = meter.stop()
            records["pipeline"] = run.records
            if not run.ok:
                res.note("B5", "RESULT MISMATCH: " + run.detail)
            samples.setdefault(("pipeline", master), []).append(sample)
    cores = os.cpu_count() or 1
    res.note("B5", f"{s.b5_repeats} round(s) alternating the masters, a new SparkContext each; per round and master "
                   f"one timed B1(a) read of {total:,} records (after an untimed pass) and one run of B2's "
                   f"exactly-once SQLite workload; medians and spread; {cores} CPUs on the machine")
    med: Dict[Tuple[str, str], float] = {}
    cpu_med: Dict[Tuple[str, str], float] = {}
    for workload, label in (("read", "B1(a) KafkaRDD read"), ("pipeline", "B2 SQLite exactly-once pipeline")):
        n = records[workload]
        for master in ("local[1]", "local[2]"):
            xs = samples[(workload, master)]
            wall = [n / x.wall for x in xs]
            cpu = [n / max(x.ours, 1e-9) for x in xs]
            med[(workload, master)] = median(wall)
            cpu_med[(workload, master)] = median(cpu)
            res.add("B5", f"{label}, {master}", median(wall), "records/s",
                    f"records/s {spread(wall)}; records per CPU-second {spread(cpu)}; "
                    f"{median([x.cores_used for x in xs]):.2f} cores busy (ours), other processes "
                    f"{median([x.others_cores for x in xs]):.2f} cores",
                    master=master, workload=workload, runs=wall, cpu_rates=cpu, samples=[x.as_dict() for x in xs])
    for workload, label in (("read", "B1(a) read"), ("pipeline", "B2 SQLite pipeline")):
        ratio = med[(workload, "local[2]")] / med[(workload, "local[1]")]
        cpu_ratio = cpu_med[(workload, "local[2]")] / cpu_med[(workload, "local[1]")]
        xs = samples[(workload, "local[2]")]
        ours2, others2 = median([x.cores_used for x in xs]), median([x.others_cores for x in xs])
        invalid = ""
        if ratio > cores:
            invalid = (f"{ratio:.2f}x is above the {cores} cores of this machine: the local[1] runs were slowed by "
                       "something else, not sped up by the second core")
        elif ours2 < 1.5 and ours2 + others2 >= 0.9 * cores:
            invalid = (f"no second core was free: at local[2] this benchmark got {ours2:.2f} cores while other "
                       f"processes took {others2:.2f} of the {cores}")
        res.check("B5", f"{label} local[2] / local[1], records per wall-second", ratio, ">=", TARGET, "x",
                  f"records per CPU-second local[2]/local[1] {cpu_ratio:.2f}x", invalid)
