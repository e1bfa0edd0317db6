"""Planning at scale: the driver side of one batch at 100 / 1,000 / 10,000 files and partitions.

``python3 -m bench.planning_scale [--sizes 100,1000,10000] [--reps N] [--only files|kafka]
[--profile] [--results FILE]``

**Files** (``FilePlanner``, no Spark): ``N`` one-line files ``app-<i>.log`` under one glob. The first
batch (first start, ``starting.offsets=earliest``) plans every file from byte 0: its planning time is
reported on its own. Then, before each timed batch (untimed), ``3 %`` of the files (300 of 10,000)
get a line appended and ``0.2 %`` (20) rotate by rename (``app-<i>.log`` -> ``app-<i>.log.1``, the
older ``.1`` deleted, a new one-line ``app-<i>.log`` written): every other file is idle. Timed:
``plan()`` + ``advance()``. The size of the position documents is the stores' encoding of them
(position key + the JSON identity document + an 8-byte offset) over every file after the first
batch.

**Kafka** (``DirectPlanner`` + ``KafkaMetadata`` as ``createDirectStream`` builds them): topics of
100 partitions (one at a time: a KRaft broker refuses one CreateTopics that large), subscribed by
one pattern matching 1 / 10 / 100 of them; a producer process writes 2,000 records/s round-robin
over every matched partition while the batches run; partition discovery on its default interval
(5 s), batches paced 0.2 s apart so the timed batches include discovery rounds. Timed:
``plan(1.0)`` + ``advance()``; then the batch's broker round trip alone (``KafkaMetadata.latest`` of
every partition, 10 times). Driver memory per partition: tracemalloc's traced bytes held by a
second planner and its metadata client after ``start()`` and three batches, over the partitions.

Wall time per batch (p50, p99, p25–p75) and CPU time of this process per batch beside it
(``time.process_time``; the Kafka broker and the producer are other processes). The machine is
shared (other test runs, a soak benchmark): the 1-minute load average at start and end is printed,
and CPU time is the steadier measure. ``--profile`` prints cProfile's top functions of the timed
batches at the largest size.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import random
import shutil
import sys
import tempfile
import time
import tracemalloc
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from .common import log, percentile
from .planning import PRODUCE_RATE, Producing

FILE_TARGET_MS = 250.0
KAFKA_TARGET_MS = 50.0
TOPIC_PARTITIONS = 100
PACE_S = 0.2  # between Kafka batches: the timed batches span several discovery intervals


def _load() -> str:
    return f"{os.getloadavg()[0]:.2f}"


@dataclass
class Timings:
    """Wall and CPU milliseconds of each timed batch."""

    wall: List[float] = field(default_factory=list)
    cpu: List[float] = field(default_factory=list)

    def time(self, fn: Callable[[], Any]) -> Any:
        c0, t0 = time.process_time(), time.perf_counter()
        out = fn()
        self.wall.append((time.perf_counter() - t0) * 1000)
        self.cpu.append((time.process_time() - c0) * 1000)
        return out

    def cells(self) -> List[str]:
        w, c = self.wall, self.cpu
        return [f"{percentile(w, 50):.1f}", f"{percentile(w, 99):.1f}",
                f"{percentile(w, 25):.1f}–{percentile(w, 75):.1f}", f"{sum(c) / len(c):.1f}",
                f"{percentile(c, 50):.1f}", str(len(w))]


def _print_profile(prof: Optional[cProfile.Profile], what: str) -> None:
    """cProfile's top functions by own time (stderr); profiled batches are slower than the timed ones."""
    if prof is not None:
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(30)
        print(f"--- profile: {what}\n{out.getvalue()}", file=sys.stderr)


