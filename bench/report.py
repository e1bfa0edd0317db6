"""Output of a run: the console table, the ``RESULTS.md`` section, JSON and one PNG chart per benchmark."""

from __future__ import annotations

import importlib
import json
import os
import platform
import re
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Dict, List, Optional

from .common import Context, Results, fmt_num, log

TITLES = {
    "B1": "B1 read throughput (100-byte records, 4 partitions)",
    "B2": "B2 end-to-end exactly-once word count vs plain writes",
    "B3": "B3 commit latency",
    "B4": "B4 driver planning latency per batch",
    "B5": "B5 scaling local[1] -> local[2]",
    "B6": "B6 file source read throughput (log lines, one range/partition per file)",
}
CHARTS = {"B1": "b1_read.png", "B2": "b2_end_to_end.png", "B3": "b3_commit_latency.png",
          "B4": "b4_planning.png", "B5": "b5_scaling.png", "B6": "b6_files.png"}


# ------------------------------------------------------------------------------------------ environment
def _cmd(argv: List[str]) -> str:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "n/a"
    return (p.stdout or p.stderr).strip().splitlines()[0] if (p.stdout or p.stderr).strip() else "n/a"


def environment(ctx: Context) -> Dict[str, str]:
    import sqlite3

    import kafka
    import pyspark

    env: Dict[str, str] = {}
    env["date"] = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    env["machine"] = f"nproc {_cmd(['nproc'])}, {_mem_gib():.1f} GiB memory, {_cpu_model()}"
    env["os"] = f"{platform.system()} {platform.release()} ({platform.machine()})"
    env["Python"] = platform.python_version()
    env["PySpark"] = pyspark.__version__
    env["kafka-python"] = kafka.__version__
    env["kafka-python CRC-32C"] = _crc_impl()
    env["Kafka broker"] = _kafka_version()
    env["Java"] = _cmd(["java", "-version"])
    env["confluent-kafka (B1 a-ck)"] = _confluent_version()
    for mod, name in (("redis", "redis-py"), ("psycopg", "psycopg")):
        try:
            env[name] = importlib.import_module(mod).__version__
        except ImportError:
            env[name] = "not installed"
    env["redis-server"] = _cmd(["redis-server", "--version"]).replace("Redis server ", "")
    env["PostgreSQL"] = _pg_version()
    env["SQLite"] = sqlite3.sqlite_version
    commit = _cmd(["git", "-C", str(Path(__file__).parent.parent), "rev-parse", "--short", "HEAD"])
    dirty = _cmd(["git", "-C", str(Path(__file__).parent.parent), "status", "--porcelain",
                  "--untracked-files=no"])
    env["git"] = commit + (" (with uncommitted changes)" if dirty not in ("", "n/a") else "")
    from .common import POLL_RECORDS, READ_SETTINGS

    env["consumer settings (every reader of B1/B2/B5)"] = ", ".join(f"{k}={v}" for k, v in READ_SETTINGS.items()) + \
        f"; poll max_records={POLL_RECORDS} (receive.buffer.bytes -1 = OS default)"
    env.update(ctx.versions)
    return env


def _confluent_version() -> str:
    """confluent-kafka's and its bundled librdkafka's versions, or 'not installed'."""
    try:
        import confluent_kafka
    except ImportError:
        return "not installed"
    return f"{confluent_kafka.version()[0]} (librdkafka {confluent_kafka.libversion()[0]})"


def _crc_impl() -> str:
    """kafka-python validates every fetched batch's CRC-32C: in C with the ``crc32c`` package, else
    in pure Python (B1/B2 read throughput depends on it several-fold)."""
    try:
        from kafka.record import util

        if getattr(util, "crc32c_c", None) is not None:
            import crc32c

            return f"C (crc32c {getattr(crc32c, '__version__', '?')})"
    except ImportError:
        pass
    return "pure Python (the crc32c package is not installed)"


