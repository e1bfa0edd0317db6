"""B1 read throughput per core (and the read half of B5), every peer in the same rounds.

Cases, all over the same ranges (one per partition of the read topic) with the same consumer
settings (:data:`bench.common.READ_SETTINGS`, printed in the report):

(a)  this project's KafkaRDD at ``local[1]``: ``KafkaUtils.createRDD(sc, params, ranges).count()``,
     every record decoded to a ``(key, value)`` str pair;
(a′) the same with a ``messageHandler`` returning ``(offset, timestamp, key, value)`` — how a
     Spark 2.4 app gets metadata; the parity case of (c′);
(a-ck), (a′-ck) the same two with the optional confluent-kafka (librdkafka) executor reader
     (``spark.streaming.kafka.reader=confluent-kafka``, same kafkaParams, same fetch sizes); left
     out, with a note, when confluent-kafka is not installed;
(b)  a bare single-process kafka-python loop: assign + seek + poll until each partition's
     position reaches its end, decoding key/value like (a) (its ``ConsumerRecord`` already
     carries offset, timestamp and headers);
(c)  Spark's JVM Kafka source at ``local[1]``, ``load().count()``;
(c′) the same selecting ``offset``, ``timestamp`` and ``key``/``value`` cast to strings, consumed
     by an aggregate.

(c)/(c′) run in ONE persistent subprocess (``bench/jvm_read.py``) triggered per round with a
fixed consumer group id, so its consumer pool is filled once, like (a)'s consumer cache.

Each case gets one untimed warm-up pass over the whole topic, then ``b1_repeats`` rounds run
every case once, in an order rotated by one each round (a slow phase of a shared machine hits
every case alike). Each timed pass records wall time and CPU time (user + sys of every process
of the benchmark, broker included, :mod:`bench.cpu`) and the CPU other processes of the machine
took meanwhile; medians and spread are reported, and the per-core ratios are computed both on
records per wall-second at ``local[1]`` and on records per CPU-second.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from .common import POLL_RECORDS, READ_SETTINGS, Context, log, median, percentile, spread
from .cpu import CpuSample
from .jvm_connector import Connector, resolve_connector

CASES: Dict[str, str] = {
    "a": "(a) KafkaRDD createRDD().count(), local[1]",
    "a'": "(a') KafkaRDD + messageHandler (offset, timestamp, key, value), local[1]",
    "a-ck": "(a-ck) KafkaRDD createRDD().count(), confluent-kafka reader, local[1]",
    "a'-ck": "(a'-ck) KafkaRDD + messageHandler, confluent-kafka reader, local[1]",
    "b": "(b) bare kafka-python loop, 1 process",
    "c": "(c) Spark JVM source load().count(), local[1]",
    "c'": "(c') Spark JVM source, offset + timestamp + key/value as strings, local[1]",
}
MASTER = "local[1]"


def metadata_handler(m: Any) -> Tuple[int, int, Any, Any]:
    """(a′)'s messageHandler: the columns (c′) selects."""
    return (m.offset, m.timestamp, m.key, m.message)


# ------------------------------------------------------------------------------------------ (a), (a')
def kafkardd_pass(ctx: Context, master: str, handler: bool = False, reader: str = "kafka-python") -> int:
    """One ``createRDD(...).count()``; ``reader`` is set as ``spark.streaming.kafka.reader`` on the running
    context's conf for this call only (the driver reads it when the RDD is made)."""
    from dstream_exactly_once import KafkaUtils
    from dstream_exactly_once.kafka._reader_choice import READER_KEY

    topic = ctx.read_topic()
    sc = ctx.spark(master)
    kw: Dict[str, Any] = {"messageHandler": metadata_handler} if handler else {}
    sc._conf.set(READER_KEY, reader)
    try:
        rdd = KafkaUtils.createRDD(sc, ctx.kafka_params(), topic.ranges(), **kw)
    finally:
        sc._conf._jconf.remove(READER_KEY)
    return int(rdd.count())


