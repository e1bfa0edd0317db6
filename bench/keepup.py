"""B8 keeping up: can a stream hold its batch interval as partitions grow? ``python3 -m bench.keepup …``

Not a test: it prints tables and writes a chart. A producer process writes ``--rate`` records/s
(100 bytes each) spread evenly over the P partitions of one topic, continuously, while three peers
run one after another, each in its own process and JVM with ``local[2]`` (see
:mod:`bench.keepup_child`):

- ``ours``: ``KafkaUtils.createExactlyOnceStream`` + ``commit_each_batch`` (count and sum), SQLite;
- ``jvm``: Spark's Structured Streaming Kafka source (``spark-sql-kafka-0-10``) + ``foreachBatch`` doing
  the same count and sum into SQLite, the same trigger interval, the same consumer settings
  (:data:`bench.common.READ_SETTINGS`);
- ``ss``: the same query as ``jvm`` with this library's JVM-free ``deo-kafka`` source instead of
  ``format("kafka")`` (the same options and consumer settings, the same session);
- ``floor``: a plain PySpark job with as many tasks as ``ours`` used per batch (its median in the same
  round), back to back: what Spark charges for that many tasks.

Each peer warms up ``--warm`` seconds from its first completed batch (the same for all), then is
measured for ``--window`` seconds; rounds (``--rounds``) run the peers in a rotated order. Per peer
and P: committed batches per second (``1 / interval`` = keeping up), batch duration p50/p99,
planning / Spark job / commit p50 (from progress records), tasks per batch, CPU seconds of the
peer's whole process tree per batch, and the records it had left behind at the end of its window.
Targets (printed PASS/FAIL, never asserted):
``ours`` holds 0.5 s batches (≥ 1.9 committed batches/s) at P = 100 and 1,000, 2 s batches (≥ 0.475/s)
at P = 10,000, and its batch p50 is ≤ 0.5x the JVM source's at P = 100 and 1,000; so is ``ss``'s.

``--skew``: a topic of 100 partitions filled with ``--skew-records`` records, 80% of them in partition 0,
read from ``earliest`` in one batch by ``ours`` with the task planner's splitting off
(``spark.streaming.kafka.tasks.split.size=0``) and on (the default, and a split size of a tenth of the
hot partition): the first batch's duration before and after splitting, in the same rounds.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import subprocess
import sys
import time
import uuid
from contextlib import ExitStack
from datetime import datetime, timezone
from functools import partial
from typing import Any, Callable, Dict, List, Optional, Sequence

from .common import READ_SETTINGS, log, percentile
from .planning import _produce_until, _produce_until_confluent

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEERS = ("ours", "jvm", "ss", "floor")
#: at most this many partitions per CreateTopics / CreatePartitions request (a KRaft broker refuses larger ones)
STEP = 1000


def _orphan_safe(target: Callable[..., None], parent: int, *args: Any) -> None:
    """Run ``target(*args)`` in a writer process that exits as soon as the benchmark that started it is
    gone (a killed benchmark runs no clean-up, and its writer would go on loading the machine)."""
    import threading

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(0)

    threading.Thread(target=watch, daemon=True).start()
    target(*args)


class Feed:
    """A writer process (context manager): ``target(*args, stop, sent)`` runs until ``stop`` is set and
    counts what it wrote in ``sent``."""

    def __init__(self, target: Callable[..., None], *args: Any) -> None:
        ctx = mp.get_context("spawn")
        self.stop, self.sent = ctx.Event(), ctx.Value("q", 0)
        self.proc = ctx.Process(target=_orphan_safe, args=(target, os.getpid(), *args, self.stop, self.sent),
                                daemon=True)
        self.t0 = 0.0

    @classmethod
    def kafka(cls, bootstrap: str, topic: str, partitions: int, rate: int, hot: float = 0.0,
              settings: Optional[Dict[str, Any]] = None, client: str = "kafka-python") -> Feed:
        """The producer of one topic (B4's, :func:`bench.planning._produce_until`); ``client``
        ``"confluent-kafka"``: the same records and settings from a librdkafka producer."""
        target = _produce_until_confluent if client == "confluent-kafka" else _produce_until
        return cls(partial(target, hot=hot, settings=settings), bootstrap, [(topic, partitions)], rate)

    def __enter__(self) -> Feed:
        self.t0 = time.monotonic()
        self.proc.start()
        return self

    def achieved(self) -> float:
        return self.sent.value / max(time.monotonic() - self.t0, 1e-9)

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        self.proc.join(30)


def _grow_files(directory: str, n: int, grow: int, interval: float, stop: Any, sent: Any) -> None:
    """Writer process: every ``interval`` seconds one line appended to each of ``grow`` random files of the ``n``."""
    import random

    rng, k, t0 = random.Random(7), 0, time.monotonic()
    while not stop.is_set():
        for i in rng.sample(range(n), min(grow, n)):
            with open(os.path.join(directory, f"f{i:05d}.log"), "a", encoding="ascii") as f:
                f.write(f"line {k}\n")
            k += 1
        sent.value = k
        ahead = (k / max(min(grow, n), 1)) * interval - (time.monotonic() - t0)
        if ahead > 0:
            time.sleep(ahead)


class FileFeed(Feed):
    """``n`` one-line files in ``directory``, and a process growing ``grow`` of them per ``interval``."""

    def __init__(self, directory: str, n: int, grow: int, interval: float) -> None:  # noqa: D107
        for i in range(n):
            with open(os.path.join(directory, f"f{i:05d}.log"), "w", encoding="ascii") as f:
                f.write(f"first line of file {i}\n")
        super().__init__(_grow_files, directory, n, grow, interval)


def make_topic(kafka: Any, name: str, partitions: int) -> str:
    """``name`` with ``partitions`` partitions, created in steps of :data:`STEP`."""
    kafka.create_topic(name, partitions=min(partitions, STEP))
    total = min(partitions, STEP)
    while total < partitions:
        total = min(partitions, total + STEP)
        kafka.add_partitions(name, total)
    return name


def run_peer(spec: Dict[str, Any], timeout: float) -> Dict[str, Any]:
    """One peer in its own process (``bench.keepup_child``); its RESULT line, or an error."""
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    try:
        done = subprocess.run([sys.executable, "-m", "bench.keepup_child", json.dumps(spec)], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"no result within {timeout:.0f} s"}
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("RESULT "):
            return dict(json.loads(line[len("RESULT "):]))
    return {"error": f"exit {done.returncode}, no RESULT line; stderr tail: {done.stderr[-1500:]}"}


def summarize(result: Dict[str, Any], window_s: float) -> Dict[str, Any]:
    """The table row of one peer run."""
    if "error" in result:
        return {"error": result["error"]}
    rows = result["rows"]

    def col(k: str) -> List[float]:
        return [float(r[k]) for r in rows]

    n = len(rows)
    out: Dict[str, Any] = {"batches": n, "batches_per_s": n / window_s, "first_batch_s": result["first_batch_s"],
                           "cpu_per_batch_s": result["cpu_s"] / n if n else float("nan"), "cpu_s": result["cpu_s"],
                           "lag_records": result.get("lag_records"),
                           "records_per_batch": percentile(col("records"), 50) if n else float("nan")}
    for k in ("batch_ms", "plan_ms", "job_ms", "commit_ms", "tasks"):
        out[k + "_p50"] = percentile(col(k), 50) if n else float("nan")
    out["batch_ms_p99"] = percentile(col("batch_ms"), 99) if n else float("nan")
    return out


def _fmt(x: Any, digits: int = 0) -> str:
    if x is None or (isinstance(x, float) and x != x):
        return "–"
    return f"{x:,.{digits}f}" if isinstance(x, (int, float)) else str(x)


def table(p: int, interval: float, runs: Dict[str, List[Dict[str, Any]]]) -> List[str]:
    lines = [f"P = {p:,} partitions, {interval:g} s batches", "",
             "| peer | round | committed batches/s | batch p50 / p99 ms | plan p50 ms | job p50 ms | commit p50 ms "
             "| tasks p50 | records/batch p50 | CPU s per batch | lag at end (records) | first batch s |",
             "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for peer, rows in runs.items():
        for i, r in enumerate(rows):
            if "error" in r:
                lines.append(f"| {peer} | {i + 1} | error: {r['error'][:200]} |" + " |" * 9)
                continue
            lines.append(f"| {peer} | {i + 1} | {r['batches_per_s']:.2f} | {_fmt(r['batch_ms_p50'])} / "
                         f"{_fmt(r['batch_ms_p99'])} | {_fmt(r['plan_ms_p50'])} | {_fmt(r['job_ms_p50'])} | "
                         f"{_fmt(r['commit_ms_p50'])} | {_fmt(r['tasks_p50'])} | {_fmt(r['records_per_batch'])} | "
                         f"{_fmt(r['cpu_per_batch_s'], 2)} | {_fmt(r['lag_records'])} | "
                         f"{_fmt(r['first_batch_s'], 1)} |")
    return lines


def _median(rows: Sequence[Dict[str, Any]], key: str) -> Optional[float]:
    xs = [float(r[key]) for r in rows if "error" not in r and r.get(key) == r.get(key) and r.get(key) is not None]
    return percentile(xs, 50) if xs else None


def checks(p: int, interval: float, runs: Dict[str, List[Dict[str, Any]]]) -> List[str]:
    out = []
    ours = runs.get("ours", [])
    rate = _median(ours, "batches_per_s")
    need = 0.95 / interval
    if rate is not None:
        verdict = "PASS" if rate >= need else "**FAIL**"
        out.append(f"| ours holds {interval:g} s batches at P = {p:,} | {rate:.2f} batches/s | >= {need:.2f} | "
                   f"{verdict} |")
    jvm = runs.get("jvm", [])
    for peer, label in (("ours", "ours / JVM"), ("ss", "deo-kafka / JVM source")):
        mine = runs.get(peer, [])
        if mine and jvm and p in (100, 1000):
            out.append(_half_of_jvm(label, p, _median(mine, "batch_ms_p50"), _median(jvm, "batch_ms_p50")))
    return out


def _half_of_jvm(label: str, p: int, a: Optional[float], b: Optional[float]) -> str:
    """The check row "batch p50 at most half the JVM source's" of a peer's median ``a`` against ``b``."""
    if a is None or b is None:
        why = "the JVM source completed no batch in its window" if b is None else "it completed no batch"
        return f"| {label} batch p50 at P = {p:,} | n/a ({why}) | <= 0.50x | n/a |"
    ratio = a / b
    return (f"| {label} batch p50 at P = {p:,} | {ratio:.2f}x ({a:,.0f} / {b:,.0f} ms) | <= 0.50x | "
            f"{'PASS' if ratio <= 0.5 else '**FAIL**'} |")


def _spec(peer: str, bootstrap: str, topic: str, interval: float, warm: float, window: float, connector: Any,
          **extra: Any) -> Dict[str, Any]:
    spec: Dict[str, Any] = {"peer": peer, "bootstrap": bootstrap, "topic": topic, "batch_s": interval,
                            "warm_s": warm, "window_s": window, "settings": dict(READ_SETTINGS), **extra}
    if peer in ("jvm", "ss"):  # the same session for both Structured Streaming peers
        spec.update(packages=connector.packages, ivy=connector.ivy_dir, excludes=connector.excludes,
                    jars=connector.jars)
    return spec


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m bench.keepup", description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", default="10,100,1000", help="P values with 0.5 s batches (default 10,100,1000)")
    ap.add_argument("--large", type=int, default=10000, help="P run by ours alone with --large-interval batches "
                                                             "(0: skip; default 10000)")
    ap.add_argument("--large-interval", type=float, default=2.0)
    ap.add_argument("--interval", type=float, default=0.5, help="batch interval / trigger, s (default 0.5)")
    ap.add_argument("--rate", type=int, default=2000, help="records/s over all partitions (default 2000)")
    ap.add_argument("--warm", type=float, default=20.0,
                    help="warm-up seconds per peer run, from its first completed batch (default 20)")
    ap.add_argument("--window", type=float, default=60.0, help="measured seconds per peer run (default 60)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--peers", default=",".join(PEERS))
    ap.add_argument("--files", default="100,1000,10000",
                    help="N one-line files read by the file stream from earliest, then grown (0: skip; "
                         "default 100,1000,10000)")
    ap.add_argument("--grow", type=int, default=200, help="files growing by a line per batch interval (default 200)")
    ap.add_argument("--skew", action="store_true", help="also run the skewed-topic case")
    ap.add_argument("--skew-records", type=int, default=2_000_000)
    ap.add_argument("--results", default=os.path.join(ROOT, "bench", "results", "keepup.json"))
    ap.add_argument("--chart", default=os.path.join(ROOT, "bench", "results", "b8_keepup.png"))
    args = ap.parse_args(argv)
    peers = [p for p in args.peers.split(",") if p]
    for p in peers:
        if p not in PEERS:
            ap.error(f"--peers: unknown peer {p!r}; allowed: {', '.join(PEERS)}")
    sizes = [int(x) for x in args.partitions.split(",") if x]

    from dstream_exactly_once.testing import LocalKafka

    from .jvm_connector import resolve_connector

    connector = resolve_connector() if {"jvm", "ss"} & set(peers) else None
    if connector is not None and connector.packages is None:
        log(f"the Structured Streaming peers are left out (their session loads the connector): {connector.problem}")
        peers = [x for x in peers if x not in ("jvm", "ss")]
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    load0 = os.getloadavg()[0]
    report: List[str] = []
    verdicts: List[str] = []
    data: Dict[str, Any] = {"started": stamp, "args": vars(args), "cases": []}
    timeout = args.warm + args.window + 900  # a first batch may take up to 300 s (then measured anyway)
    with ExitStack() as stack:
        kafka = LocalKafka(heap="2g", broker_config={"num.partitions": 1})
        stack.callback(kafka.stop)
        kafka.start()
        cases = [(p, args.interval, peers) for p in sizes]
        if args.large:
            cases.append((args.large, args.large_interval, [x for x in peers if x not in ("jvm", "ss")]))
        for p, interval, case_peers in cases:
            topic = make_topic(kafka, f"keepup-{p}-{uuid.uuid4().hex[:6]}", p)
            runs: Dict[str, List[Dict[str, Any]]] = {peer: [] for peer in case_peers}
            with Feed.kafka(kafka.bootstrap, topic, p, args.rate) as feed:
                time.sleep(2.0)
                for r in range(args.rounds):
                    order = [x for x in case_peers if x != "floor"]
                    order = order[r % len(order):] + order[:r % len(order)] if order else []
                    if "floor" in case_peers:
                        order.append("floor")  # last: it takes the task count of ours in this round
                    for peer in order:
                        extra: Dict[str, Any] = {}
                        if peer == "floor":
                            extra["tasks"] = int((runs.get("ours") or [{}])[-1].get("tasks_p50") or 2)
                        log(f"P={p:,} round {r + 1}/{args.rounds}: {peer}")
                        res = run_peer(_spec(peer, kafka.bootstrap, topic, interval, args.warm, args.window,
                                             connector, **extra), timeout)
                        runs[peer].append(summarize(res, args.window))
                        log(f"  {json.dumps(runs[peer][-1])[:300]}")
                achieved = feed.achieved()
            report += table(p, interval, runs) + ["", f"producer: {achieved:,.0f} records/s achieved "
                                                       f"(asked {args.rate:,})", ""]
            verdicts += checks(p, interval, runs)
            data["cases"].append({"partitions": p, "interval": interval, "runs": runs, "achieved_rate": achieved})
            kafka.delete_topic(topic)
        if args.skew:
            report += skew_case(kafka, args, connector)
    files = [int(x) for x in args.files.split(",") if x and int(x) > 0]
    if files:
        lines, found, raw = files_cases(files, args, timeout)
        report += lines
        verdicts += found
        data["files"] = raw
    load1 = os.getloadavg()[0]
    head = [f"## {stamp} — B8 keeping up (`python3 -m bench.keepup {' '.join(argv or sys.argv[1:])}`)", "",
            f"1-minute load average {load0:.2f} at start, {load1:.2f} at end (2 CPUs); "
            f"JVM connector: {connector.label if connector else 'not run'}", "",
            "| check | measured | target | status |", "|---|---|---|---|", *verdicts, ""]
    print("\n".join(head + report))
    os.makedirs(os.path.dirname(args.results), exist_ok=True)
    with open(args.results, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, default=str)
    chart(data["cases"], data.get("files", []), args.chart)
    return 0


