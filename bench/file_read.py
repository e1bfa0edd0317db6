"""B6 file source read throughput (held to the same rules as every benchmark here).

The four cases of :mod:`bench.file_cases` — A bare Python, B the file source's reader alone, C the
file source through Spark, D Spark's ``spark.read.text`` — read the same generated files
(``b6_files`` x ``b6_mib`` MiB) and must count the same lines; an untimed pass first checks that
every side decodes the same characters. Then one warm-up round and ``b6_rounds`` timed rounds run
A, B, C, D each, the order rotated by one case per round, so no case always follows the JVM's
garbage and every case gets the same warm-up.

Every pass gets wall time and CPU time (:class:`bench.cpu.CpuMeter`): A and B are charged the
driver process alone (the idle JVM and workers meanwhile are reported beside), C and D the driver's
whole process tree (driver, Spark JVM, Python daemon and workers). B6 runs first in a run, before
any Kafka/Redis/PostgreSQL is started, so that tree holds nothing else. Ratios are taken per round
(the cases of one round ran seconds apart); each is split into CPU efficiency (lines per
CPU-second) and parallelism (the busy-core ratio). A ratio whose parallelism part exceeds the core
count cannot be physically true (the baseline was starved, or a process escaped the accounting):
it is flagged, and a target on it is FLAGGED invalid, never passed. So is any target on a case
whose measured busy cores exceed what it can use (1 for A and B, the cores for C and D).

Targets: parity with the in-run anchors, per wall-second and per CPU-second — B (the reader) >= A
(Python's own line loop) and C (the file source through Spark) >= D (Spark's text source).
"""

from __future__ import annotations

import os
import tempfile
import time
from typing import Any, Callable, Dict, List, Sequence, Tuple

from .common import Context, Results, log, median, spread
from .cpu import TICKS_PER_SECOND, CpuMeter, CpuSample
from .file_cases import (
    CASES,
    LABELS,
    MIB,
    DataSet,
    count_bare,
    count_range_rdd,
    count_reader,
    count_spark_text,
    decoded_chars,
    generate,
    plan_ranges,
)

MASTER = "local[2]"
PAIRS = (("B", "A"), ("C", "A"), ("D", "A"), ("C", "D"), ("C", "B"))
TARGETS = {("B", "A"): ("file source reader vs bare Python loop, 1 process", 1.0),
           ("C", "D"): (f"file source through Spark vs spark.read.text, {MASTER}", 1.0)}
SLACK = 1.1  # a busy-core figure up to 10% above its bound is rounding, not an error
SINGLE = ("A", "B")  # cases run in the driver process, one core


def charged_cpu(case: str, s: CpuSample) -> float:
    """CPU seconds charged to ``case``: the driver alone for A and B, the whole tree for C and D."""
    return s.driver if case in SINGLE else s.ours


def run_b6(ctx: Context) -> None:
    s = ctx.settings
    cores = len(os.sched_getaffinity(0))
    directory = tempfile.mkdtemp(prefix="files-", dir=ctx.workdir)  # the run's workdir is removed at the end
    t0 = time.perf_counter()
    data = generate(directory, s.b6_files, s.b6_mib * MIB)
    gen_s = time.perf_counter() - t0
    log(f"B6 generated {len(data.paths)} files x {s.b6_mib} MiB ({data.lines:,} lines) in {gen_s:.1f}s")
    running = ctx.services_running()
    sc = ctx.spark(MASTER)
    from pyspark.sql import SparkSession

    biggest = max(os.path.getsize(p) for p in data.paths)
    spark = (SparkSession.builder.config("spark.sql.files.maxPartitionBytes", str(biggest))  # one partition per file
             .getOrCreate())
    try:
        _notes(ctx, spark, sc, data, biggest, gen_s, cores, running)
        runners: Dict[str, Callable[[], int]] = {
            "A": lambda: count_bare(data.paths),
            "B": lambda: count_reader(data.glob),
            "C": lambda: count_range_rdd(sc, data.glob),
            "D": lambda: count_spark_text(spark, data.paths),
        }
        samples, orders = run_rounds(runners, s.b6_rounds, data.lines)
    finally:
        spark.stop()
        ctx.stop_spark()
    summarize(ctx.results, samples, data, cores)
    idle = [x.ours - x.driver for c in SINGLE for x in samples[c]]
    ctx.results.note("B6", f"round orders (rotated): {', '.join(orders)}; one equal warm-up round first; "
                           f"CPU of A/B is the driver process's; meanwhile the idle JVM and workers used median "
                           f"{median(idle):.2f} s per pass (not charged to A/B); CPU of C/D is the driver + JVM + "
                           f"Python daemon and workers (user+sys from /proc, reaped children included, counted in "
                           f"{1000 / TICKS_PER_SECOND:.0f} ms ticks: passes of well under a CPU-second get coarse "
                           f"CPU figures)")