def _mem_gib() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 1024 / 1024
    except OSError:
        pass
    return float("nan")


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _kafka_version() -> str:
    try:
        from dstream_exactly_once.testing import kafka_classpath

        for jar in kafka_classpath().split(os.pathsep):
            m = re.search(r"kafka_2\.\d+-([\d.]+)\.jar$", jar)
            if m:
                return m.group(1) + " (KRaft, single node, LocalKafka)"
    except Exception:  # noqa: BLE001 - informational only
        pass
    return "n/a"


def _pg_version() -> str:
    try:
        from dstream_exactly_once.testing._postgres import _pg_bin

        return _cmd([_pg_bin("postgres"), "--version"])
    except Exception:  # noqa: BLE001 - informational only
        return "n/a"


# ------------------------------------------------------------------------------------------ console
def console(results: Results, benches: List[str]) -> str:
    lines: List[str] = []
    for b in benches:
        rows = results.of(b)
        checks = [c for c in results.checks if c.bench == b]
        if not rows and not checks and b not in results.errors:
            continue
        lines.append("")
        lines.append(f"== {TITLES[b]} " + "=" * max(3, 96 - len(TITLES[b])))
        if b in results.errors:
            lines.append(f"   ERROR: {results.errors[b]}")
        width = max([len(m.case) for m in rows] + [20])
        for m in rows:
            lines.append(f"   {m.case:<{width}}  {fmt_num(m.value):>12} {m.unit:<10} {m.detail}")
        for c in checks:
            val = "n/a" if c.value is None else f"{fmt_num(c.value)}{c.unit}"
            lines.append(f"   [{c.status:4s}] {c.what}: {val} (target {c.op} {fmt_num(c.target)}{c.unit})"
                         + (f" — {c.note}" if c.note else "") + (f" — invalid: {c.invalid}" if c.invalid else ""))
        for n in results.notes.get(b, []):
            lines.append(f"   note: {n}")
    lines.append("")
    lines.append("== Targets " + "=" * 90)
    for c in results.checks:
        val = "n/a" if c.value is None else f"{fmt_num(c.value)}{c.unit}"
        lines.append(f"   [{c.status:4s}] {c.bench} {c.what}: {val} (target {c.op} {fmt_num(c.target)}{c.unit})")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------ markdown
def markdown(results: Results, benches: List[str], env: Dict[str, str], title: str, command: str,
             md_path: Path, charts: Dict[str, Path]) -> str:
    out = [f"## {env['date']} — {title}", "", f"`{command}` (total {results.seconds.get('total', 0):.0f} s)", ""]
    out += [f"- **{k}**: {v}" for k, v in env.items() if k != "date"]
    out += ["", "| benchmark | target | measured | goal | status |", "|---|---|---|---|---|"]
    for c in results.checks:
        val = "n/a" if c.value is None else f"{fmt_num(c.value)} {c.unit}"
        out.append(f"| {c.bench} | {c.what} | {val} | {c.op} {fmt_num(c.target)} {c.unit} | **{c.status}**"
                   + (f" ({c.note})" if c.note else "") + (f" — invalid: {c.invalid}" if c.invalid else "") + " |")
    for b in benches:
        rows = results.of(b)
        if not rows and b not in results.errors:
            continue
        out += ["", f"### {TITLES[b]}", ""]
        if b in results.errors:
            out += [f"ERROR: `{results.errors[b]}`", ""]
        if rows:
            out += ["| case | value | unit | detail |", "|---|---:|---|---|"]
            out += [f"| {m.case} | {fmt_num(m.value)} | {m.unit} | {m.detail} |" for m in rows]
        for n in results.notes.get(b, []):
            out += ["", f"- {n}"]
        if b in charts:
            rel = os.path.relpath(charts[b], md_path.parent)
            out += ["", f"![{b}]({rel})"]
    return "\n".join(out) + "\n"