def confluent_problem() -> str:
    """Why the confluent-kafka cases cannot run here ('' when they can)."""
    try:
        import confluent_kafka
    except ImportError as exc:
        return f"confluent-kafka is not installed ({exc}); pip install dstream-exactly-once[confluent]"
    return "" if confluent_kafka else "confluent-kafka did not import"


def timed_pass(ctx: Context, fn: Callable[[], int], label: str) -> CpuSample:
    """One timed pass of ``fn`` (which returns the record count) with CPU time; checks the count."""
    total = ctx.read_topic().total
    meter = ctx.meter()
    n = fn()
    sample = meter.stop()
    if n != total:
        raise RuntimeError(f"{label} counted {n:,} records, expected {total:,}")
    log(f"B1 {label}: {n:,} records in {sample.wall:.2f}s ({n / sample.wall:,.0f} records/s), CPU {sample.ours:.2f}s "
        f"({n / max(sample.ours, 1e-9):,.0f} records/CPU-s), other processes {sample.others_cores:.2f} cores")
    return sample


# ------------------------------------------------------------------------------------------ (b)
class BareLoop:
    """One assign-only kafka-python consumer, created once (as executors cache theirs)."""

    def __init__(self, ctx: Context) -> None:
        from kafka import KafkaConsumer, TopicPartition

        from dstream_exactly_once.kafka._params import parse_kafka_params

        config = parse_kafka_params(ctx.kafka_params())
        self.consumer = KafkaConsumer(**config.consumer_kwargs(client_id="deo-bench-bare-loop"))
        self.bounds = {TopicPartition(r.topic, r.partition): (r.fromOffset, r.untilOffset)
                       for r in ctx.read_topic().ranges()}
        self.consumer.assign(list(self.bounds))

    def run(self) -> int:
        consumer, bounds = self.consumer, self.bounds
        consumer.resume(*bounds)
        for tp, (start, _until) in bounds.items():
            consumer.seek(tp, start)
        remaining = dict(bounds)
        n = 0
        while remaining:
            batch = consumer.poll(timeout_ms=200, max_records=POLL_RECORDS)
            for tp, records in batch.items():
                until = bounds[tp][1]
                for rec in records:
                    if rec.offset < until:
                        _kv = (None if rec.key is None else rec.key.decode("utf-8"), rec.value.decode("utf-8"))
                        n += 1
            for tp in list(remaining):
                if consumer.position(tp) >= remaining[tp][1]:
                    consumer.pause(tp)
                    del remaining[tp]
        return n

    def close(self) -> None:
        self.consumer.close(autocommit=False)


# ------------------------------------------------------------------------------------------ (c), (c')
class JvmSource:
    """The persistent ``bench.jvm_read`` subprocess; :meth:`request` runs one query in it."""

    def __init__(self, ctx: Context, master: str) -> None:
        self.connector: Connector = resolve_connector(ctx.workdir)
        self.proc: Optional[subprocess.Popen[str]] = None
        self.problem = self.connector.problem
        self.version = ""
        if self.connector.packages is None:
            return
        topic = ctx.read_topic()
        spec = {"bootstrap": ctx.kafka().bootstrap, "topic": topic.name, "ends": topic.per_partition,
                "master": master, "packages": self.connector.packages, "excludes": self.connector.excludes,
                "jars": self.connector.jars, "ivy": self.connector.ivy_dir, "settings": READ_SETTINGS}
        env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
        self.stderr_path = os.path.join(ctx.workdir, "jvm_read.stderr")
        log(f"B1(c) starting Spark's JVM Kafka source ({self.connector.label}) in one persistent subprocess ({master})")
        with open(self.stderr_path, "w") as err:
            self.proc = subprocess.Popen([sys.executable, "-m", "bench.jvm_read", json.dumps(spec)], text=True,
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env=env,
                                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        first = self._line(("READY ", "RESULT "))
        if first is None or first.startswith("RESULT "):
            self.problem = (json.loads(first[7:]).get("error") if first else None) or self._tail()
            self.close()
        else:
            self.version = json.loads(first[6:]).get("version", "")

    @property
    def ok(self) -> bool:
        return self.proc is not None

    def _line(self, prefixes: Tuple[str, ...]) -> Optional[str]:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith(prefixes):
                return line.rstrip("\n")
        return None

    def _tail(self) -> str:
        try:
            with open(self.stderr_path) as f:
                return "the JVM read subprocess failed:\n" + "\n".join(f.read().splitlines()[-25:])
        except OSError:
            return "the JVM read subprocess failed"

    def request(self, op: str) -> int:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"op": op}) + "\n")
        self.proc.stdin.flush()
        line = self._line(("RESULT ",))
        if line is None:
            raise RuntimeError(self._tail())
        out = json.loads(line[7:])
        if "error" in out:
            raise RuntimeError(f"the JVM source failed: {out['error']}")
        return int(out["records"])

    def close(self) -> None:
        if self.proc is not None:
            try:
                if self.proc.stdin is not None:
                    self.proc.stdin.close()
                self.proc.wait(60)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
            self.proc = None