def skew_case(kafka: Any, args: argparse.Namespace, connector: Any) -> List[str]:
    """First batch over a skewed backlog, splitting off / default / a tenth of the hot partition."""
    p = 100
    topic = make_topic(kafka, f"keepup-skew-{uuid.uuid4().hex[:6]}", p)
    log(f"skew: filling {topic} with {args.skew_records:,} records (80% in partition 0)")
    with Feed.kafka(kafka.bootstrap, topic, p, rate=200_000, hot=0.8) as feed:
        while feed.sent.value < args.skew_records:
            time.sleep(0.5)
    hot = int(args.skew_records * 0.8)
    variants = {"split off (tasks.split.size=0)": {"spark.streaming.kafka.tasks.split.size": "0"},
                "split: default": {},
                f"split: tasks.split.size={hot // 10:,}": {"spark.streaming.kafka.tasks.split.size": str(hot // 10)}}
    results: Dict[str, List[float]] = {v: [] for v in variants}
    tasks: Dict[str, List[float]] = {v: [] for v in variants}
    for r in range(args.rounds):
        names = list(variants)
        for name in names[r % len(names):] + names[:r % len(names)]:
            spec = _spec("ours", kafka.bootstrap, topic, 5.0, 0.0, 10.0, connector, starting="earliest",
                         conf=variants[name])
            res = run_peer(spec, 900)
            first = res.get("first_batch")  # the backlog's batch: before the measured window, kept apart
            if "error" in res or not first:
                log(f"skew {name}: {res.get('error', 'no batch completed')}")
                continue
            results[name].append(float(first["batch_ms"]))
            tasks[name].append(float(first["tasks"]))
    lines = [f"Skewed topic: {p} partitions, {args.skew_records:,} records, 80% in partition 0, one batch "
             "from earliest (`local[2]`, ours; rounds rotated)", "",
             "| variant | first batch ms (each round) | tasks |", "|---|---|---:|"]
    for name in variants:
        lines.append(f"| {name} | {', '.join(f'{x:,.0f}' for x in results[name]) or 'no result'} | "
                     f"{_fmt(percentile(tasks[name], 50) if tasks[name] else None)} |")
    kafka.delete_topic(topic)
    return lines + [""]


def files_cases(sizes: Sequence[int], args: argparse.Namespace, timeout: float) -> Any:
    """The file stream over N one-line files: its first batch (every file from ``earliest``) and then
    ``--grow`` files growing per batch interval."""
    import tempfile

    rows: List[str] = [f"File stream: N one-line files from `earliest`, then {args.grow} files growing by a line "
                       f"every {args.interval:g} s (`local[2]`, SQLite, 0.5 s batches; lag in bytes)", "",
                       "| N files | round | first batch ms | first batch tasks | committed batches/s "
                       "| batch p50 / p99 ms | plan p50 ms | job p50 ms | commit p50 ms | tasks p50 | CPU s per batch "
                       "| bytes behind |",
                       "|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|"]
    found: List[str] = []
    raw: List[Dict[str, Any]] = []
    for n in sizes:
        firsts, rates = [], []
        for r in range(args.rounds):
            with tempfile.TemporaryDirectory(prefix="deo-keepup-files-") as directory, \
                    FileFeed(directory, n, args.grow, args.interval):
                log(f"files N={n:,} round {r + 1}/{args.rounds}")
                res = run_peer({"peer": "files", "dir": directory, "batch_s": args.interval, "warm_s": args.warm,
                                "window_s": args.window}, timeout)
            s = summarize(res, args.window)
            raw.append({"files": n, "round": r + 1, "summary": s, "first_batch": res.get("first_batch")})
            if "error" in s:
                rows.append(f"| {n:,} | {r + 1} | error: {s['error'][:200]} |" + " |" * 9)
                continue
            first = res.get("first_batch") or {}
            firsts.append(float(first.get("batch_ms", float("nan"))))
            rates.append(s["batches_per_s"])
            rows.append(f"| {n:,} | {r + 1} | {_fmt(first.get('batch_ms'))} | {_fmt(first.get('tasks'))} | "
                        f"{s['batches_per_s']:.2f} | {_fmt(s['batch_ms_p50'])} / {_fmt(s['batch_ms_p99'])} | "
                        f"{_fmt(s['plan_ms_p50'])} | {_fmt(s['job_ms_p50'])} | {_fmt(s['commit_ms_p50'])} | "
                        f"{_fmt(s['tasks_p50'])} | {_fmt(s['cpu_per_batch_s'], 2)} | {_fmt(s['lag_records'])} |")
        if n == 10_000 and firsts:
            f50 = percentile(firsts, 50)
            found.append(f"| file stream's first batch over {n:,} files | {f50:,.0f} ms | <= 15,000 ms | "
                         f"{'PASS' if f50 <= 15_000 else '**FAIL**'} |")
        if n == 10_000 and rates:
            r50 = percentile(rates, 50)
            found.append(f"| file stream holds {args.interval:g} s batches over {n:,} files, {args.grow} growing "
                         f"| {r50:.2f} batches/s | >= {0.95 / args.interval:.2f} | "
                         f"{'PASS' if r50 >= 0.95 / args.interval else '**FAIL**'} |")
    return rows + [""], found, raw


def _curve(ax: Any, points: List[Any], label: str) -> None:
    pts = [(x, y) for x, y in points if y is not None and y == y and y > 0]
    if pts:
        ax.plot([x for x, _ in pts], [y for _, y in pts], marker="o", label=label)


def chart(cases: List[Dict[str, Any]], files: List[Dict[str, Any]], path: str) -> None:
    """Left: batch, plan, job and commit p50 of ``ours`` by partitions (log-log), the JVM source's batch
    and the plain job beside. Right: the same for the file stream by files, and its first batch."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(14, 5))
    for peer, key, label in (("ours", "batch_ms_p50", "ours: batch"), ("ours", "plan_ms_p50", "ours: plan"),
                             ("ours", "job_ms_p50", "ours: Spark job"), ("ours", "commit_ms_p50", "ours: commit"),
                             ("jvm", "batch_ms_p50", "JVM source: batch"),
                             ("ss", "batch_ms_p50", "deo-kafka source: batch"),
                             ("floor", "batch_ms_p50", "plain job floor")):
        _curve(left, [(c["partitions"], _median(c["runs"].get(peer, []), key)) for c in cases], label)
    sizes = sorted({f["files"] for f in files})
    for key, label in (("batch_ms_p50", "batch"), ("plan_ms_p50", "plan"), ("job_ms_p50", "Spark job"),
                       ("commit_ms_p50", "commit")):
        _curve(right, [(n, _median([f["summary"] for f in files if f["files"] == n], key)) for n in sizes], label)
    _curve(right, [(n, _median([f["first_batch"] for f in files if f["files"] == n and f["first_batch"]],
                               "batch_ms")) for n in sizes], "first batch (from earliest)")
    for ax, what, title in ((left, "partitions", "Kafka: per-batch cost by partitions"),
                            (right, "files", "Files: per-batch cost by files")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(what)
        ax.set_ylabel("ms (p50)")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
        ax.set_title(title)
    fig.suptitle("B8 keeping up (local[2], 0.5 s batches)")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
