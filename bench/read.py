"""B1 read throughput (and the read half of B5).

(a) this project's KafkaRDD: ``KafkaUtils.createRDD(sc, params, ranges).count()`` over one explicit
    range per partition (every record is read, decoded to ``(key, value)`` str and counted);
(b) a bare single-process kafka-python loop over the same ranges: assign + seek + poll until each
    partition's position reaches its end, decoding key/value the same way;
(c) Spark's JVM Kafka source, ``spark.read.format("kafka")...load().count()`` in batch mode, run in
    a subprocess (``bench/jvm_read.py``) so its SparkSession and ``spark.jars.packages`` do not
    clash with this process's SparkContext.

Each case: one untimed warm-up pass over the whole topic (starts Python workers, caches consumers,
warms the JVM's JIT: with reads this fast a cold JVM skews a 4-second run), then the timed
repetitions; the median is reported. The consumer of (b) is created once, before timing,
as the executors' consumers are cached across tasks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional, Sequence

from .common import Context, log, median
from .jvm_connector import Connector, resolve_connector


# ------------------------------------------------------------------------------------------ (a)
def kafkardd_runs(ctx: Context, master: str, repeats: int) -> List[float]:
    from dstream_exactly_once import KafkaUtils

    topic = ctx.read_topic()
    sc = ctx.spark(master)
    params = ctx.kafka_params()
    ranges = topic.ranges()
    KafkaUtils.createRDD(sc, params, ranges).count()  # warm-up pass, untimed
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        n = KafkaUtils.createRDD(sc, params, ranges).count()
        dt = time.perf_counter() - t0
        if n != topic.total:
            raise RuntimeError(f"KafkaRDD counted {n} records, expected {topic.total}")
        log(f"B1(a) {master}: {n:,} records in {dt:.2f}s ({n / dt:,.0f} records/s)")
        runs.append(dt)
    return runs


# ------------------------------------------------------------------------------------------ (b)
def bare_loop_runs(ctx: Context, repeats: int) -> List[float]:
    from kafka import KafkaConsumer, TopicPartition

    from dstream_exactly_once.kafka.params import parse_kafka_params

    topic = ctx.read_topic()
    config = parse_kafka_params(ctx.kafka_params())
    consumer = KafkaConsumer(**config.consumer_kwargs(client_id="deo-bench-bare-loop"))
    try:
        ranges = topic.ranges()
        tps = {TopicPartition(r.topic, r.partition): r for r in ranges}
        consumer.assign(list(tps))
        runs = []
        for i in range(repeats + 1):  # the first pass is the warm-up (connections, metadata)
            limit = None if i else 2000
            dt, n = _bare_pass(consumer, {tp: (r.fromOffset, r.untilOffset if limit is None else
                                                min(r.untilOffset, limit)) for tp, r in tps.items()})
            if i == 0:
                continue
            if n != topic.total:
                raise RuntimeError(f"the bare loop read {n} records, expected {topic.total}")
            log(f"B1(b): {n:,} records in {dt:.2f}s ({n / dt:,.0f} records/s)")
            runs.append(dt)
        return runs
    finally:
        consumer.close(autocommit=False)


def _bare_pass(consumer: Any, bounds: Dict[Any, tuple]) -> tuple:
    t0 = time.perf_counter()
    consumer.resume(*bounds)
    for tp, (start, _until) in bounds.items():
        consumer.seek(tp, start)
    remaining = dict(bounds)
    n = 0
    while remaining:
        batch = consumer.poll(timeout_ms=200, max_records=10000)
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
    return time.perf_counter() - t0, n


# ------------------------------------------------------------------------------------------ (c)
def jvm_runs(ctx: Context, master: str, repeats: int) -> tuple[Optional[List[float]], Connector, str]:
    topic = ctx.read_topic()
    connector = resolve_connector(ctx.workdir)
    if connector.packages is None:
        return None, connector, connector.problem
    log(f"B1(c) Spark JVM Kafka source with {connector.label} in a subprocess ({master})")
    spec = {"bootstrap": ctx.kafka().bootstrap, "topic": topic.name, "ends": topic.per_partition,
            "master": master, "repeats": repeats, "packages": connector.packages,
            "excludes": connector.excludes, "jars": connector.jars, "ivy": connector.ivy_dir,
            "expected": topic.total}
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    proc = subprocess.run([sys.executable, "-m", "bench.jvm_read", json.dumps(spec)], capture_output=True,
                          text=True, env=env, cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          timeout=3600)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-25:])
        return None, connector, f"the JVM read subprocess failed (exit {proc.returncode}):\n{tail}"
    out = json.loads(lines[-1][len("RESULT "):])
    if out.get("error"):
        return None, connector, out["error"]
    for i, dt in enumerate(out["runs"]):
        log(f"B1(c) run {i + 1}/{repeats}: {topic.total:,} records in {dt:.2f}s ({topic.total / dt:,.0f} records/s)")
    return list(out["runs"]), connector, ""


# ------------------------------------------------------------------------------------------ B1
def run_b1(ctx: Context) -> None:
    res, s = ctx.results, ctx.settings
    topic = ctx.read_topic()
    n = topic.total
    res.note("B1", f"topic: {n:,} records x 100 bytes over {topic.partitions} partitions (produced in "
                   f"{topic.produce_seconds:.1f}s); median of {s.b1_repeats} timed run(s) after a warm-up, "
                   f"(a) and (b) interleaved")
    a: List[float] = []
    b: List[float] = []
    for _ in range(s.b1_repeats):  # (a) and (b) interleaved: a slow phase of a shared machine hits both
        a += kafkardd_runs(ctx, "local[2]", 1)
        b += bare_loop_runs(ctx, 1)
    ma = _add(ctx, "B1", "(a) KafkaRDD createRDD().count(), local[2]", n, a, case_id="a", master="local[2]")
    mb = _add(ctx, "B1", "(b) bare kafka-python loop, 1 process", n, b, case_id="b")
    res.check("B1", "(a) / (b): KafkaRDD vs bare kafka-python loop", ma / mb, ">=", 1.5, "x")
    if s.jvm:
        c, connector, problem = jvm_runs(ctx, "local[2]", s.b1_repeats)
        res.note("B1", f"(c) connector: {connector.label}")
        if c is not None:
            mc = _add(ctx, "B1", "(c) Spark JVM source read.format('kafka').count(), local[2]", n, c, case_id="c",
                      connector=connector.label)
            res.check("B1", "(a) / (c): KafkaRDD vs Spark's JVM Kafka source", ma / mc, ">=", 0.5, "x",
                      "" if connector.exact else "connector is not the exact PySpark version (see notes)")
        else:
            res.note("B1", f"(c) not measured: {problem}")
            res.check("B1", "(a) / (c): KafkaRDD vs Spark's JVM Kafka source", None, ">=", 0.5, "x", "not measured")
    else:
        res.check("B1", "(a) / (c): KafkaRDD vs Spark's JVM Kafka source", None, ">=", 0.5, "x", "--no-jvm")


def _add(ctx: Context, bench: str, case: str, n: int, runs: Sequence[float], **extra: Any) -> float:
    dt = median(runs)
    rate = n / dt
    ctx.results.add(bench, case, rate, "records/s",
                    f"{n:,} records, median {dt:.2f}s of {len(runs)} run(s) "
                    f"[{', '.join(f'{x:.2f}' for x in runs)}]", runs=list(runs), records=n, **extra)
    return rate
