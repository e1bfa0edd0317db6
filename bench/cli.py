"""``python3 -m bench``: run the benchmarks, print the table, append RESULTS.md, draw the charts.

Flags: ``--only B1,B3`` (subset), ``--records N`` (read-topic size, default 2,000,000; small values
give a quick run; default 1,000,000), ``--quick`` (small sizes: a smoke run in under 3 minutes; its RESULTS section
and charts go to ``bench/results/quick/`` unless ``--results`` / ``--charts`` say otherwise),
``--file-mb N`` (B6: MiB per generated log file, default 64; --quick 4), ``--no-jvm`` (skip B1(c)),
``--no-charts``. ``python3 -m bench.files`` is ``python3 -m bench --only B6``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

from .common import Context, Results, Settings, cpu_probe, log

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
ALL = ["B1", "B2", "B3", "B4", "B5", "B6"]
# B6 first, before any service starts (its C/D CPU is the driver's process tree); then the Kafka
# Spark benchmarks; then Spark is stopped for the latency benchmarks
RUN_ORDER = ["B6", "B1", "B2", "B5", "B3", "B4"]


def _runners() -> Dict[str, Callable[[Context], None]]:
    from .commit import run_b3
    from .file_read import run_b6
    from .pipeline import run_b2
    from .planning import run_b4
    from .read import run_b1
    from .scaling import run_b5

    return {"B1": run_b1, "B2": run_b2, "B3": run_b3, "B4": run_b4, "B5": run_b5, "B6": run_b6}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python3 -m bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", default=",".join(ALL), help="comma-separated benchmarks to run (default: all)")
    p.add_argument("--records", type=int, default=None,
                   help="records in the B1/B5 read topic (default 1,000,000; --quick 50,000)")
    p.add_argument("--quick", action="store_true", help="small sizes and few repetitions (smoke run, < 3 min)")
    p.add_argument("--file-mb", type=int, default=None,
                   help="B6: MiB per generated log file (default 64; --quick 4)")
    p.add_argument("--no-jvm", action="store_true", help="skip B1(c), Spark's JVM Kafka source")
    p.add_argument("--no-charts", action="store_true", help="do not draw PNG charts")
    p.add_argument("--results", type=Path, default=None,
                   help="markdown file to append to "
                        "(default bench/RESULTS.md; --quick: bench/results/quick/RESULTS.md)")
    p.add_argument("--charts", type=Path, default=None,
                   help="directory for the PNG charts and results.json (default bench/results[/quick])")
    return p


def _prepare_env() -> None:
    """Python workers must import ``bench`` and ``dstream_exactly_once`` from this checkout."""
    os.chdir(ROOT)
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in paths if p != str(ROOT)])
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    only = [b.strip().upper() for b in args.only.split(",") if b.strip()]
    unknown = [b for b in only if b not in ALL]
    if unknown:
        print(f"unknown benchmark(s) {unknown}; choose from {ALL}", file=sys.stderr)
        return 2
    if args.records is not None and args.records < 4:
        print("--records must be >= 4 (one record per partition at least)", file=sys.stderr)
        return 2
    if args.file_mb is not None and args.file_mb < 1:
        print(f"--file-mb must be >= 1, got {args.file_mb!r}", file=sys.stderr)
        return 2
    benches = [b for b in ALL if b in only]
    settings = Settings.make(args.quick, args.records, jvm=not args.no_jvm, file_mib=args.file_mb)
    out_dir = args.charts or (HERE / "results" / "quick" if args.quick else HERE / "results")
    md_path = args.results or (out_dir / "RESULTS.md" if args.quick else HERE / "RESULTS.md")
    _prepare_env()

    def on_term(signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_term)
    results = Results()
    workdir = tempfile.mkdtemp(prefix="deo-bench-")
    ctx = Context(settings, results, workdir)
    runners = _runners()
    from .report import _crc_impl

    ctx.versions["kafka-python CRC-32C"] = _crc_impl()  # at start: workers and the driver import kafka now
    t_start = time.perf_counter()
    sizes = [f"{settings.records:,} records in the read topic"] if set(benches) & {"B1", "B2", "B5"} else []
    sizes += [f"{settings.b6_files} files x {settings.b6_mib} MiB"] if "B6" in benches else []
    log(f"running {', '.join(benches)} ({'quick' if args.quick else 'full'}: {', '.join(sizes) or 'no read data'})")
    interrupted = False
    try:
        for b in [b for b in RUN_ORDER if b in benches]:
            if b in ("B3", "B4"):
                ctx.stop_spark()  # latency benchmarks without an idle Spark JVM around
            t0 = time.perf_counter()
            load0, probe0 = os.getloadavg()[0], cpu_probe()
            log(f"=== {b} === (1-min load average {load0:.2f} on {os.cpu_count()} CPUs, CPU probe {probe0:.2f}s)")
            try:
                runners[b](ctx)
            except KeyboardInterrupt:
                results.errors[b] = "interrupted"
                interrupted = True
                break
            except Exception as exc:  # noqa: BLE001 - one failing benchmark must not hide the others
                results.errors[b] = f"{type(exc).__name__}: {exc}"
                log(f"{b} FAILED:\n{traceback.format_exc()}")
            results.seconds[b] = time.perf_counter() - t0
            results.note(b, f"machine while running: 1-min load average {load0:.2f} at start, "
                            f"{os.getloadavg()[0]:.2f} at end ({os.cpu_count()} CPUs shared with other processes); "
                            f"CPU probe (3M-iteration Python loop, lower is faster) {probe0:.2f}s at start, "
                            f"{cpu_probe():.2f}s at end")
        results.seconds["total"] = time.perf_counter() - t_start
        env = _environment(ctx, results)
    finally:
        try:
            ctx.close()
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
    from . import report

    print(report.console(results, benches), flush=True)
    if interrupted:
        log("interrupted: nothing written")
        return 130
    title = ("quick smoke run (`--quick`, sizes too small to be representative)" if args.quick
             else f"full run ({', '.join(sizes) or 'no read data'})")
    subtitle = f"{env['date']}, {env['machine'].split(',')[0]}, PySpark {env['PySpark']}" + \
        (" (quick)" if args.quick else "")
    charts = {} if args.no_charts else report.draw_charts(results, benches, out_dir, subtitle)
    command = "python3 -m bench " + " ".join(argv if argv is not None else sys.argv[1:])
    report.append_markdown(md_path, report.markdown(results, benches, env, title, command.strip(), md_path, charts))
    report.write_json(out_dir / "results.json", results, env, settings)
    log(f"appended to {md_path}; charts and results.json in {out_dir}")
    return 1 if results.errors else 0


def _environment(ctx: Context, results: Results) -> Dict[str, str]:
    from . import report

    for notes in results.notes.get("B1", []):
        if notes.startswith("(c) connector: "):
            ctx.versions["Spark JVM Kafka connector (B1c)"] = notes[len("(c) connector: "):]
    return report.environment(ctx)
