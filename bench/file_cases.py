"""B6's workload: the generated log files and the four ways to read them (``bench/file_read.py`` times them).

Four cases read the SAME files (log-like lines of ~100-200 bytes, two in five with a multi-byte
UTF-8 character) and must each count the same number of lines:

- **A** bare Python: ``for line in open(p, encoding="utf-8", newline="\\n")``, newline stripped — one
  process, one core;
- **B** the file source without Spark: ``FilePlanner.plan()`` + ``FileRangeReader.read(range)`` for
  every range, counting the ``str`` lines it yields — one process, one core;
- **C** the file source through Spark: the same planning, then ``make_range_rdd(sc, ranges, reader,
  FileRDD).count()`` (what ``FileUtils`` streams build per batch) — one task per file;
- **D** Spark's own ``spark.read.text(files).where("value IS NOT NULL").count()`` (the filter makes the
  JVM materialise every line; a bare ``count()`` would only split lines) — one partition per file.

:func:`decoded_chars` is the untimed pass that checks every side also decodes the same characters.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from typing import Any, Dict, List, Sequence, Tuple

MIB = 1 << 20
CASES = ("A", "B", "C", "D")
LABELS = {
    "A": "A bare Python `for line in f` (UTF-8 str, newline stripped), 1 process",
    "B": "B file source without Spark: plan + `FileRangeReader.read`, 1 process",
    "C": "C file source through Spark: plan + `make_range_rdd(..., FileRDD).count()`",
    "D": "D Spark `spark.read.text(...).where(\"value IS NOT NULL\").count()`",
}
SHORT = {"A": "A bare Python loop", "B": "B file source, no Spark", "C": "C file source via Spark",
         "D": "D spark.read.text"}

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
    from dstream_exactly_once.files.spark._utils import FileRDD
    from dstream_exactly_once.streaming._range_rdd import make_range_rdd

    ranges, reader = plan_ranges(glob)
    return int(make_range_rdd(sc, ranges, reader, FileRDD).count())


def count_spark_text(spark: Any, paths: Sequence[str]) -> int:
    """D: Spark's text source with the line value required (so every line is materialised)."""
    return int(spark.read.text(list(paths)).where("value IS NOT NULL").count())


def decoded_chars(spark: Any, sc: Any, data: DataSet) -> Dict[str, Tuple[int, int]]:
    """``{case: (lines, characters)}``, untimed: every side must decode the same characters."""
    from dstream_exactly_once.streaming._range_rdd import make_range_rdd

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
