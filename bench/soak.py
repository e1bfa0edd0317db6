"""Soak benchmark: does a long-running exactly-once job stay flat? ``python3 -m bench.soak …``

Not a test: it runs for ``--minutes`` (default 30) and prints what it measured. One driver runs
two exactly-once streams on one StreamingContext with 0.5 s batches, both committing into the
chosen store (``--store sqlite|postgres|redis|redis-cluster``, started by
:mod:`dstream_exactly_once.testing` like Kafka):

- a Kafka stream (``KafkaUtils.createExactlyOnceStream``, ``commit_each_batch`` of a count and a
  sum) over a 2-partition topic a producer thread writes steadily (``--rate`` records/s);
- a file stream (``FileUtils.createExactlyOnceFileStream``) over ``service.log*``, appended to
  steadily and rotated by rename every ``--rotate-seconds`` (20 s), the oldest of three rotated
  files deleted.

Every ``--sample-seconds`` it samples the driver's RSS (the Python process and the JVM), the JVM's
heap (``jstat -gc``: survivor + old generation used, metaspace), open file descriptors and threads
of both, the file planner's tracked identities and the file app's stored positions, the store's
size (SQLite file + WAL, ``pg_database_size``, Redis ``used_memory`` summed over the nodes) and the
number of completed batches; a StreamingListener records every batch's
total delay (scheduling + processing, the commit included). Per window (``--window-minutes``,
default 5): batch latency p50/p99, the store's growth per 1,000 batches and the JVM heap retained
(the lowest sample of the window: a JVM's RSS follows its heap's expansion and the collector's
returns, the retained heap follows what the program keeps). Every ``--full-gc-seconds`` (150) the
driver's JVM runs a full collection (``jcmd <pid> GC.run``), so each window's lowest sample is its
live set rather than garbage promoted to the old generation and not yet collected.

At the end it drains (producer and writer stop; the committed count and sum must equal what was
produced and written: exactly-once is checked, not assumed), prints each series' least-squares
slope per hour with the threshold under which the series counts as flat (the first window is
warm-up and left out of the fits), and writes ``soak.json`` (every sample and window) and
``soak.png`` (one panel per series) to ``--out`` (default ``bench/results/soak-<store>-<time>``).

What grows by design is not a leak: with ``retain_batches`` (100 here) the offset and commit
logs keep the newest 100 batches, the file positions are the files present plus those retired
within that window, and results are a fixed set of ``incr`` keys, so every series should be flat
once warmed up. ``docs/stores.md`` ("How the store grows") says what grows in other apps.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from contextlib import ExitStack
from datetime import datetime, timezone
from typing import Any, Callable, Dict, List, Optional, Tuple

from dstream_exactly_once.testing._logs import logrotate

from .common import log
from .soak_report import chart, print_slopes, slopes, windows

STORES = ("sqlite", "postgres", "redis", "redis-cluster")
KEEP_ROTATED = 3
RETAIN_BATCHES = 100


# ---------------------------------------------------------------- /proc
def _proc_status(pid: int, field: str) -> Optional[int]:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _fds(pid: int) -> Optional[int]:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


def _jvm_heap(pid: Optional[int]) -> Dict[str, Optional[float]]:
    """The JVM's heap from ``jstat -gc`` (the JDK's own tool, read from the JVM's perf data: it does not
    stop the JVM): survivor + old generation used and metaspace used, MiB; ``None`` when unknown."""
    none: Dict[str, Optional[float]] = {"jvm_retained_mib": None, "jvm_metaspace_mib": None}
    if pid is None:
        return none
    try:
        jstat = os.path.join(os.path.dirname(os.path.realpath(f"/proc/{pid}/exe")), "jstat")
        out = subprocess.run([jstat, "-gc", str(pid)], capture_output=True, text=True, timeout=10).stdout.split("\n")
        names, values = out[0].split(), [float(x) for x in out[1].split()]
        row = dict(zip(names, values, strict=True))
        return {"jvm_retained_mib": (row["S0U"] + row["S1U"] + row["OU"]) / 1024.0,
                "jvm_metaspace_mib": row["MU"] / 1024.0}
    except (OSError, subprocess.SubprocessError, IndexError, KeyError, ValueError):
        return none


def _full_gc(pid: Optional[int]) -> None:
    """``jcmd <pid> GC.run``: a full collection in the driver's JVM (best effort)."""
    if pid is None:
        return
    try:
        jcmd = os.path.join(os.path.dirname(os.path.realpath(f"/proc/{pid}/exe")), "jcmd")
        subprocess.run([jcmd, str(pid), "GC.run"], capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        pass


def _jvm_pid() -> Optional[int]:
    """The driver's JVM: the ``java`` process among this process's descendants."""
    children: Dict[int, List[int]] = {}
    comms: Dict[int, str] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as f:
                stat = f.read()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        children.setdefault(ppid, []).append(int(name))
        comms[int(name)] = comm
    todo = list(children.get(os.getpid(), []))
    while todo:
        pid = todo.pop()
        if comms.get(pid) == "java":
            return pid
        todo.extend(children.get(pid, []))
    return None


# ---------------------------------------------------------------- the store
class Store:
    """The chosen store's server (if any), its URL per app and its size."""

    def __init__(self, kind: str, workdir: str, stack: ExitStack) -> None:
        self.kind = kind
        self.workdir = workdir
        self._server: Any = None
        if kind == "postgres":
            from dstream_exactly_once.testing import LocalPostgres

            self._server = LocalPostgres()
            stack.callback(self._server.stop)
            self._server.start()
            self._db = self._server.create_database()
            self.base_url = self._server.url(self._db)
        elif kind == "redis":
            from dstream_exactly_once.testing import LocalRedis

            self._server = LocalRedis(appendonly=True)
            stack.callback(self._server.stop)
            self._server.start()
            self.base_url = str(self._server.url)
        elif kind == "redis-cluster":
            from dstream_exactly_once.testing import LocalRedisCluster

            self._server = LocalRedisCluster()
            stack.callback(self._server.stop)
            self._server.start()
            self.base_url = str(self._server.url)
        else:
            self.base_url = f"sqlite:///{workdir}/soak.db"

    def size(self) -> Optional[int]:
        """Bytes: the SQLite file with its WAL, the PostgreSQL database, Redis ``used_memory`` of every node."""
        if self.kind == "sqlite":
            path = self.base_url[len("sqlite:///"):]
            return sum(os.path.getsize(p) for p in (path, path + "-wal", path + "-shm") if os.path.exists(p))
        if self.kind == "postgres":
            import psycopg

            with psycopg.connect(self.base_url.replace("postgresql+psycopg", "postgresql")) as conn:
                row = conn.execute("SELECT pg_database_size(current_database())").fetchone()
                return int(row[0]) if row else None
        import redis

        ports = self._server.ports if self.kind == "redis-cluster" else [self._server.port]
        total = 0
        for port in ports:
            client = redis.Redis(host="127.0.0.1", port=port)
            try:
                total += int(client.info("memory")["used_memory"])
            finally:
                client.close()
        return total


# ---------------------------------------------------------------- load
class Producer(threading.Thread):
    """Sends the numbers 1, 2, … to ``topic`` at about ``rate`` records/s until stopped."""

    def __init__(self, kafka: Any, topic: str, rate: int) -> None:
        super().__init__(daemon=True, name="soak-producer")
        self.kafka, self.topic, self.rate = kafka, topic, rate
        self.sent = 0
        self.stop_event = threading.Event()

    def run(self) -> None:
        producer = self.kafka.producer(acks="all")
        try:
            tick = 0.1
            while not self.stop_event.is_set():
                t0 = time.monotonic()
                for _ in range(max(1, int(self.rate * tick))):
                    self.sent += 1
                    producer.send(self.topic, str(self.sent).encode())
                producer.flush()
                self.stop_event.wait(max(0.0, tick - (time.monotonic() - t0)))
        finally:
            producer.close()


class LogWriter(threading.Thread):
    """Appends numbered lines to ``service.log`` (``rate`` per second), rotating it by rename every
    ``rotate_s`` seconds and deleting the oldest beyond ``KEEP_ROTATED``."""

    def __init__(self, directory: str, rate: int, rotate_s: float) -> None:
        super().__init__(daemon=True, name="soak-log-writer")
        self.dir, self.rate, self.rotate_s = directory, rate, rotate_s
        self.written = 0
        self.rotations = 0
        self.stop_event = threading.Event()
        self.log = os.path.join(directory, "service.log")
        open(self.log, "a").close()

    def rotate(self) -> None:
        logrotate(os.path.dirname(self.log), KEEP_ROTATED, os.path.basename(self.log))
        self.rotations += 1

    def run(self) -> None:
        next_rotation = time.monotonic() + self.rotate_s
        while not self.stop_event.is_set():
            n = max(1, self.rate // 10)
            with open(self.log, "a", encoding="utf-8") as f:
                f.write("".join(f"{i}\n" for i in range(self.written + 1, self.written + n + 1)))
            self.written += n
            if time.monotonic() >= next_rotation:
                self.rotate()
                next_rotation += self.rotate_s
            self.stop_event.wait(0.1)


# ---------------------------------------------------------------- the run
def _retry(fn: Callable[[], Any], default: Any = None) -> Any:
    """``fn()``, tried again if it met a dict changing under it (the planner runs on Spark's thread)."""
    for _ in range(5):
        try:
            return fn()
        except RuntimeError:
            time.sleep(0.01)
    return default


def run(args: argparse.Namespace) -> int:
    from pyspark.streaming import StreamingContext
    from pyspark.streaming.listener import StreamingListener

    from dstream_exactly_once import FileUtils, KafkaUtils
    from dstream_exactly_once.stores import Writes, open_store
    from dstream_exactly_once.testing import LocalKafka, make_spark_context

    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    out = args.out or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", f"soak-{args.store}-{stamp}")
    os.makedirs(out, exist_ok=True)
    duration = args.minutes * 60.0
    window_s = args.window_minutes * 60.0
    with ExitStack() as stack, tempfile.TemporaryDirectory(prefix="deo-soak-") as workdir:
        log("starting Kafka")
        kafka = LocalKafka(heap="512m")
        stack.callback(kafka.stop)
        kafka.start()
        log(f"starting the store ({args.store})")
        store = Store(args.store, workdir, stack)
        topic = kafka.create_topic(f"soak-{uuid.uuid4().hex[:8]}", partitions=2)
        logs = os.path.join(workdir, "logs")
        os.makedirs(logs)
        sc = make_spark_context("local[2]", "deo-soak", {"spark.driver.memory": "1g"})
        stack.callback(sc.stop)
        ssc = StreamingContext(sc, args.batch_seconds)
        kafka_app, file_app = f"soak-kafka-{stamp}", f"soak-files-{stamp}"
        kstream = KafkaUtils.createExactlyOnceStream(
            ssc, {"bootstrap.servers": kafka.bootstrap, "auto.offset.reset": "earliest"}, [topic],
            store=store.base_url, app_id=kafka_app, retain_batches=RETAIN_BATCHES)
        fstream = FileUtils.createExactlyOnceFileStream(
            ssc, os.path.join(logs, "service.log*"), {"starting.offsets": "earliest"},
            store=store.base_url, app_id=file_app, retain_batches=RETAIN_BATCHES)

        def count_and_sum(_batch: Any, rdd: Any) -> Any:
            n, total = rdd.map(lambda r: (1, int(r[1] if isinstance(r, tuple) else r))).fold(
                (0, 0), lambda a, b: (a[0] + b[0], a[1] + b[1]))
            return Writes().incr("soak", "count", n).incr("soak", "sum", total)

        kstream.commit_each_batch(count_and_sum)
        fstream.commit_each_batch(count_and_sum)
        t0 = time.monotonic()
        latencies: List[Tuple[float, float]] = []
        lock = threading.Lock()

        class Latency(StreamingListener):
            def onBatchCompleted(self, batchCompleted: Any) -> None:  # noqa: N802,N803 - Spark's names
                delay = batchCompleted.batchInfo().totalDelay()  # ms; -1 or None when unknown
                if delay is not None and delay >= 0:
                    with lock:
                        latencies.append((time.monotonic() - t0, float(delay)))

        ssc.addStreamingListener(Latency())
        producer = Producer(kafka, topic, args.rate)
        writer = LogWriter(logs, args.rate, args.rotate_seconds)
        positions = open_store(store.base_url, file_app)
        stack.callback(positions.close)
        samples: List[Dict[str, Any]] = []
        ssc.start()
        stack.callback(lambda: ssc.stop(stopSparkContext=False, stopGraceFully=False))
        producer.start()
        writer.start()
        jvm = _jvm_pid()
        log(f"running {args.minutes:g} min on {args.store} (JVM pid {jvm}); samples every {args.sample_seconds:g} s")
        next_report = t0 + 60
        next_gc = t0 + args.full_gc_seconds if args.full_gc_seconds > 0 else float("inf")
        while time.monotonic() - t0 < duration:
            time.sleep(args.sample_seconds)
            if time.monotonic() >= next_gc:  # a full collection: the next sample's heap is what the program keeps
                next_gc += args.full_gc_seconds
                _full_gc(jvm)
            with lock:
                batches = len(latencies)
            s: Dict[str, Any] = {
                "t": time.monotonic() - t0, "batches": batches,
                "rss_python_mib": (_proc_status(os.getpid(), "VmRSS") or 0) / 1024.0,
                "rss_jvm_mib": (_proc_status(jvm, "VmRSS") or 0) / 1024.0 if jvm else None,
                "fds_python": _fds(os.getpid()), "fds_jvm": _fds(jvm) if jvm else None,
                "threads_python": _proc_status(os.getpid(), "Threads"),
                "threads_jvm": _proc_status(jvm, "Threads") if jvm else None,
                **_jvm_heap(jvm),
                "tracked_files": _retry(lambda: len(fstream.committer.source.tracked())),
                "stored_file_positions": len(positions.load_positions()),
                "store_bytes": store.size(), "rotations": writer.rotations,
            }
            samples.append(s)
            if time.monotonic() >= next_report:
                next_report += 60
                log(f"{s['t'] / 60:.1f} min: {batches} batches, RSS py {s['rss_python_mib']:.0f} MiB / jvm "
                    f"{s['rss_jvm_mib'] or 0:.0f} MiB, tracked files {s['tracked_files']}, stored file positions "
                    f"{s['stored_file_positions']}, store {s['store_bytes'] or 0:,} B")
        producer.stop_event.set()
        writer.stop_event.set()
        producer.join()
        writer.join()
        verdict = _drain(open_store, store.base_url, kafka_app, file_app, producer.sent, writer.written)
        ssc.stop(stopSparkContext=False, stopGraceFully=False)
        per_window = windows(latencies, samples, window_s, duration)
        result = slopes(samples, per_window, warmup_s=window_s)
        print(f"\nsoak on {args.store}: {args.minutes:g} min, {len(latencies)} batches of {args.batch_seconds:g} s, "
              f"{producer.sent:,} records produced, {writer.written:,} lines written in {writer.rotations} "
              f"rotations; exactly-once check: {verdict}")
        print(f"\nwindows of {args.window_minutes:g} min:")
        print(f"{'window':>8} {'batches':>8} {'p50 ms':>9} {'p99 ms':>9} {'store KiB / 1k batches':>24}")
        for w in per_window:
            def f(v: Optional[float]) -> str:
                return "n/a" if v is None else f"{v:,.1f}"
            print(f"{w['start_s'] / 60:>7.0f}m {w['batches']:>8} {f(w['latency_p50_ms']):>9} "
                  f"{f(w['latency_p99_ms']):>9} {f(w['store_bytes_per_1k_batches']):>24}")
        print(f"\nslopes (least squares, per hour; the first {args.window_minutes:g} min are warm-up, left out):")
        print_slopes(result)
        doc = {"store": args.store, "minutes": args.minutes, "window_minutes": args.window_minutes,
               "batch_seconds": args.batch_seconds, "rate": args.rate, "rotate_seconds": args.rotate_seconds,
               "retain_batches": RETAIN_BATCHES, "produced": producer.sent, "written": writer.written,
               "rotations": writer.rotations, "exactly_once": verdict, "samples": samples,
               "windows": per_window, "slopes": result, "latencies": latencies}
        with open(os.path.join(out, "soak.json"), "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=1)
        chart(samples, per_window, f"soak on {args.store}, {args.minutes:g} min", os.path.join(out, "soak.png"))
        print(f"\nwrote {out}/soak.json and {out}/soak.png")
        return 0 if verdict.startswith("exact") else 1


def _drain(open_store: Callable[..., Any], url: str, kafka_app: str, file_app: str, produced: int,
           written: int, timeout: float = 90.0) -> str:
    """Wait until both apps committed everything produced and written; ``exact`` or what differs."""
    want = {kafka_app: (produced, produced * (produced + 1) // 2), file_app: (written, written * (written + 1) // 2)}
    deadline = time.monotonic() + timeout
    got: Dict[str, Tuple[int, int]] = {}
    while True:
        for app in want:
            with open_store(url, app) as s:
                v = s.get_values("soak")
            got[app] = (int(v.get("count", 0)), int(v.get("sum", 0)))
        if got == want:
            return "exact (count and sum of every record and line)"
        if time.monotonic() > deadline:
            return f"NOT exact after {timeout:.0f} s of draining: committed {got}, expected {want}"
        time.sleep(1)


def parse(argv: Optional[List[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python3 -m bench.soak", description=__doc__.split("\n\n")[0])
    p.add_argument("--store", choices=STORES, default="sqlite")
    p.add_argument("--minutes", type=float, default=30.0, help="duration (default 30)")
    p.add_argument("--window-minutes", type=float, default=5.0, help="latency/growth windows (default 5)")
    p.add_argument("--sample-seconds", type=float, default=5.0, help="sampling interval (default 5)")
    p.add_argument("--batch-seconds", type=float, default=0.5, help="batch interval (default 0.5)")
    p.add_argument("--rate", type=int, default=200, help="Kafka records and log lines per second (default 200)")
    p.add_argument("--full-gc-seconds", type=float, default=150.0,
                   help="a full collection in the driver's JVM this often, so the retained heap is the live set "
                        "(0: never; default 150)")
    p.add_argument("--rotate-seconds", type=float, default=20.0, help="log rotation interval (default 20)")
    p.add_argument("--out", help="directory for soak.json and soak.png")
    args = p.parse_args(argv)
    for name in ("minutes", "window_minutes", "sample_seconds", "batch_seconds", "rotate_seconds"):
        if getattr(args, name) <= 0:
            p.error(f"--{name.replace('_', '-')} must be > 0, got {getattr(args, name)!r}")
    if args.rate <= 0:
        p.error(f"--rate must be > 0, got {args.rate!r}")
    if args.full_gc_seconds < 0:
        p.error(f"--full-gc-seconds must be >= 0 (0: never), got {args.full_gc_seconds!r}")
    return args


def _exit_on_sigterm(_signum: int, _frame: Any) -> None:
    raise SystemExit(143)  # the services started are stopped on the way out


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    sys.exit(run(parse()))