# ------------------------------------------------------------------------------------------ B1
def run_b1(ctx: Context) -> None:
    res, s = ctx.results, ctx.settings
    topic = ctx.read_topic()
    n = topic.total
    ctx.spark(MASTER)
    bare = BareLoop(ctx)
    jvm = JvmSource(ctx, MASTER) if s.jvm else None
    try:
        runners: Dict[str, Callable[[], int]] = {
            "a": lambda: kafkardd_pass(ctx, MASTER),
            "a'": lambda: kafkardd_pass(ctx, MASTER, handler=True),
        }
        ck_problem = confluent_problem()
        if not ck_problem:
            runners["a-ck"] = lambda: kafkardd_pass(ctx, MASTER, reader="confluent-kafka")
            runners["a'-ck"] = lambda: kafkardd_pass(ctx, MASTER, handler=True, reader="confluent-kafka")
        runners["b"] = bare.run
        if jvm is not None and jvm.ok:
            runners["c"] = lambda: jvm.request("count")
            runners["c'"] = lambda: jvm.request("columns")
        order = list(runners)
        for case in order:  # equal warm-ups: one untimed pass over the whole topic per case
            log(f"B1 warm-up {case}")
            if runners[case]() != n:
                raise RuntimeError(f"B1 warm-up of {case} read a wrong record count")
        idle = ctx.meter()  # what the benchmark's processes burn doing nothing (idle JVMs, broker, services)
        time.sleep(3.0)
        idle_sample = idle.stop()
        res.note("B1", f"idle CPU of the benchmark's processes with every peer up and nothing read: "
                       f"{idle_sample.cores_used:.3f} cores (included in every pass's CPU; other processes of the "
                       f"machine meanwhile {idle_sample.others_cores:.2f} cores)")
        samples: Dict[str, List[CpuSample]] = {c: [] for c in order}
        for rnd in range(s.b1_repeats):
            rotated = order[rnd % len(order):] + order[:rnd % len(order)]
            log(f"B1 round {rnd + 1}/{s.b1_repeats}: {', '.join(rotated)}")
            for case in rotated:
                samples[case].append(timed_pass(ctx, runners[case], CASES[case]))
    finally:
        bare.close()
        if jvm is not None:
            jvm.close()
    res.note("B1", f"topic: {n:,} records x 100 bytes over {topic.partitions} partitions (produced in "
                   f"{topic.produce_seconds:.1f}s); {s.b1_repeats} rounds, every case once per round in an order "
                   f"rotated each round, after one untimed warm-up pass per case")
    res.note("B1", "consumer settings on every side: " + ", ".join(f"{k}={v}" for k, v in READ_SETTINGS.items())
             + f" (receive.buffer.bytes -1 = OS default; the Python readers poll max_records={POLL_RECORDS}; "
               "the JVM source gets them as kafka.* options and kafka.group.id fixed, so its consumer pool is reused)")
    res.note("B1", "CPU = user+sys of every benchmark process (this driver, Spark JVM(s) and Python workers, the "
                   "B1(c) JVM subprocess, the Kafka broker, idle Redis/Spark included); 'others' = CPU of the rest "
                   "of the machine meanwhile (other users)")
    if jvm is not None:
        res.note("B1", f"(c) connector: {jvm.connector.label}"
                 + (f"; not measured: {jvm.problem}" if not jvm.ok and jvm.problem else ""))
    rates = {c: _add(ctx, c, n, samples[c]) for c in samples}
    _ratio(ctx, "(a) / (b): KafkaRDD vs bare kafka-python loop", samples, "a", "b", 3.0)
    _ratio(ctx, "(a') / (b): KafkaRDD with metadata handler vs bare kafka-python loop", samples, "a'", "b", 2.0)
    if "a-ck" in samples:
        _ratio(ctx, "(a-ck) / (a): confluent-kafka reader vs kafka-python reader, count", samples, "a-ck", "a", 1.0)
        _ratio(ctx, "(a'-ck) / (a'): confluent-kafka reader vs kafka-python reader, metadata handler", samples,
               "a'-ck", "a'", 1.0)
    else:
        res.note("B1", f"(a-ck)/(a'-ck) confluent-kafka reader not measured: {ck_problem}")
    if "c'" in rates:
        _ratio(ctx, "(a') / (c'): KafkaRDD vs Spark's JVM source, same columns", samples, "a'", "c'", 1.0,
               "" if jvm is None or jvm.connector.exact else "connector is not the exact PySpark version")
        ra, rc = rates["a"], rates["c"]
        ca, cc = (median([n / x.ours for x in samples[c]]) for c in ("a", "c"))
        res.note("B1", f"(a) / (c), count only (no target; (c) builds 7 columns, (a) decodes key/value): "
                       f"{ra / rc:.2f}x per wall-second, {ca / cc:.2f}x per CPU-second")
    else:
        why = "--no-jvm" if jvm is None else "not measured"
        res.check("B1", "(a') / (c'): KafkaRDD vs Spark's JVM source, same columns", None, ">=", 1.0, "x", why)