# ---------------------------------------------------------------------------------------------- files
class FileWorkload:
    """``n`` one-line files; :meth:`step` appends to some and rotates a few by rename."""

    def __init__(self, directory: str, n: int, seed: int = 7) -> None:
        self.directory, self.n = directory, n
        self.rng = random.Random(seed)
        self.grow = max(1, n * 3 // 100)
        self.rotate = max(1, n // 500)
        self.seq = 0
        for i in range(n):
            self._write(self.path(i), "w")

    @property
    def glob(self) -> str:
        return os.path.join(self.directory, "app-*.log*")

    def path(self, i: int) -> str:
        return os.path.join(self.directory, f"app-{i:05d}.log")

    def _write(self, path: str, mode: str) -> None:
        self.seq += 1
        with open(path, mode, encoding="utf-8") as f:
            f.write(f"2026-11-26T00:00:00.{self.seq % 1000:03d}Z INFO [worker-{self.seq % 7}] seq={self.seq} "
                    f"request served status=200 took=12ms\n")

    def step(self) -> None:
        picked = self.rng.sample(range(self.n), self.grow + self.rotate)
        for i in picked[:self.grow]:
            self._write(self.path(i), "a")
        for i in picked[self.grow:]:
            os.replace(self.path(i), self.path(i) + ".1")
            self._write(self.path(i), "w")

    def matched(self) -> int:
        return len(os.listdir(self.directory))


def position_bytes(ranges: Sequence[Any]) -> int:
    """Bytes the stores keep for these ranges' positions: key, JSON document (as the stores encode it),
    an 8-byte offset."""
    return sum(len(r.position_key) + 8 + len(json.dumps(r.position_meta(), separators=(",", ":"), sort_keys=True))
               for r in ranges)


def bench_files(n: int, reps: int, warm: int, profile: bool) -> Dict[str, Any]:
    from dstream_exactly_once.files import FilePlanner, FileSourceOptions

    work = tempfile.mkdtemp(prefix="deo-bench-planscale-")
    try:
        wl = FileWorkload(work, n)
        time.sleep(2.5)  # the files settle (see the planner's unchanged-file shortcut)
        planner = FilePlanner(wl.glob, FileSourceOptions(starting_offsets="earliest"))
        planner.start({})
        first = Timings()
        prof = cProfile.Profile() if profile else None
        ranges = first.time(planner.plan if prof is None else lambda: prof.runcall(planner.plan))
        _print_profile(prof, f"first batch, {n:,} files")
        planner.advance(ranges)
        doc_bytes = position_bytes(ranges)
        first_ranges = len(ranges)
        for _ in range(warm):
            wl.step()
            planner.advance(planner.plan())
        steady = Timings()
        prof = cProfile.Profile() if profile else None
        planned = 0
        for _ in range(reps):
            wl.step()

            def batch() -> None:
                nonlocal planned
                rs = planner.plan()
                planner.advance(rs)
                planned += len(rs)

            if prof is not None:
                prof.enable()
            steady.time(batch)
            if prof is not None:
                prof.disable()
        _print_profile(prof, f"{reps} batches, {n:,} files")
        return {"n": n, "first": first, "steady": steady, "doc_bytes": doc_bytes, "first_ranges": first_ranges,
                "ranges_per_batch": planned / max(reps, 1), "matched": wl.matched(), "grow": wl.grow,
                "rotate": wl.rotate, "counters": planner.counters}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def bench_first_batch_spark(n: int) -> Dict[str, Any]:
    """The whole first batch over ``n`` one-line files from ``earliest`` on ``local[2]``: planning, the task
    planner packing the ranges (default options: ``sc.defaultParallelism`` tasks), and a Spark job
    counting every line (what a file stream's first batch runs before its output)."""
    from dstream_exactly_once.core._tasks import TaskOptions, plan_tasks
    from dstream_exactly_once.files import FilePlanner, FileSourceOptions
    from dstream_exactly_once.files.spark._utils import FileRDD
    from dstream_exactly_once.streaming._range_rdd import make_range_rdd
    from dstream_exactly_once.testing import make_spark_context

    work = tempfile.mkdtemp(prefix="deo-bench-planscale-spark-")
    sc = make_spark_context("local[2]", "deo-bench-planscale", {"spark.driver.memory": "1g"})
    try:
        wl = FileWorkload(work, n)
        sc.parallelize(range(4), 2).count()  # Python workers started before the timed batch
        planner = FilePlanner(wl.glob, FileSourceOptions())
        planner.start({})
        t0, c0 = time.perf_counter(), time.process_time()
        ranges = planner.plan()
        t_plan = time.perf_counter()
        reader = planner.reader()
        tasks = plan_tasks(ranges, TaskOptions(), parallelism=sc.defaultParallelism, can_split=reader.can_split)
        lines = make_range_rdd(sc, ranges, reader, FileRDD, tasks=tasks).count()
        t_end = time.perf_counter()
        planner.advance(ranges)
        return {"n": n, "plan_ms": (t_plan - t0) * 1000, "total_ms": (t_end - t0) * 1000,
                "driver_cpu_ms": (time.process_time() - c0) * 1000, "tasks": len(tasks), "lines": lines}
    finally:
        sc.stop()
        shutil.rmtree(work, ignore_errors=True)


# ---------------------------------------------------------------------------------------------- kafka
def topic_name(i: int) -> str:
    return f"planscale-{i:03d}"


def pattern_for(topics: int) -> str:
    """A regular expression matching ``planscale-000`` .. ``planscale-<topics - 1>`` (1, 10 or 100 topics)."""
    return {1: r"planscale-000", 10: r"planscale-00\d", 100: r"planscale-\d{2}\d"}[topics]


def _planner(bootstrap: str, pattern: str) -> Tuple[Any, Any]:
    from dstream_exactly_once.kafka._metadata import KafkaMetadata
    from dstream_exactly_once.kafka._params import parse_kafka_params
    from dstream_exactly_once.kafka._planner import DirectPlanner
    from dstream_exactly_once.kafka._strategies import SubscribePattern

    md = KafkaMetadata(parse_kafka_params({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"}))
    return md, DirectPlanner(md, SubscribePattern(pattern), auto_offset_reset="earliest")


def bench_kafka(bootstrap: str, n: int, reps: int, warm: int, profile: bool) -> Dict[str, Any]:
    topics = n // TOPIC_PARTITIONS
    pattern = pattern_for(topics)
    targets = [(topic_name(i), TOPIC_PARTITIONS) for i in range(topics)]
    # memory: a planner of its own, traced from before it exists to after three batches
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    md, planner = _planner(bootstrap, pattern)
    try:
        planner.start()
        for _ in range(3):
            planner.advance(planner.plan(1.0))
        held = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
        md.close()
    md, planner = _planner(bootstrap, pattern)
    steady, lookup = Timings(), Timings()
    prof = cProfile.Profile() if profile else None
    discoveries = 0
    try:
        planner.start()
        if len(planner.current) != n:
            raise RuntimeError(f"pattern {pattern!r} matched {len(planner.current)} partitions, not {n}")
        with Producing(bootstrap, targets, PRODUCE_RATE, lead=3.0) as producing:
            for i in range(warm + reps):
                last = planner._last_discovery

                def batch() -> None:
                    planner.advance(planner.plan(1.0))

                if i < warm:
                    batch()
                else:
                    if prof is not None:
                        prof.enable()
                    steady.time(batch)
                    if prof is not None:
                        prof.disable()
                    discoveries += planner._last_discovery != last
                time.sleep(PACE_S)
            for _ in range(10):  # the batch's broker round trip alone: ListOffsets of every partition
                lookup.time(lambda: md.latest(planner.current))
                time.sleep(PACE_S)
    finally:
        md.close()
    _print_profile(prof, f"{reps} batches, {n:,} partitions")
    return {"n": n, "topics": topics, "steady": steady, "lookup": lookup, "bytes_per_partition": held / n,
            "produce_rate": producing.rate, "discoveries": discoveries}


def create_topics(kafka: Any, topics: int) -> None:
    for i in range(topics):
        log(f"creating {topic_name(i)} ({TOPIC_PARTITIONS} partitions)")
        kafka.create_topic(topic_name(i), TOPIC_PARTITIONS)


# ---------------------------------------------------------------------------------------------- report
def rows(results: List[Dict[str, Any]], source: str, size: Callable[[Dict[str, Any]], str],
         notes: Callable[[Dict[str, Any]], str], target: float, what: str) -> Tuple[List[str], List[str]]:
    """The table rows of one source's ``results`` and its check at 10,000 (``what``: files, partitions)."""
    out, checks = [], []
    for r in results:
        s = r["steady"]
        out.append(f"| {source} | {size(r)} | " + " | ".join(s.cells()) + f" | {notes(r)} |")
        if r["n"] == 10_000:
            p50 = percentile(s.wall, 50)
            checks.append(f"| {source}: plan + advance p50 at 10,000 {what} | {p50:.1f} ms (CPU p50 "
                          f"{percentile(s.cpu, 50):.1f} ms) | <= {target:.0f} ms | "
                          f"{'PASS' if p50 <= target else 'FAIL'} |")
    return out, checks


def file_rows(results: List[Dict[str, Any]]) -> Tuple[List[str], List[str]]:
    out, checks = rows(results, "files", lambda r: f"{r['n']:,} ({r['matched']:,} matched at the end)",
                       lambda r: f"{r['grow']} grow + {r['rotate']} rotate per batch, {r['ranges_per_batch']:.0f} "
                                 f"ranges per batch", FILE_TARGET_MS, "files")
    for r in results:
        f = r["first"]
        out.append(f"| files, first batch from earliest | {r['n']:,} one-line files | {f.wall[0]:.1f} | – | – | "
                   f"{f.cpu[0]:.1f} | {f.cpu[0]:.1f} | 1 | {r['first_ranges']:,} ranges; position documents "
                   f"{r['doc_bytes']:,} bytes ({r['doc_bytes'] / max(r['first_ranges'], 1):.0f} per file) |")
    return out, checks


def kafka_rows(results: List[Dict[str, Any]]) -> Tuple[List[str], List[str]]:
    return rows(results, "Kafka", lambda r: f"{r['n']:,} ({r['topics']} topics x {TOPIC_PARTITIONS}, one pattern)",
                lambda r: f"{r['discoveries']} discovery rounds timed; the ListOffsets look-up alone p50 "
                          f"{percentile(r['lookup'].wall, 50):.1f} ms (CPU {percentile(r['lookup'].cpu, 50):.1f} ms); "
                          f"producer {r['produce_rate']:,.0f} records/s; "
                          f"driver memory {r['bytes_per_partition']:,.0f} B per partition (tracemalloc)",
                KAFKA_TARGET_MS, "partitions")


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m bench.planning_scale", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="100,1000,10000", help="files and partitions (multiples of 100)")
    p.add_argument("--reps", type=int, default=30, help="timed batches per case")
    p.add_argument("--warm", type=int, default=3, help="warm-up batches per case")
    p.add_argument("--only", choices=("files", "kafka"), default=None)
    p.add_argument("--profile", action="store_true", help="cProfile the timed batches of the largest size")
    p.add_argument("--spark", action="store_true",
                   help="also time the whole first batch over the largest number of files with Spark (local[2])")
    p.add_argument("--heap", default="2g", help="the test broker's JVM heap")
    p.add_argument("--results", default=None, help="markdown file to append the section to")
    args = p.parse_args(argv)
    sizes = [int(x) for x in args.sizes.split(",") if x.strip()]
    if any(n % TOPIC_PARTITIONS or n // TOPIC_PARTITIONS not in (1, 10, 100) for n in sizes):
        p.error(f"--sizes must be among 100, 1000, 10000, got {args.sizes!r}")
    load_start, started = _load(), time.time()
    files: List[Dict[str, Any]] = []
    kafka: List[Dict[str, Any]] = []
    if args.only in (None, "files"):
        for n in sizes:
            log(f"files: {n:,}")
            files.append(bench_files(n, args.reps, args.warm, args.profile and n == max(sizes)))
            log(f"files {n:,}: p50 {percentile(files[-1]['steady'].wall, 50):.1f} ms, first batch "
                f"{files[-1]['first'].wall[0]:.0f} ms")
    spark: Optional[Dict[str, Any]] = None
    if args.spark and args.only in (None, "files"):
        log(f"files: the whole first batch over {max(sizes):,} files with Spark local[2]")
        spark = bench_first_batch_spark(max(sizes))
        log(f"spark first batch: {spark['total_ms']:.0f} ms")
    if args.only in (None, "kafka"):
        from dstream_exactly_once.testing import LocalKafka

        broker = LocalKafka(heap=args.heap)
        broker.start(timeout=180)
        try:
            create_topics(broker, max(sizes) // TOPIC_PARTITIONS)
            for n in sizes:
                log(f"kafka: {n:,} partitions")
                kafka.append(bench_kafka(broker.bootstrap, n, args.reps, args.warm, args.profile and n == max(sizes)))
                log(f"kafka {n:,}: p50 {percentile(kafka[-1]['steady'].wall, 50):.1f} ms")
        finally:
            broker.stop()
    frows, fchecks = file_rows(files)
    krows, kchecks = kafka_rows(kafka)
    if spark is not None:
        frows.append(f"| files, first batch from earliest through Spark local[2] | {spark['n']:,} one-line files | "
                     f"{spark['total_ms']:.0f} | – | – | {spark['driver_cpu_ms']:.0f} (driver process) | – | 1 | "
                     f"planning {spark['plan_ms']:.0f} ms of it; {spark['tasks']} packed tasks counted "
                     f"{spark['lines']:,} lines |")
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    command = "python3 -m bench.planning_scale " + " ".join(argv if argv is not None else sys.argv[1:])
    lines = [f"## {when} — planning at scale (files and Kafka partitions: {', '.join(f'{x:,}' for x in sizes)})",
             "", f"`{command.strip()}` ({time.time() - started:.0f} s; 1-min load average {load_start} at start, "
                 f"{_load()} at end, on 2 CPUs shared with another engineer's tests and a 2-hour soak benchmark "
                 f"running meanwhile: read CPU time as the steadier measure)", "",
             "| check | measured | goal | status |", "|---|---:|---:|---|", *fchecks, *kchecks, "",
             "| source | size | ms p50 | ms p99 | p25–p75 | CPU ms per batch (mean) | CPU ms p50 | batches | "
             "workload / notes |", "|---|---|---:|---:|---|---:|---:|---:|---|", *frows, *krows, ""]
    text = "\n".join(lines)
    print(text)
    if args.results:
        with open(args.results, "a", encoding="utf-8") as f:
            f.write("\n" + text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
