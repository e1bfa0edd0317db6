"""File source read throughput (issue 13's benchmark, held to issue 16's rules): ``python3 -m bench.files``.

``python3 -m bench.files [--quick] [--mb N] [--files N] [--rounds N] [--master local[2]] [--no-append]``

Four cases read the SAME generated log files (log-like lines of ~100-200 bytes, some multi-byte
UTF-8) and must each count the same number of lines:

- **A** bare Python: ``for line in open(p, encoding="utf-8", newline="\\n")``, newline stripped — one
  process, one core;
- **B** the file source without Spark: ``FilePlanner.plan()`` + ``FileRangeReader.read(range)`` for
  every range, counting the ``str`` lines it yields — one process, one core;
- **C** the file source through Spark: the same planning, then ``make_range_rdd(sc, ranges, reader,
  FileRDD).count()`` (what ``FileUtils`` streams build per batch) — one task per file;
- **D** Spark's own ``spark.read.text(files).where("value IS NOT NULL").count()`` (the filter makes the
  JVM materialise every line; a bare ``count()`` would only split lines) — one partition per file.

Before timing, an untimed pass checks that every side also decodes the same number of characters
(Spark ``length(value)`` against Python ``len``). Then one warm-up round and ``--rounds`` (>= 5)
timed rounds run A, B, C, D each, the order rotated by one case per round so no case always follows
the JVM's garbage. Every case gets wall time and CPU time (user + sys from ``/proc``: the driver
process for A and B; the driver, the JVM and the Python workers — its whole process tree — for C
and D). Ratios are taken per round (cases of one round ran seconds apart) and their median and
min-max printed; a ratio is split into CPU efficiency (lines per CPU-second) and parallelism (busy
cores), and flagged when the parallelism part exceeds the core count — that cannot be physically
true and means the baseline was starved or a process escaped the CPU accounting.

Benchmark, not test: nothing is asserted except equal line counts (a mismatch aborts the run). The
table goes to stdout and, unless ``--no-append``, a dated section to the end of ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
MIB = 1 << 20
CASES = ("A", "B", "C", "D")
_TICK = float(os.sysconf("SC_CLK_TCK"))

_WORDS = ("request", "served", "user", "session", "cache", "miss", "hit", "upstream", "latency", "retry",
          "commit", "offset", "partition", "batch", "queue", "flush", "status=200", "status=503", "GET",
          "POST", "/api/v1/orders", "/healthz", "bytes=5120", "took=12ms", "took=187ms", "db", "lock")
_UTF8_WORDS = ("café", "naïve", "Zürich", "Ελληνικά", "日本語", "データ", "→", "✓", "€42", "😀", "Ünïcödé")
_LEVELS = ("INFO", "INFO", "INFO", "DEBUG", "WARN", "ERROR")


# ---------------------------------------------------------------------------------------------- data
@dataclass(frozen=True)
class DataSet:
    """The generated files and what they hold (counted while writing, independent of every case)."""

    directory: str
    paths: Tuple[str, ...]
    bytes: int
    lines: int
    chars: int
    multibyte_lines: int

    @property
    def glob(self) -> str:
        return os.path.join(self.directory, "service.log.*")


def generate(directory: str, n_files: int, bytes_per_file: int, seed: int = 13) -> DataSet:
    """Writes ``n_files`` files ``service.log.<i>`` of at least ``bytes_per_file`` bytes of complete
    log lines (~100-200 bytes; about two in five carry a multi-byte UTF-8 character)."""
    rng = random.Random(seed)
    bodies: List[str] = []
    for _ in range(4096):
        words: List[str] = []
        target = rng.randrange(50, 140)
        while len(" ".join(words).encode()) < target:
            words.append(rng.choice(_UTF8_WORDS) if rng.random() < 0.04 else rng.choice(_WORDS))
        bodies.append(" ".join(words))
    paths: List[str] = []
    total_bytes = total_lines = total_chars = multibyte = 0
    seq = 0
    for i in range(n_files):
        path = os.path.join(directory, f"service.log.{i}")
        written = 0
        with open(path, "wb") as f:
            while written < bytes_per_file:
                chunk: List[str] = []
                for _ in range(4096):
                    seq += 1
                    body = bodies[rng.randrange(4096)]
                    chunk.append(f"2026-11-22T{seq // 360000 % 24:02d}:{seq // 6000 % 60:02d}:{seq // 100 % 60:02d}."
                                 f"{seq % 1000:03d}Z {rng.choice(_LEVELS):5} [worker-{seq % 7}] svc.reader "
                                 f"seq={seq} {body}\n")
                text = "".join(chunk)
                data = text.encode("utf-8")
                f.write(data)
                written += len(data)
                total_lines += len(chunk)
                total_chars += len(text) - len(chunk)
                multibyte += sum(1 for line in chunk if not line.isascii())
        paths.append(path)
        total_bytes += written
    return DataSet(directory, tuple(paths), total_bytes, total_lines, total_chars, multibyte)


# ---------------------------------------------------------------------------------------------- the cases
def count_bare(paths: Sequence[str]) -> int:
    """A: the bare Python loop, decoding as the source does (UTF-8 strict ``str``, no newline)."""
    n = 0
    for p in paths:
        with open(p, encoding="utf-8", errors="strict", newline="\n") as f:
            for line in f:
                if line[-1:] == "\n":
                    line = line[:-1]
                n += 1
    return n


def plan_ranges(glob: str) -> Tuple[List[Any], Any]:
    """The file source's planning on a fresh planner (first start, ``earliest``): ``(ranges, reader)``."""
    from dstream_exactly_once.files import FilePlanner, FileSourceOptions

    planner = FilePlanner(glob, FileSourceOptions())
    try:
        planner.start({})
        return list(planner.plan()), planner.reader()
    finally:
        planner.close()


