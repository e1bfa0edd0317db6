"""Profile B1(a), the KafkaRDD read path: ``python3 -m bench.profile_b1 [--records N] [--no-spark]``.

1. cProfile of the executor-side code of one B1(a) job run in this process: for each partition's
   range, exactly what a KafkaRDD task runs (``read_range`` + the utf-8 ``(key, value)`` decoding),
   consumed like ``count()``. Top functions by own time, plus own time grouped by package area.
2. The same read with variations, without the profiler (records/s, one process): as is;
   ``kafkaParams {"check.crcs": false}``; and with the other CRC-32C implementation in a
   subprocess — pure Python (``crc32c`` import blocked) when the C ``crc32c`` package is
   installed, else the C package installed with ``pip install --target`` into a private cache dir
   and put on that subprocess's ``PYTHONPATH`` only (the shared environment is not changed).
3. Spark's own worker profiler (``spark.python.profile=true``, local[2]) on
   ``KafkaUtils.createRDD(...).count()``: the real Python workers, including PySpark's framing.

Output: ``bench/results/profile_b1.txt`` (and ``.prof`` files next to it).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

from .common import Context, Results, Settings, log

HERE = Path(__file__).resolve().parent
CRC_DIR = Path(os.environ.get("DEO_CACHE_DIR", Path.home() / ".cache" / "dstream-exactly-once")) / "bench-crc32c"

AREAS = [  # first match wins
    ("dstream_exactly_once reader + decoding", "/dstream_exactly_once/"),
    ("kafka-python crc32c (pure Python)", "/kafka/record/_crc32c"),
    ("kafka-python record parsing", "/kafka/record/"),
    ("kafka-python consumer/fetcher", "/kafka/consumer/"),
    ("kafka-python protocol/network", "/kafka/"),
    ("pyspark worker / serializers", "/pyspark/"),
]


def read_all(bootstrap: str, topic: str, ends: Dict[int, int], overrides: Optional[Dict[str, Any]] = None,
             limit: Optional[int] = None) -> int:
    """What the B1(a) tasks run, in this process: every range read + decoded, counted."""
    from dstream_exactly_once import OffsetRange
    from dstream_exactly_once.kafka._offsets import utf8_decoder
    from dstream_exactly_once.kafka._params import parse_kafka_params
    from dstream_exactly_once.kafka._range_reader import _Decoding
    from dstream_exactly_once.kafka._reader_kafka_python import read_range

    config = parse_kafka_params({"bootstrap.servers": bootstrap, **(overrides or {})})
    decode = _Decoding(utf8_decoder, utf8_decoder, None)
    n = 0
    for p, end in sorted(ends.items()):
        r = OffsetRange(topic, p, 0, end if limit is None else min(end, limit))
        for _ in decode(read_range(config, r, poll_timeout_ms=120000)):
            n += 1
    return n


def measure(bootstrap: str, topic: str, ends: Dict[int, int], overrides: Optional[Dict[str, Any]] = None) -> float:
    read_all(bootstrap, topic, ends, overrides, limit=2000)  # consumers created and cached
    t0 = time.perf_counter()
    n = read_all(bootstrap, topic, ends, overrides)
    return n / (time.perf_counter() - t0)


def by_area(stats: pstats.Stats, known: Optional[Dict[str, str]] = None) -> List[tuple]:
    """Own time grouped by :data:`AREAS`; ``known`` maps bare file names (Spark's worker profiles
    keep only those) to areas and is filled from full paths."""
    known = {} if known is None else known
    totals: Dict[str, float] = {}
    total = 0.0
    for (filename, _line, _name), (_cc, _nc, tt, _ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        total += tt
        path = filename.replace("\\", "/")
        area = next((label for label, frag in AREAS if frag in path), None)
        base = path.rsplit("/", 1)[-1]
        if area is not None and "/" in path:
            known.setdefault(base, area)
        elif area is None and "/" not in path:
            area = known.get(base)
        area = area or "other (stdlib, builtins)"
        totals[area] = totals.get(area, 0.0) + tt
    return sorted(((a, t, t / total if total else 0.0) for a, t in totals.items()), key=lambda x: -x[1])


def _stats_text(stats: pstats.Stats, sort: str, n: int) -> str:
    buf = io.StringIO()
    stats.stream = buf  # type: ignore[attr-defined]
    stats.sort_stats(sort).print_stats(n)
    return buf.getvalue()


def ensure_crc32c() -> Optional[str]:
    try:
        import crc32c  # noqa: F401

        return ""  # already importable everywhere
    except ImportError:
        pass
    if not (CRC_DIR / "crc32c").exists():
        log(f"installing the C 'crc32c' package from PyPI into {CRC_DIR} (private to this profile run)")
        p = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                            "--target", str(CRC_DIR), "crc32c"], capture_output=True, text=True)
        if p.returncode != 0:
            log("could not install crc32c: " + (p.stdout + p.stderr)[-800:])
            return None
    return str(CRC_DIR)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m bench.profile_b1")
    ap.add_argument("--records", type=int, default=400_000)
    ap.add_argument("--no-spark", action="store_true", help="skip the Spark worker profile")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "profile_b1.txt")
    ap.add_argument("--measure", help=argparse.SUPPRESS)  # subprocess mode: JSON spec -> RESULT records/s
    args = ap.parse_args(argv)
    if args.measure:
        spec = json.loads(args.measure)
        if spec.get("block_crc32c"):
            sys.modules["crc32c"] = None  # type: ignore[assignment]  # kafka-python falls back to pure Python
        ends = {int(p): e for p, e in spec["ends"].items()}
        print("RESULT " + json.dumps(measure(spec["bootstrap"], spec["topic"], ends, spec.get("overrides"))))
        return 0

    from .cli import _prepare_env

    _prepare_env()
    workdir = tempfile.mkdtemp(prefix="deo-bench-profile-")
    ctx = Context(Settings.make(False, args.records), Results(), workdir)
    out: List[str] = [f"# B1(a) profile — {time.strftime('%Y-%m-%d %H:%M:%S')}, {args.records:,} records, "
                      f"1-min load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs", ""]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    try:
        topic = ctx.read_topic()
        bootstrap = ctx.kafka().bootstrap
        ends = topic.per_partition

        # 1. cProfile of the executor-side read, in process
        read_all(bootstrap, topic.name, ends, limit=2000)
        prof = cProfile.Profile()
        t0 = time.perf_counter()
        prof.enable()
        n = read_all(bootstrap, topic.name, ends)
        prof.disable()
        dt = time.perf_counter() - t0
        prof.dump_stats(str(args.out.with_suffix(".prof")))
        stats = pstats.Stats(prof)
        known: Dict[str, str] = {}
        areas = by_area(stats, known)
        out += [f"## 1. executor read path in one process under cProfile: {n:,} records in {dt:.2f}s "
                f"({n / dt:,.0f} records/s with profiler overhead)", "", "own time by area:"]
        out += [f"  {share:6.1%}  {t:7.2f}s  {area}" for area, t, share in areas]
        out += ["", "top functions by own time:", _stats_text(stats, "tottime", 25),
                "top functions by cumulative time:", _stats_text(stats, "cumulative", 20)]

        # 2. variations without the profiler
        out += ["## 2. the same read without profiler, one process (records/s)", ""]
        from .report import _crc_impl

        crc_now = _crc_impl()
        base = measure(bootstrap, topic.name, ends)
        out.append(f"  as is (check.crcs default true, CRC-32C {crc_now}): {base:,.0f}")
        nocrc = measure(bootstrap, topic.name, ends, {"check.crcs": False})
        out.append(f"  kafkaParams check.crcs=false: {nocrc:,.0f}  ({nocrc / base:.2f}x)")
        spec = {"bootstrap": bootstrap, "topic": topic.name, "ends": ends}
        env = dict(os.environ)
        if crc_now.startswith("C"):
            spec["block_crc32c"] = True
            label = "pure-Python CRC-32C (crc32c import blocked in a subprocess)"
        else:
            crc_dir = ensure_crc32c()
            env["PYTHONPATH"] = os.pathsep.join(p for p in (crc_dir, os.environ.get("PYTHONPATH")) if p)
            label = "C CRC-32C (PyPI crc32c on PYTHONPATH of a subprocess)"
        p = subprocess.run([sys.executable, "-m", "bench.profile_b1", "--measure", json.dumps(spec)],
                           capture_output=True, text=True, env=env)
        line = [x for x in p.stdout.splitlines() if x.startswith("RESULT ")]
        if line:
            rate = float(json.loads(line[-1][7:]))
            out.append(f"  {label}: {rate:,.0f}  ({rate / base:.2f}x)")
        else:
            out.append(f"  {label}: subprocess failed: " + (p.stdout + p.stderr)[-500:])
        out.append("")

        # 3. Spark's worker profiler
        if not args.no_spark:
            out += spark_profile(ctx, topic, known)
    finally:
        ctx.close()
    args.out.write_text("\n".join(out) + "\n")
    print("\n".join(out))
    log(f"wrote {args.out}")
    return 0


def spark_profile(ctx: Context, topic: Any, known: Dict[str, str]) -> List[str]:
    from dstream_exactly_once import KafkaUtils
    from dstream_exactly_once.testing import make_spark_context

    ctx.stop_spark()
    sc = make_spark_context("local[2]", "deo-bench-profile", {"spark.python.profile": "true"})
    ctx._sc, ctx._master = sc, "local[2]-profiled"
    params = ctx.kafka_params()
    KafkaUtils.createRDD(sc, params, topic.ranges(limit=8000)).count()
    t0 = time.perf_counter()
    n = KafkaUtils.createRDD(sc, params, topic.ranges()).count()
    dt = time.perf_counter() - t0
    dump = Path(tempfile.mkdtemp(prefix="deo-bench-sparkprof-"))
    sc.dump_profiles(str(dump))
    files = sorted(dump.glob("*.pstats"))
    lines = [f"## 3. Spark worker profiler (spark.python.profile=true), local[2]: {n:,} records in {dt:.2f}s "
             f"({n / dt:,.0f} records/s with profiler overhead); {len(files)} profile(s)", ""]
    if files:
        stats = pstats.Stats(*[str(f) for f in files])
        lines += ["own time by area (all profiled RDDs, both workers):"]
        lines += [f"  {share:6.1%}  {t:7.2f}s  {area}" for area, t, share in by_area(stats, known)]
        lines += ["", _stats_text(stats, "tottime", 20)]
    return lines


if __name__ == "__main__":
    sys.exit(main())