def append_markdown(md_path: Path, text: str) -> None:
    md_path.parent.mkdir(parents=True, exist_ok=True)
    if not md_path.exists():
        md_path.write_text("# Benchmark results\n\nAppended by `python3 -m bench` (`make bench`), newest last. "
                           "See `bench/__init__.py` for what each benchmark measures.\n\n")
    # The PNGs are overwritten by each run: older sections' chart links would show the new charts.
    old = md_path.read_text()
    links = set(re.findall(r"^!\[B\d\]\(([^)]+)\)$", text, flags=re.M))
    kept = re.sub(r"^!\[(B\d)\]\(([^)]+)\)$",
                  lambda m: f"(chart `{m.group(2)}` replaced by a later run)" if m.group(2) in links else m.group(0),
                  old, flags=re.M)
    md_path.write_text(kept.rstrip("\n") + "\n\n" + text)


def write_json(path: Path, results: Results, env: Dict[str, str], settings: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"environment": env, "settings": vars(settings), **results.to_json()}, indent=1,
                               default=str))


# ------------------------------------------------------------------------------------------ charts
def ensure_matplotlib() -> Optional[Any]:
    """matplotlib (bench-only dependency): imported, or installed from PyPI with pip first."""
    try:
        import matplotlib
    except ImportError:
        log("matplotlib is not installed; it is a bench-only dependency for the PNG charts (not in setup.py). "
            f"Installing it from PyPI: {sys.executable} -m pip install matplotlib")
        p = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                            "matplotlib"], capture_output=True, text=True)
        if p.returncode != 0:
            log("could not install matplotlib; charts are skipped:\n" + (p.stdout + p.stderr)[-1500:])
            return None
        importlib.invalidate_caches()
        try:
            import matplotlib
        except ImportError:
            log("matplotlib still cannot be imported; charts are skipped")
            return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def draw_charts(results: Results, benches: List[str], outdir: Path, subtitle: str) -> Dict[str, Path]:
    plt = ensure_matplotlib()
    if plt is None:
        return {}
    outdir.mkdir(parents=True, exist_ok=True)
    drawn: Dict[str, Path] = {}
    for b in benches:
        if not results.of(b):
            continue
        fig = _CHART[b](plt, results)
        if fig is None:
            continue
        fig.suptitle(TITLES[b] + "\n" + subtitle, fontsize=10)
        fig.tight_layout()
        path = outdir / CHARTS[b]
        fig.savefig(path, dpi=110)
        plt.close(fig)
        drawn[b] = path
    return drawn


def _si(x: float, _pos: Any = None) -> str:
    return "0" if x == 0 else f"{x / 1e6:g}M" if abs(x) >= 1e6 else f"{x / 1e3:g}k" if abs(x) >= 1e3 else f"{x:g}"