def _notes(ctx: Context, spark: Any, sc: Any, data: DataSet, biggest: int, gen_s: float, cores: int,
           running: Sequence[str]) -> None:
    """The settings notes and the untimed checks: partitions, equal decoded (lines, characters)."""
    import pyspark

    from dstream_exactly_once.streaming._range_rdd import make_range_rdd

    res, s = ctx.results, ctx.settings
    ranges, reader = plan_ranges(data.glob)
    parts_c: int = make_range_rdd(sc, ranges, reader).getNumPartitions()
    parts_d: int = spark.read.text(list(data.paths)).rdd.getNumPartitions()
    res.note("B6", f"data: {len(data.paths)} files x {s.b6_mib} MiB = {data.bytes:,} bytes, {data.lines:,} lines "
                   f"(mean {data.bytes / data.lines:.0f} bytes/line incl. newline), "
                   f"{data.lines - data.multibyte_lines:,} ASCII-only and {data.multibyte_lines:,} with multi-byte "
                   f"UTF-8 ({data.chars:,} characters); generated in {gen_s:.1f} s into a temp dir (page cache warm "
                   f"after the warm-up round); MB = 10^6 bytes")
    res.note("B6", f"rounds: 1 warm-up + {s.b6_rounds} timed, cases A B C D interleaved in every round; Spark "
                   f"{pyspark.__version__}, master {MASTER} for C and D, partitions C={parts_c} D={parts_d} "
                   f"(spark.sql.files.maxPartitionBytes={biggest}); A and B single-threaded in the driver; {cores} "
                   f"CPUs; file source options: defaults (UTF-8 strict, bytes.max 2 GiB: one range per file, "
                   f"BLAKE2b fingerprint + tail hash checked per range)")
    if parts_c != len(data.paths) or parts_d != len(data.paths):
        res.note("B6", f"WARNING: partitions differ from the file count {len(data.paths)} (C={parts_c}, D={parts_d})")
    if running:
        res.note("B6", f"WARNING: {', '.join(running)} already running: their idle CPU is in C/D's process tree")
    chars = decoded_chars(spark, sc, data)
    want = (data.lines, data.chars)
    if any(v != want for v in chars.values()):
        raise RuntimeError(f"decoded (lines, characters) differ: {chars}, generated {want}")
    res.note("B6", f"decoded (lines, characters) equal on every side (untimed pass): {want}")


def run_rounds(runners: Dict[str, Callable[[], int]], rounds: int,
               expected: int) -> Tuple[Dict[str, List[CpuSample]], List[str]]:
    """Round 0 (the warm-up, the same work) then ``rounds`` timed rounds, the order rotated each round."""
    samples: Dict[str, List[CpuSample]] = {c: [] for c in CASES}
    orders: List[str] = []
    for rnd in range(rounds + 1):
        k = rnd % len(CASES)
        order = CASES[k:] + CASES[:k]
        for case in order:
            meter = CpuMeter().start()
            lines = runners[case]()
            sample = meter.stop()
            if lines != expected:
                raise RuntimeError(f"B6 case {case} counted {lines:,} lines in round {rnd}, the files hold "
                                   f"{expected:,}")
            if rnd:
                samples[case].append(sample)
        if rnd:
            orders.append("".join(order))
        log(f"B6 {'warm-up' if rnd == 0 else f'round {rnd}/{rounds}'} done ({''.join(order)})")
    return samples, orders