def count_reader(glob: str) -> int:
    """B: planning plus ``FileRangeReader.read`` of every range, in this process."""
    ranges, reader = plan_ranges(glob)
    n = 0
    for r in ranges:
        for _ in reader.read(r):
            n += 1
    return n


def count_range_rdd(sc: Any, glob: str) -> int:
    """C: planning plus ``make_range_rdd(...).count()`` — one Spark task per file range."""
    from dstream_exactly_once.streaming.file_utils import FileRDD
    from dstream_exactly_once.streaming.range_rdd import make_range_rdd

    ranges, reader = plan_ranges(glob)
    return int(make_range_rdd(sc, ranges, reader, FileRDD).count())


def count_spark_text(spark: Any, paths: Sequence[str]) -> int:
    """D: Spark's text source with the line value required (so every line is materialised)."""
    return int(spark.read.text(list(paths)).where("value IS NOT NULL").count())


def decoded_chars(spark: Any, sc: Any, data: DataSet) -> Dict[str, Tuple[int, int]]:
    """``{case: (lines, characters)}``, untimed: every side must decode the same characters."""
    from dstream_exactly_once.streaming.range_rdd import make_range_rdd

    out: Dict[str, Tuple[int, int]] = {}
    n = c = 0
    for p in data.paths:
        with open(p, encoding="utf-8", errors="strict", newline="\n") as f:
            for line in f:
                n, c = n + 1, c + len(line) - (line[-1:] == "\n")
    out["A"] = (n, c)
    ranges, reader = plan_ranges(data.glob)
    lens = [len(x) for r in ranges for x in reader.read(r)]
    out["B"] = (len(lens), sum(lens))
    rdd: Any = make_range_rdd(sc, ranges, reader).map(len)
    out["C"] = (int(rdd.count()), int(rdd.sum()))
    row = spark.read.text(list(data.paths)).selectExpr("count(1)", "sum(length(value))").first()
    out["D"] = (int(row[0]), int(row[1]))
    return out