def _rate_bars(plt: Any, rows: List[Any], unit: str, cpu_label: str, labels: Optional[List[str]] = None) -> Any:
    """Two panels of horizontal bars, per wall-second and per CPU-second: median, whiskers min–max."""
    fig, axes = plt.subplots(1, 2, figsize=(12, 0.6 * len(rows) + 2), sharey=True)
    colors = ["#4c72b0", "#64b5cd", "#8172b3", "#b3a2e0", "#dd8452", "#55a868", "#8fd175"]
    labels = (labels or [m.case for m in rows])[::-1]
    for ax, key, xlabel in ((axes[0], "rates", f"{unit} per wall-second"),
                            (axes[1], "cpu_rates", f"{unit} per CPU-second\n({cpu_label})")):
        vals = [m.extra.get(key) or [m.value] for m in rows][::-1]
        med = [sorted(v)[len(v) // 2] if len(v) % 2 else (sorted(v)[len(v) // 2 - 1] + sorted(v)[len(v) // 2]) / 2
               for v in vals]
        err = [[md - min(v) for md, v in zip(med, vals, strict=True)],
               [max(v) - md for md, v in zip(med, vals, strict=True)]]
        bars = ax.barh(labels, med, xerr=err, capsize=3, color=colors[: len(rows)][::-1])
        for bar, md, v in zip(bars, med, vals, strict=True):  # the median, right of its whisker
            ax.text(max(v), bar.get_y() + bar.get_height() / 2, f"  {md:,.0f}", va="center", fontsize=8)
        ax.set_xlabel(xlabel + "\n(median, whiskers min–max over rounds)")
        ax.set_xlim(0, max(max(v) for v in vals) * 1.35)
        ax.xaxis.set_major_formatter(_si)
    return fig


def _chart_b1(plt: Any, res: Results) -> Any:
    return _rate_bars(plt, res.of("B1"), "records", "all processes, broker included")


def _chart_b6(plt: Any, res: Results) -> Any:
    rows = [m for m in res.of("B6") if "case_id" in m.extra]  # the cases, not the ratio rows
    if not rows:
        return None
    from .file_cases import SHORT

    return _rate_bars(plt, rows, "lines", "A, B: the driver; C, D: driver + JVM + workers",
                      [SHORT[m.extra["case_id"]] for m in rows])


def _chart_b2(plt: Any, res: Results) -> Any:
    rows = res.of("B2")
    stores = list(dict.fromkeys(m.extra["store"] for m in rows))
    fig, ax = plt.subplots(figsize=(8, 3.8))
    variants = (("exactly-once", "#4c72b0"), ("exactly-once 1tx", "#64b5cd"), ("plain", "#dd8452"))
    width = 0.8 / len(variants)
    for j, (variant, color) in enumerate(variants):
        vals = [next((m.value for m in rows if m.extra["store"] == s and m.extra["variant"] == variant), 0)
                for s in stores]
        bars = ax.bar([i + (j - (len(variants) - 1) / 2) * width for i in range(len(stores))], vals, width,
                      label=variant.replace("1tx", "(offset_log='in_commit')"), color=color)
        for bar in bars:
            ax.text(bar.get_x() + bar.get_width() / 2, bar.get_height(), f"{bar.get_height():,.0f}",
                    ha="center", va="bottom", fontsize=8)
    labels = []
    for s in stores:
        c = next((c for c in res.checks if c.bench == "B2" and c.what.lower().startswith(s[:5])), None)
        labels.append(s + ("" if c is None or c.value is None else f"\nexactly-once/plain {c.value:.2f}x"))
    ax.set_xticks(range(len(stores)))
    ax.set_xticklabels(labels)
    ax.set_ylabel("records/s (median)")
    ax.set_ylim(0, ax.get_ylim()[1] * 1.15)
    ax.legend(loc="upper right", fontsize=8)
    return fig


def _chart_b3(plt: Any, res: Results) -> Any:
    rows = [m for m in res.of("B3") if not m.extra.get("baseline") and m.extra.get("mode", "ahead") == "ahead"]
    one_tx = {(m.extra["store"], m.extra["keys"], m.extra["partitions"]): m.extra["p50"] for m in res.of("B3")
              if m.extra.get("mode") == "in_commit"}
    plain = {(m.extra["store"], m.extra["keys"]): m.extra["p50"] for m in res.of("B3") if m.extra.get("baseline")}
    keys = sorted({m.extra["keys"] for m in rows})
    stores = list(dict.fromkeys(m.extra["store"] for m in rows))
    parts = sorted({m.extra["partitions"] for m in rows})
    fig, axes = plt.subplots(1, len(keys), figsize=(5 * len(keys), 5), squeeze=False)
    colors = {"sqlite": "#4c72b0", "postgresql": "#dd8452", "redis": "#c44e52"}
    width = 0.8 / max(1, len(stores))
    for ax, k in zip(axes[0], keys, strict=True):
        for j, s in enumerate(stores):
            sel = [next((m for m in rows if m.extra["store"] == s and m.extra["keys"] == k
                         and m.extra["partitions"] == p), None) for p in parts]
            xs = [i + (j - (len(stores) - 1) / 2) * width for i in range(len(parts))]
            p50 = [m.extra["p50"] if m else 0 for m in sel]
            p99 = [m.extra["p99"] if m else 0 for m in sel]
            ax.bar(xs, p50, width, label=f"{s} p50", color=colors.get(s))
            ax.scatter(xs, p99, marker="_", s=200, color="black", zorder=3,
                       label="p99" if j == len(stores) - 1 else None)
            tx = [one_tx.get((s, k, p)) for p in parts]
            ax.scatter([x for x, v in zip(xs, tx, strict=True) if v], [v for v in tx if v], marker="o", s=30,
                       facecolors="white", edgecolors="black", zorder=4,
                       label="offset_log='in_commit' p50" if j == len(stores) - 1 else None)
            if (s, k) in plain:
                ax.axhline(plain[(s, k)], color=colors.get(s), linestyle="--", linewidth=1,
                           label=f"{s} plain write p50")
        ax.set_yscale("log")
        ax.set_xticks(range(len(parts)))
        ax.set_xticklabels([f"{p} partitions" for p in parts])
        ax.set_ylabel("output cost per batch (ms): log_batch + commit")
        ax.set_title(f"{k:,} result keys", fontsize=9)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=3)
    fig.subplots_adjust(bottom=0.3)
    return fig