def _add(ctx: Context, case: str, n: int, samples: List[CpuSample]) -> float:
    wall = [n / x.wall for x in samples]
    cpu = [n / max(x.ours, 1e-9) for x in samples]
    rate = median(wall)
    ctx.results.add("B1", CASES[case], rate, "records/s",
                    f"{n:,} records; records/s {spread(wall)}; records per CPU-second {spread(cpu)}; "
                    f"CPU {median([x.ours for x in samples]):.2f}s (broker {median([x.broker for x in samples]):.2f}s) "
                    f"per pass, {median([x.cores_used for x in samples]):.2f} cores busy; other processes "
                    f"{median([x.others_cores for x in samples]):.2f} cores",
                    case_id=case, records=n, rates=wall, cpu_rates=cpu, samples=[x.as_dict() for x in samples],
                    cpu_rate=median(cpu))
    return rate


def _ratio(ctx: Context, what: str, samples: Dict[str, List[CpuSample]], num: str, den: str, target: float,
           note: str = "") -> None:
    n = ctx.read_topic().total
    wall = {c: [n / x.wall for x in samples[c]] for c in (num, den)}
    cpu = {c: [n / max(x.ours, 1e-9) for x in samples[c]] for c in (num, den)}
    paired = [a / b for a, b in zip(wall[num], wall[den], strict=True)]
    paired_cpu = [a / b for a, b in zip(cpu[num], cpu[den], strict=True)]
    r_wall = median(wall[num]) / median(wall[den])
    r_cpu = median(cpu[num]) / median(cpu[den])
    rng = (f"per-round ratios {min(paired):.2f}–{max(paired):.2f} (IQR {percentile(paired, 25):.2f}–"
           f"{percentile(paired, 75):.2f})")
    ctx.results.check("B1", what + ", records per wall-second", r_wall, ">=", target, "x",
                      "; ".join(x for x in (rng, note) if x))
    ctx.results.check("B1", what + ", records per CPU-second", r_cpu, ">=", target, "x",
                      "; ".join(x for x in (f"per-round ratios {min(paired_cpu):.2f}–{max(paired_cpu):.2f}", note)
                                if x))