def summarize(res: Results, samples: Dict[str, List[CpuSample]], data: DataSet, cores: int) -> None:
    """One row per case, one per ratio, the targets; impossible figures flagged (pure: unit-tested)."""
    starved: Dict[str, str] = {}  # case -> why its CPU accounting cannot be right
    for c in CASES:
        xs = samples[c]
        cpu = [charged_cpu(c, x) for x in xs]
        lps = [data.lines / x.wall for x in xs]
        lpc = [data.lines / y for y in cpu if y > 0]
        busy = [y / x.wall for x, y in zip(xs, cpu, strict=True)]
        bound = 1.0 if c in SINGLE else float(cores)
        # more CPU than the case's cores allow in its wall time, beyond 10% and one tick at each end of the pass
        if any(y > bound * x.wall * SLACK + 2 / TICKS_PER_SECOND for x, y in zip(xs, cpu, strict=True)):
            starved[c] = (f"{c} had {max(busy):.2f} busy cores in one round, more than the {bound:g} it can use "
                          f"(CPU accounting wrong)")
            res.note("B6", "FLAG: " + starved[c])
        res.add("B6", LABELS[c], median(lps), "lines/s",
                f"lines/s {spread(lps)}; MB/s median {median([data.bytes / 1e6 / x.wall for x in xs]):.1f}; "
                f"wall s {spread([x.wall for x in xs], '{:.2f}')}; CPU s median {median(cpu):.2f} "
                f"({'driver process' if c in SINGLE else 'driver + JVM + Python workers'}), {median(busy):.2f} "
                f"cores busy; lines per CPU-second {spread(lpc) if lpc else 'n/a'}; other processes "
                f"{median([x.others_cores for x in xs]):.2f} cores",
                case_id=c, lines=data.lines, bytes=data.bytes, rates=lps, cpu_rates=lpc,
                samples=[x.as_dict() for x in xs])
    for a, b in PAIRS:
        _pair(res, samples, a, b, cores, starved)


def _pair(res: Results, samples: Dict[str, List[CpuSample]], a: str, b: str, cores: int,
          starved: Dict[str, str]) -> None:
    """``a / b`` per round: lines per wall-second, per CPU-second and the parallelism part between them."""
    wall, cpu, par = [], [], []
    for x, y in zip(samples[a], samples[b], strict=True):  # x: a's pass, y: b's pass of the same round
        wall.append(y.wall / x.wall)
        ca, cb = charged_cpu(a, x), charged_cpu(b, y)
        if ca > 0 and cb > 0:
            cpu.append(cb / ca)
            par.append((y.wall / x.wall) / (cb / ca))
    mid = median(par) if par else float("nan")
    bad = sum(1 for p in par if p > cores * SLACK)
    invalid = flag = ""
    if mid > cores * SLACK:
        invalid = flag = (f"the median wall ratio needs {mid:.2f}x parallelism on {cores} cores: not physically true "
                          f"(the baseline was starved by other load, or CPU escaped the accounting)")
        verdict = f"FLAGGED: {invalid}"
    elif bad:
        flag = verdict = (f"median valid; {bad} of {len(par)} rounds not (max parallelism part {max(par):.2f}x > "
                          f"{cores} cores: those rounds' baseline was starved by other load)")
    else:
        verdict = f"valid (no round's parallelism part exceeds {cores} cores)"
    if flag:
        res.note("B6", f"FLAG: {a} / {b}: {flag}")
    x2 = "{:.2f}x"
    res.add("B6", f"{a} / {b} lines per wall-second, per round", median(wall), "x",
            f"{spread(wall, x2)}; lines per CPU-second {spread(cpu, x2) if cpu else 'n/a'}; parallelism part "
            f"(busy-core ratio) {spread(par, x2) if par else 'n/a'}; {verdict}",
            pair=f"{a}/{b}", ratios=wall, cpu_ratios=cpu, parallelism=par, valid=not invalid)
    if (a, b) not in TARGETS:
        return
    what, target = TARGETS[(a, b)]
    accounting = "; ".join(starved[c] for c in (a, b) if c in starved)
    rounds = f"per-round ratios {min(wall):.2f}–{max(wall):.2f}, parallelism part median {mid:.2f}x"
    res.check("B6", f"{a} / {b}: {what}, lines per wall-second", median(wall), ">=", target, "x", rounds,
              "; ".join(x for x in (invalid, accounting) if x))
    res.check("B6", f"{a} / {b}: {what}, lines per CPU-second", median(cpu) if cpu else None, ">=", target, "x",
              f"per-round ratios {min(cpu):.2f}–{max(cpu):.2f}" if cpu else "no CPU time measured", accounting)