def _chart_b4(plt: Any, res: Results) -> Any:
    rows = res.of("B4")
    fig, ax = plt.subplots(figsize=(7, 4))
    for mode, color in (("default", "#4c72b0"), ("discovery", "#dd8452")):
        sel = sorted((m for m in rows if m.extra["mode"] == mode), key=lambda m: m.extra["partitions"])
        if not sel:
            continue
        xs = [m.extra["partitions"] for m in sel]
        ax.plot(xs, [m.extra["p50"] for m in sel], "o-", color=color, label=f"{sel[0].case.split(', ', 1)[1]} p50")
        ax.plot(xs, [m.extra["p99"] for m in sel], "x--", color=color, label="p99")
    ax.axhline(50, color="gray", linestyle=":", label="target 50 ms (1000 partitions)")
    ax.set_xscale("log")
    ax.set_xlabel("partitions")
    ax.set_ylabel("plan() latency (ms)")
    ax.legend(fontsize=7)
    return fig


def _chart_b5(plt: Any, res: Results) -> Any:
    rows = res.of("B5")
    fig, ax = plt.subplots(figsize=(7, 3.8))
    workloads = ("read", "pipeline")
    width = 0.38
    for j, (master, color) in enumerate((("local[1]", "#dd8452"), ("local[2]", "#4c72b0"))):
        sel = [next((m for m in rows if m.extra["workload"] == w and m.extra["master"] == master), None)
               for w in workloads]
        vals = [m.value if m else 0 for m in sel]
        lo = [m.value - min(m.extra.get("runs") or [m.value]) if m else 0 for m in sel]
        hi = [max(m.extra.get("runs") or [m.value]) - m.value if m else 0 for m in sel]
        bars = ax.bar([i + (j - 0.5) * width for i in range(2)], vals, width, label=master, color=color,
                      yerr=[lo, hi], capsize=3)
        for bar in bars:
            ax.text(bar.get_x() + bar.get_width() / 2, bar.get_height(), f"{bar.get_height():,.0f}",
                    ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(2))
    ax.set_xticklabels(["B1(a) KafkaRDD read", "B2 SQLite exactly-once"])
    ax.set_ylabel("records per wall-second (median, min–max)")
    ax.legend()
    return fig


_CHART = {"B1": _chart_b1, "B2": _chart_b2, "B3": _chart_b3, "B4": _chart_b4, "B5": _chart_b5, "B6": _chart_b6}


def load_results(path: Path) -> Results:
    """The :class:`Results` of a ``results.json`` written by a run (to redraw its charts)."""
    from .common import Check, Measure

    d = json.loads(path.read_text())
    res = Results(notes=d.get("notes", {}), errors=d.get("errors", {}), seconds=d.get("seconds", {}))
    res.measures = [Measure(**m) for m in d["measures"]]
    res.checks = [Check(**{k: v for k, v in c.items() if k != "passed"}) for c in d["checks"]]
    return res


if __name__ == "__main__":  # python3 -m bench.report RESULTS_JSON [OUTDIR]: redraw the charts of a run
    _src = Path(sys.argv[1])
    _res = load_results(_src)
    _env = json.loads(_src.read_text()).get("environment", {})
    _sub = f"{_env.get('date', '')}, {_env.get('machine', '').split(',')[0]}, PySpark {_env.get('PySpark', '')}"
    print(draw_charts(_res, list(TITLES), Path(sys.argv[2]) if len(sys.argv) > 2 else _src.parent, _sub))
