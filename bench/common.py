"""Shared plumbing: result records, the run context (services, SparkContext, the read topic), stats."""

from __future__ import annotations

import os
import statistics
import sys
import time
import uuid
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence

READ_TOPIC_PARTITIONS = 4
RECORD_BYTES = 100

#: Consumer settings given to every reader of B1/B2/B5 — the KafkaRDD executors, the bare
#: kafka-python loop and (with the ``kafka.`` prefix) Spark's JVM source — so that no side reads
#: with larger fetches or socket buffers than another. ``receive.buffer.bytes`` -1 is the OS
#: default (autotuned) for both clients; Spark would otherwise force 64 KiB on its executors.
#: ``max.poll.records``: the KafkaRDD reader and the bare loop also poll with ``max_records=10000``.
READ_SETTINGS: Dict[str, Any] = {
    "max.partition.fetch.bytes": 4 * 1024 * 1024,
    "fetch.max.bytes": 50 * 1024 * 1024,
    "receive.buffer.bytes": -1,
    "max.poll.records": 10000,
}
POLL_RECORDS = 10000


def log(msg: str) -> None:
    """Progress line on stderr (the results table goes to stdout)."""
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


@dataclass
class Measure:
    """One measured number (a row of a benchmark's table)."""

    bench: str
    case: str
    value: float
    unit: str
    detail: str = ""
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class Check:
    """A target: ``value op target`` (``>=`` or ``<=``); printed as PASS/FAIL, never asserted."""

    bench: str
    what: str
    value: Optional[float]
    op: str
    target: float
    unit: str
    note: str = ""
    invalid: str = ""  # why the measurement cannot be right (e.g. a scaling ratio above the core count)

    @property
    def passed(self) -> Optional[bool]:
        if self.value is None or self.invalid:
            return None
        return self.value >= self.target if self.op == ">=" else self.value <= self.target

    @property
    def status(self) -> str:
        if self.invalid:
            return "FLAGGED invalid"
        return {True: "PASS", False: "FAIL", None: "n/a"}[self.passed]


@dataclass
class Results:
    measures: List[Measure] = field(default_factory=list)
    checks: List[Check] = field(default_factory=list)
    notes: Dict[str, List[str]] = field(default_factory=dict)
    errors: Dict[str, str] = field(default_factory=dict)
    seconds: Dict[str, float] = field(default_factory=dict)

    def add(self, bench: str, case: str, value: float, unit: str, detail: str = "", **extra: Any) -> Measure:
        m = Measure(bench, case, value, unit, detail, extra)
        self.measures.append(m)
        return m

    def check(self, bench: str, what: str, value: Optional[float], op: str, target: float, unit: str,
              note: str = "", invalid: str = "") -> Check:
        c = Check(bench, what, value, op, target, unit, note, invalid)
        self.checks.append(c)
        return c

    def note(self, bench: str, text: str) -> None:
        self.notes.setdefault(bench, []).append(text)

    def of(self, bench: str) -> List[Measure]:
        return [m for m in self.measures if m.bench == bench]

    def find(self, bench: str, **extra: Any) -> Optional[Measure]:
        for m in self.measures:
            if m.bench == bench and all(m.extra.get(k) == v for k, v in extra.items()):
                return m
        return None

    def to_json(self) -> Dict[str, Any]:
        return {"measures": [asdict(m) for m in self.measures],
                "checks": [{**asdict(c), "passed": c.passed} for c in self.checks],
                "notes": self.notes, "errors": self.errors, "seconds": self.seconds}