# ---------------------------------------------------------------------------------------------- CPU time
def _proc_table() -> Dict[int, Tuple[int, float]]:
    """``{pid: (ppid, seconds)}`` where seconds = utime + stime + cutime + cstime (reaped children
    included, so a worker that exits between two snapshots is still counted, in its parent)."""
    table: Dict[int, Tuple[int, float]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                raw = f.read().decode("ascii", "replace")
        except OSError:
            continue
        fields = raw[raw.rfind(")") + 2:].split()  # after "pid (comm) "; comm may hold spaces
        ticks = sum(int(x) for x in fields[11:15])  # utime stime cutime cstime (stat fields 14-17)
        table[int(entry)] = (int(fields[1]), ticks / _TICK)
    return table


def tree_cpu(root: int) -> Tuple[float, float, int]:
    """``(root's own CPU s, CPU s of root and all its descendants, number of processes)``."""
    table = _proc_table()
    children: Dict[int, List[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    total, todo, seen = 0.0, [root], 0
    while todo:
        pid = todo.pop()
        if pid in table:
            total += table[pid][1]
            seen += 1
        todo.extend(children.get(pid, ()))
    return table.get(root, (0, 0.0))[1], total, seen


# ---------------------------------------------------------------------------------------------- running
@dataclass
class Sample:
    wall: float
    cpu: float
    lines: int
    idle_tree_cpu: float = 0.0  # A, B: CPU the rest of the tree (JVM, workers) used meanwhile


@dataclass
class Run:
    samples: Dict[str, List[Sample]] = field(default_factory=lambda: {c: [] for c in CASES})
    orders: List[str] = field(default_factory=list)


def measure(case: str, fn: Callable[[], int]) -> Sample:
    me = os.getpid()
    own0, tree0, _ = tree_cpu(me)
    t0 = time.perf_counter()
    lines = fn()
    wall = time.perf_counter() - t0
    own1, tree1, _ = tree_cpu(me)
    if case in ("A", "B"):
        return Sample(wall, own1 - own0, lines, (tree1 - tree0) - (own1 - own0))
    return Sample(wall, tree1 - tree0, lines)


def run_rounds(cases: Dict[str, Callable[[], int]], rounds: int, expected: int) -> Run:
    run = Run()
    for rnd in range(rounds + 1):  # round 0 is the warm-up, same work as every other round
        k = rnd % len(CASES)
        order = CASES[k:] + CASES[:k]
        for case in order:
            s = measure(case, cases[case])
            if s.lines != expected:
                raise RuntimeError(f"case {case} counted {s.lines} lines in round {rnd}, the files hold {expected}")
            if rnd:
                run.samples[case].append(s)
        if rnd:
            run.orders.append("".join(order))
        tag = "warm-up" if rnd == 0 else f"round {rnd}/{rounds}"
        print(f"[bench.files {time.strftime('%H:%M:%S')}] {tag} done ({''.join(order)})", file=sys.stderr, flush=True)
    return run


# ---------------------------------------------------------------------------------------------- report
def _spread(xs: Sequence[float], fmt: Callable[[float], str]) -> str:
    return f"{fmt(statistics.median(xs))} ({fmt(min(xs))}–{fmt(max(xs))})"


def _n(x: float) -> str:
    return f"{x:,.0f}"


def _f2(x: float) -> str:
    return f"{x:.2f}"


def _x(x: float) -> str:
    return f"{x:.2f}x"


LABELS = {
    "A": "A bare Python `for line in f` (UTF-8 str, newline stripped), 1 process",
    "B": "B file source without Spark: plan + `FileRangeReader.read`, 1 process",
    "C": "C file source through Spark: plan + `make_range_rdd(..., FileRDD).count()`",
    "D": "D Spark `spark.read.text(...).where(\"value IS NOT NULL\").count()`",
}
PAIRS = (("B", "A"), ("C", "A"), ("D", "A"), ("C", "D"), ("C", "B"))


def report(run: Run, data: DataSet, cores: int, master: str) -> Tuple[str, List[str]]:
    """The markdown tables and the flags (ratios that cannot be physically true)."""
    flags: List[str] = []
    rows = ["| case | lines/s median (min–max) | MB/s median | wall s median (min–max) | CPU s median | "
            "busy cores (CPU/wall) | lines per CPU-s median (min–max) |", "|---|---:|---:|---:|---:|---:|---:|"]
    for c in CASES:
        ss = run.samples[c]
        lps = [s.lines / s.wall for s in ss]
        lpc = [s.lines / s.cpu for s in ss if s.cpu > 0]
        busy = [s.cpu / s.wall for s in ss]
        bound = 1.0 if c in ("A", "B") else float(cores)
        if max(busy) > bound * 1.1:
            flags.append(f"{c}: {max(busy):.2f} busy cores in one round, more than its {bound:g} possible "
                         f"(CPU accounting wrong)")
        mbs = statistics.median(data.bytes / 1e6 / s.wall for s in ss)
        rows.append(f"| {LABELS[c]} | {_spread(lps, _n)} | {mbs:.1f}"
                    f" | {_spread([s.wall for s in ss], _f2)} | {statistics.median(s.cpu for s in ss):.2f}"
                    f" | {statistics.median(busy):.2f} | {_spread(lpc, _n) if lpc else 'n/a'} |")
    ratios = ["| ratio | lines per wall-s, per round: median (min–max) | lines per CPU-s: median (min–max) | "
              "parallelism part (busy-core ratio) | valid? |", "|---|---:|---:|---:|---|"]
    for a, b in PAIRS:
        sa, sb = run.samples[a], run.samples[b]
        wall = [y.wall / x.wall for x, y in zip(sa, sb, strict=True)]
        cpu = [y.cpu / x.cpu for x, y in zip(sa, sb, strict=True) if x.cpu > 0 and y.cpu > 0]
        par = [(y.wall / x.wall) / (y.cpu / x.cpu) for x, y in zip(sa, sb, strict=True) if x.cpu > 0 and y.cpu > 0]
        mid = statistics.median(par) if par else float("nan")
        bad = sum(1 for p in par if p > cores * 1.1)
        verdict = "yes"
        if mid > cores * 1.1:
            verdict = f"**no**: parallelism part {mid:.2f} > {cores} cores"
            flags.append(f"{a} / {b}: the median wall ratio needs {mid:.2f}x parallelism on {cores} cores — not "
                         f"physically true (the baseline was starved by other load, or CPU escaped the accounting)")
        elif bad:
            verdict = f"median yes; {bad} of {len(par)} rounds not (parallelism part > {cores})"
            flags.append(f"{a} / {b}: {bad} of {len(par)} rounds had a wall ratio needing more than {cores}x "
                         f"parallelism (max {max(par):.2f}x): those rounds' baseline was starved by other load")
        ratios.append(f"| {a} / {b} | {_spread(wall, _x)} | {_spread(cpu, _x) if cpu else 'n/a'} | "
                      f"{_spread(par, _x) if par else 'n/a'} | {verdict} |")
    idle = [s.idle_tree_cpu for c in ("A", "B") for s in run.samples[c]]
    notes = [f"- master {master} for C and D, {len(data.paths)} files = {len(data.paths)} partitions on both Spark "
             f"sides; A and B are single-threaded in the driver; {cores} CPUs",
             f"- round orders (rotated): {', '.join(run.orders)}; one equal warm-up round first",
             f"- CPU of A/B: the driver process; meanwhile the idle JVM and workers used median "
             f"{statistics.median(idle):.2f} s per case (not charged to A/B)",
             "- C and D CPU: driver + JVM + Python daemon and workers (user+sys from /proc, reaped children included)"]
    return "\n".join(rows) + "\n\n" + "\n".join(ratios) + "\n\n" + "\n".join(notes), flags


def _probe() -> float:
    t0 = time.perf_counter()
    x = 0
    for i in range(3_000_000):
        x += i
    return time.perf_counter() - t0


def _git_commit() -> str:
    try:
        here = str(Path(__file__).resolve().parent)
        sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here, capture_output=True, text=True,
                             check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=here, capture_output=True, text=True).stdout
        return sha + (" (uncommitted changes)" if dirty.strip() else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


# ---------------------------------------------------------------------------------------------- main
def _args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python3 -m bench.files", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="4 MiB per file (smoke run)")
    p.add_argument("--mb", type=int, default=None, help="MiB per file (default 64; 4 with --quick)")
    p.add_argument("--files", type=int, default=4, help="number of files = partitions (default 4)")
    p.add_argument("--rounds", type=int, default=5, help="timed rounds after the warm-up (>= 5)")
    p.add_argument("--master", default="local[2]", help="Spark master for C and D (default local[2])")
    p.add_argument("--no-append", action="store_true", help="do not append to bench/RESULTS.md")
    a = p.parse_args(argv)
    if a.mb is None:
        a.mb = 4 if a.quick else 64
    if a.mb < 1 or a.files < 1:
        p.error(f"--mb and --files must be >= 1, got --mb {a.mb!r} --files {a.files!r}")
    if a.rounds < 5:
        p.error(f"--rounds must be >= 5 (issue 16), got {a.rounds!r}")
    return a


def main(argv: Optional[Sequence[str]] = None) -> int:
    a = _args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    cores = len(os.sched_getaffinity(0))
    load0, probe0 = os.getloadavg()[0], _probe()
    tmp = tempfile.mkdtemp(prefix="deo-bench-files-")
    spark = None
    try:
        t0 = time.perf_counter()
        data = generate(tmp, a.files, a.mb * MIB)
        gen_s = time.perf_counter() - t0
        from pyspark.sql import SparkSession

        biggest = max(os.path.getsize(p) for p in data.paths)
        spark = (SparkSession.builder.master(a.master).appName("deo-bench-files")
                 .config("spark.ui.enabled", "false")
                 .config("spark.ui.showConsoleProgress", "false")
                 .config("spark.sql.files.maxPartitionBytes", str(biggest))  # one partition per file, as C
                 .getOrCreate())
        sc = spark.sparkContext
        sc.setLogLevel("ERROR")
        import pyspark

        from dstream_exactly_once.streaming.range_rdd import make_range_rdd

        ranges, reader = plan_ranges(data.glob)
        parts_c: int = make_range_rdd(sc, ranges, reader).getNumPartitions()
        parts_d = spark.read.text(list(data.paths)).rdd.getNumPartitions()
        settings = [
            f"- data: {len(data.paths)} files x {a.mb} MiB = {data.bytes:,} bytes, {data.lines:,} lines "
            f"(mean {data.bytes / data.lines:.0f} bytes/line incl. newline), {data.lines - data.multibyte_lines:,} "
            f"ASCII-only and {data.multibyte_lines:,} with multi-byte UTF-8 ({data.chars:,} characters); "
            f"generated in {gen_s:.1f} s into a temp dir (page cache warm after the warm-up round)",
            f"- rounds: 1 warm-up + {a.rounds} timed, cases A B C D interleaved in every round",
            f"- Spark {pyspark.__version__}, master {a.master}, partitions C={parts_c} D={parts_d} "
            f"(spark.sql.files.maxPartitionBytes={biggest}), file source options: defaults (UTF-8 strict, "
            f"bytes.max 2 GiB: one range per file, BLAKE2b fingerprint + tail hash checked per range)",
            f"- Python {sys.version.split()[0]}, {cores} CPUs, MB = 10^6 bytes",
        ]
        print("\n".join(["bench.files settings:"] + settings), flush=True)
        if parts_c != len(data.paths) or parts_d != len(data.paths):
            print(f"WARNING: partitions differ from the file count ({parts_c}, {parts_d})", flush=True)
        chars = decoded_chars(spark, sc, data)
        want = (data.lines, data.chars)
        if any(v != want for v in chars.values()):
            raise RuntimeError(f"decoded (lines, characters) differ: {chars}, generated {want}")
        print(f"decoded (lines, characters) equal on every side: {want}", flush=True)
        cases: Dict[str, Callable[[], int]] = {
            "A": lambda: count_bare(data.paths),
            "B": lambda: count_reader(data.glob),
            "C": lambda: count_range_rdd(sc, data.glob),
            "D": lambda: count_spark_text(spark, data.paths),
        }
        run = run_rounds(cases, a.rounds, data.lines)
        load1, probe1 = os.getloadavg()[0], _probe()
        body, flags = report(run, data, cores, a.master)
        machine = (f"- machine: 1-min load average {load0:.2f} at start, {load1:.2f} at end ({cores} CPUs shared "
                   f"with other processes); CPU probe (3M-iteration Python loop, lower is faster) {probe0:.2f}s "
                   f"at start, {probe1:.2f}s at end")
        flag_text = "\n".join(f"- FLAG: {f}" for f in flags) if flags else "- flags: none (no ratio exceeds what " \
            f"{cores} cores allow)"
        print("\n" + body + "\n" + machine + "\n" + flag_text, flush=True)
        if not a.no_append:
            stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
            section = (f"\n## {stamp} — file source read ({len(data.paths)} files x {a.mb} MiB)\n\n"
                       f"`python3 -m bench.files{' --quick' if a.quick else ''}` (`--mb {a.mb}`, commit "
                       f"{_git_commit()})\n\n" + "\n".join(settings) + "\n\n" + body + "\n" + machine + "\n"
                       + flag_text + "\n")
            with open(RESULTS, "a", encoding="utf-8") as f:
                f.write(section)
            print(f"appended to {RESULTS}", flush=True)
        return 0
    finally:
        if spark is not None:
            spark.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