# ------------------------------------------------------------------------------------------ stats
def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile ``q`` in [0, 100] (numpy's default method)."""
    xs = sorted(values)
    if not xs:
        return float("nan")
    pos = (len(xs) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def spread(values: Sequence[float], fmt: str = "{:,.0f}") -> str:
    """``median [min–max], IQR q1–q3, n=…`` of ``values`` (for the report's detail column)."""
    if not values:
        return "no runs"
    return (f"median {fmt.format(median(values))} [min {fmt.format(min(values))}, max {fmt.format(max(values))}; "
            f"IQR {fmt.format(percentile(values, 25))}–{fmt.format(percentile(values, 75))}; n={len(values)}]")


def cpu_probe(n: int = 3_000_000) -> float:
    """Seconds of a fixed pure-Python loop: how fast one core is right now (lower is faster).

    Shared or throttled machines change speed during a run; the probe before and after each
    benchmark shows by how much, so ratios measured minutes apart can be judged.
    """
    t0 = time.perf_counter()
    x = 0
    for i in range(n):
        x += i
    return time.perf_counter() - t0


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def fmt_num(x: float) -> str:
    if x != x:  # nan
        return "n/a"
    if abs(x) >= 100_000:
        return f"{x:,.0f}"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    if abs(x) >= 1:
        return f"{x:.2f}"
    return f"{x:.3f}"


# ------------------------------------------------------------------------------------------ settings
@dataclass
class Settings:
    """Sizes of one run; ``--quick`` and ``--records`` scale them."""

    quick: bool
    records: int            # B1/B5 read topic size (100-byte records over 4 partitions)
    b1_repeats: int         # B1 rounds: every case once per round, in a rotated order (>= 5 in a full run)
    b2_records: int         # records read by the B2 pipeline (a prefix of the read topic)
    b2_batches: int
    b2_repeats: int
    b5_repeats: int         # B5 rounds, alternating local[2] and local[1] (medians reported, >= 5 in a full run)
    b3_partitions: Sequence[int]
    b3_keys: Sequence[int]
    b3_reps_small: int      # commits timed per case with 1k keys
    b3_reps_large: int      # ... with the larger key count (100k; 10k in --quick)
    b4_partitions: Sequence[int]
    b4_reps: int
    jvm: bool               # run B1(c) (Spark's JVM Kafka source)
    b6_files: int = 4       # B6 generated log files (= partitions on both Spark sides)
    b6_mib: int = 64        # B6 MiB per file
    b6_rounds: int = 5      # B6 timed rounds after one warm-up round, cases A B C D in each (>= 5 in a full run)

    @classmethod
    def make(cls, quick: bool, records: Optional[int], jvm: bool = True, file_mib: Optional[int] = None) -> Settings:
        if quick:  # a smoke run: every code path, tiny sizes (B3 uses 10k instead of 100k keys)
            n = records or 50_000
            return cls(True, n, 2, max(4, min(n, 20_000)), 2, 2, 2, (10, 100, 1000), (1_000, 10_000), 10, 2,
                       (10, 100, 1000), 10, jvm, 4, file_mib or 4, 2)
        n = records or 1_000_000
        return cls(False, n, 5, max(4, min(n, 200_000)), 10, 5, 5, (10, 100, 1000), (1_000, 100_000), 50, 3,
                   (10, 100, 1000), 100, jvm, 4, file_mib or 64, 5)


# ------------------------------------------------------------------------------------------ context
@dataclass
class ReadTopic:
    name: str
    partitions: int
    per_partition: Dict[int, int]   # partition -> end offset (start is 0)
    produce_seconds: float

    @property
    def total(self) -> int:
        return sum(self.per_partition.values())

    def ranges(self, limit: Optional[int] = None) -> List[Any]:
        """One OffsetRange per partition covering the first ``limit`` records of the topic (all by default)."""
        from dstream_exactly_once import OffsetRange

        per = None if limit is None else max(1, limit // self.partitions)
        return [OffsetRange(self.name, p, 0, end if per is None else min(end, per))
                for p, end in sorted(self.per_partition.items())]


class Context:
    """Services started on first use and stopped by :meth:`close`; one SparkContext at a time."""

    def __init__(self, settings: Settings, results: Results, workdir: str) -> None:
        self.settings = settings
        self.results = results
        self.workdir = workdir
        self.stack = ExitStack()
        self._kafka: Any = None
        self._redis: Any = None
        self._postgres: Any = None
        self._sc: Any = None
        self._master: Optional[str] = None
        self._topic: Optional[ReadTopic] = None
        self.versions: Dict[str, str] = {}

    # ---------------------------------------------------------------- services
    def kafka(self) -> Any:
        if self._kafka is None:
            from dstream_exactly_once.testing import LocalKafka

            log("starting a local KRaft Kafka broker (1 GiB heap)")
            broker = LocalKafka(heap="1g")
            self.stack.callback(broker.stop)
            broker.start()
            self._kafka = broker
        return self._kafka

    def redis(self) -> Any:
        if self._redis is None:
            from dstream_exactly_once.testing import LocalRedis

            log("starting redis-server (no AOF, as LocalRedis defaults)")
            server = LocalRedis()
            self.stack.callback(server.stop)
            server.start()
            self._redis = server
        return self._redis

    def postgres(self) -> Any:
        if self._postgres is None:
            from dstream_exactly_once.testing import LocalPostgres

            log("starting PostgreSQL (fsync=on)")
            server = LocalPostgres()
            self.stack.callback(server.stop)
            server.start()
            self._postgres = server
        return self._postgres

    def services_running(self) -> List[str]:
        """The services started so far (their idle CPU counts in every process-tree measurement)."""
        return [name for name, svc in (("Kafka", self._kafka), ("Redis", self._redis), ("PostgreSQL", self._postgres))
                if svc is not None]

    def store_url(self, kind: str) -> str:
        """A fresh store location of ``kind`` (sqlite, postgresql, redis)."""
        if kind == "sqlite":
            return f"sqlite:///{self.workdir}/store-{uuid.uuid4().hex[:8]}.db"
        if kind == "postgresql":
            pg = self.postgres()
            return pg.url(pg.create_database())
        if kind == "redis":
            return str(self.redis().url)
        raise ValueError(kind)

    def kafka_params(self) -> Dict[str, Any]:
        """kafkaParams of every B1/B2/B5 reader: the same :data:`READ_SETTINGS` on each side."""
        return {"bootstrap.servers": self.kafka().bootstrap, "auto.offset.reset": "earliest", **READ_SETTINGS}

    def broker_pid(self) -> Optional[int]:
        proc = getattr(getattr(self.kafka(), "_proc", None), "proc", None)
        return None if proc is None else int(proc.pid)

    def meter(self) -> Any:
        """A started :class:`~bench.cpu.CpuMeter` over the benchmark's processes (broker included)."""
        from .cpu import CpuMeter

        return CpuMeter(self.broker_pid()).start()

    # ---------------------------------------------------------------- spark
    def spark(self, master: Optional[str] = None) -> Any:
        """The SparkContext for ``master`` (an existing one with another master is stopped first);
        without ``master`` the running one (or a new local[2])."""
        if self._sc is not None and (master is None or self._master == master):
            return self._sc
        master = master or "local[2]"
        self.stop_spark()
        from dstream_exactly_once.testing import make_spark_context

        log(f"starting a SparkContext {master}")
        self._sc = make_spark_context(master, f"deo-bench-{master}", {"spark.driver.memory": "2g"})
        self._master = master
        return self._sc

    def stop_spark(self) -> None:
        if self._sc is not None:
            self._sc.stop()
            self._sc = None
            self._master = None
            time.sleep(0.5)

    # ---------------------------------------------------------------- the read topic (B1/B2/B5)
    def read_topic(self) -> ReadTopic:
        if self._topic is None:
            from .data import produce_read_topic

            self._topic = produce_read_topic(self.kafka(), self.settings.records)
        return self._topic

    def close(self) -> None:
        try:
            self.stop_spark()
        finally:
            self.stack.close()


def env_flag(name: str) -> bool:
    return os.environ.get(name, "").lower() in ("1", "true", "yes")
