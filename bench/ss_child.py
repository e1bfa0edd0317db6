"""One Spark session serving the Structured Streaming benchmarks (B10, B11): ``python -m bench.ss_child '<spec>'``.

The spec's ``mode`` is ``classic`` (a SparkSession of this process: its own JVM) or ``connect`` (a local
Spark Connect server, :class:`~dstream_exactly_once.testing.LocalSparkConnect`, started by this process,
and a Connect session on it). Both get the same settings (:data:`SESSION_CONF`, ``master``) and Spark's
Kafka source jars (:func:`~dstream_exactly_once.testing._spark_kafka.spark_kafka_jars`, the same jars in
both modes), and this library's formats are registered once. The process prints ``READY {…}`` (or
``RESULT {"error": …}``), then answers one request per stdin line with one ``RESULT {…}`` line; EOF ends it.

Requests (every query gets a fresh checkpoint, and each peer of a benchmark the same session):

- ``{"op": "read", "peer": "jvm" | "deo" | "deo-ck", "topic": …, "total": n}`` (B10): a streaming query
  with ``Trigger.AvailableNow`` over the whole topic from ``earliest`` with ``includeHeaders``, every
  column consumed (:data:`COLUMNS`, folded by :func:`fold_to`'s aggregate in ``foreachBatch``). ``jvm``:
  Spark's ``format("kafka")``; ``deo``: this library's ``format("deo-kafka")`` (kafka-python reader);
  ``deo-ck``: the same with ``reader=confluent-kafka``. The same ``kafka.*`` consumer settings on each;
  the JVM source also gets a fixed ``kafka.group.id`` so its executors' consumer pool (keyed by group id
  and partition) is reused from query to query, as in B1.
- ``{"op": "first", "peer": "sink" | "plain", "sink": "store" | "kafka" | "doris" | "delta", …}`` (B11):
  a ``deo-kafka`` query (default trigger) from ``earliest`` into the sink, or into a ``foreachBatch``
  writer of the same rows to the same kind of target without exactly-once (:mod:`bench.ss_first`);
  timed from the call of ``start()`` to the first appearance of batch 0 in the query's progress
  (Spark reports a batch's progress after its sink committed and its commit-log entry is written).

CPU: user + sys of this process's whole tree (the driver, its JVM or the Connect server's JVM, the
Python workers) and of the Kafka broker (``broker_pid``), reported apart (:mod:`bench.cpu`).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
import uuid
from typing import Any, Callable, Dict, List, Optional, Tuple

from .cpu import CpuMeter

#: the same Spark settings for the classic session and the Connect server
SESSION_CONF: Dict[str, str] = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.driver.memory": "2g",
    "spark.python.worker.reuse": "true",
}
#: every column of Spark's Kafka source schema (with headers), decoded to strings where binary
COLUMNS: Tuple[str, ...] = ("CAST(key AS STRING) AS k", "CAST(value AS STRING) AS v", "topic", "partition",
                            "offset", "CAST(timestamp AS STRING) AS ts", "timestampType",
                            "CAST(headers AS STRING) AS h")
JVM_GROUP = "deo-bench-ss-jvm-source"
DORIS_PASSWORD = "bench-pw"
FIRST_TIMEOUT_S = 300.0


# ------------------------------------------------------------------------------------------ session
def open_session(spec: Dict[str, Any], stack: List[Any]) -> Any:
    """The session of ``spec['mode']``; things to stop at the end go to ``stack`` (last first)."""
    from dstream_exactly_once.structured import register
    from dstream_exactly_once.testing._spark import spark_env
    from dstream_exactly_once.testing._spark_kafka import spark_kafka_jars

    os.environ.update(spark_env())
    master = spec.get("master", "local[2]")
    conf = {**SESSION_CONF, "spark.default.parallelism": str(_cores(master))}
    if spec["mode"] == "connect":
        from dstream_exactly_once.testing import LocalSparkConnect

        server = LocalSparkConnect(master=master, kafka=True, conf=conf)
        stack.append(server.stop)
        server.start(timeout=300)
        spark = server.session()
    else:
        from pyspark.sql import SparkSession

        builder = (SparkSession.builder.master(master).appName("deo-bench-ss")
                   .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
                   .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
                   .config("spark.jars", spark_kafka_jars())
                   .config("spark.executorEnv.PYTHONPATH", os.pathsep.join(p for p in sys.path if p)))
        for key, value in conf.items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
    stack.append(spark.stop)
    register(spark)
    return spark


def _cores(master: str) -> int:
    inside = master[master.find("[") + 1:master.find("]")] if "[" in master else "1"
    return (os.cpu_count() or 2) if inside == "*" else int(inside)


# ------------------------------------------------------------------------------------------ B10 read
def reader(spark: Any, spec: Dict[str, Any], fmt: str, topic: str, headers: bool, **extra: str) -> Any:
    """``readStream`` of ``fmt`` over ``topic`` from ``earliest`` with the spec's ``kafka.*`` settings."""
    r = (spark.readStream.format(fmt).option("kafka.bootstrap.servers", spec["bootstrap"])
         .option("subscribe", topic).option("startingOffsets", "earliest").option("failOnDataLoss", "true")
         .option("includeHeaders", "true" if headers else "false"))
    for key, value in {**{f"kafka.{k}": v for k, v in spec["settings"].items()}, **extra}.items():
        r = r.option(key, str(value))
    return r.load()


def fold_to(path: str) -> Callable[[Any, int], None]:
    """The ``foreachBatch`` function of B10: one aggregate consuming every column of :data:`COLUMNS`,
    its row appended to ``path`` as JSON (it runs on the Connect server's side under Connect)."""

    def fold(df: Any, _batch_id: int) -> None:
        from pyspark.sql import functions as F  # noqa: N812 - PySpark's convention

        row = df.agg(F.count(F.lit(1)).alias("n"), F.sum(F.length("k")).alias("key_chars"),
                     F.sum(F.length("v")).alias("value_chars"), F.sum(F.length("topic")).alias("topic_chars"),
                     F.sum("partition").alias("partition_sum"), F.sum("offset").alias("offset_sum"),
                     F.sum(F.length("ts")).alias("timestamp_chars"), F.sum("timestampType").alias("type_sum"),
                     F.sum(F.length("h")).alias("header_chars")).collect()[0]
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({k: (0 if v is None else int(v)) for k, v in row.asDict().items()}) + "\n")

    return fold


def run_read(spark: Any, spec: Dict[str, Any], req: Dict[str, Any]) -> Dict[str, Any]:
    peer = req["peer"]
    extra: Dict[str, str] = {}
    if peer == "jvm":
        fmt, extra["kafka.group.id"] = "kafka", JVM_GROUP
    elif peer in ("deo", "deo-ck"):
        fmt = "deo-kafka"
        if peer == "deo-ck":
            extra["reader"] = "confluent-kafka"
    else:
        raise ValueError(f"unknown read peer {peer!r}; allowed: 'jvm', 'deo', 'deo-ck'")
    work = tempfile.mkdtemp(prefix=f"deo-ss-read-{peer}-", dir=spec["workdir"])
    out = os.path.join(work, "fold.jsonl")
    df = reader(spark, spec, fmt, req["topic"], headers=True, **extra).selectExpr(*COLUMNS)
    writer = (df.writeStream.foreachBatch(fold_to(out)).option("checkpointLocation", os.path.join(work, "cp"))
              .trigger(availableNow=True))
    meter = CpuMeter(spec.get("broker_pid")).start()
    query = writer.start()
    query.awaitTermination()
    sample = meter.stop()
    failed = query.exception()
    if failed is not None:
        return {"error": f"the query failed: {str(failed)[:1500]}"}
    sums: Dict[str, int] = {}
    if os.path.exists(out):
        with open(out, encoding="utf-8") as f:
            for line in f:
                for k, v in json.loads(line).items():
                    sums[k] = sums.get(k, 0) + v
    try:
        batches = len(query.recentProgress)
    except Exception:  # noqa: BLE001 - a count for the table only
        batches = -1
    return {"records": sums.get("n", 0), "sums": sums, "batches": batches, **_cpu(sample)}


def _cpu(sample: Any) -> Dict[str, float]:
    return {"wall": sample.wall, "cpu": sample.ours - sample.broker, "broker_cpu": sample.broker,
            "machine_cpu": sample.machine, "others_cpu": sample.others}


# ------------------------------------------------------------------------------------------ B11 first batch
def _batch_id(progress: Any) -> Optional[int]:
    try:
        return int(progress["batchId"])
    except Exception:  # noqa: BLE001 - a progress object without item access
        return int(progress.batchId)


def _durations(progress: Any) -> Dict[str, float]:
    try:
        d = progress["durationMs"]
    except Exception:  # noqa: BLE001 - a progress object without item access
        d = progress.durationMs
    return {str(k): float(v) for k, v in dict(d).items()}


class Targets:
    """The outputs of B11 (fresh for every query) and the Doris protocol double (one per process)."""

    def __init__(self, spec: Dict[str, Any]) -> None:
        self.spec = spec
        self._doris: Any = None
        self._admin: Any = None

    def doris(self) -> Any:
        if self._doris is None:
            from dstream_exactly_once.testing._doris_double import DorisProtocolDouble

            self._doris = DorisProtocolDouble(password=DORIS_PASSWORD).start()
        return self._doris

    def new_topic(self, name: str, partitions: int) -> str:
        from kafka.admin import KafkaAdminClient, NewTopic

        if self._admin is None:
            self._admin = KafkaAdminClient(bootstrap_servers=self.spec["bootstrap"], client_id="deo-bench-ss")
        self._admin.create_topics([NewTopic(name, partitions, 1)])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if len(_end_offsets(self.spec["bootstrap"], name)) == partitions:
                return name
            time.sleep(0.1)
        raise RuntimeError(f"topic {name!r} has no leaders after 60 s")

    def close(self) -> None:
        if self._doris is not None:
            self._doris.stop()
        if self._admin is not None:
            self._admin.close()


def _end_offsets(bootstrap: str, topic: str) -> Dict[int, int]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        parts = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        return {tp.partition: int(o) for tp, o in consumer.end_offsets(parts).items()} if parts else {}
    finally:
        consumer.close()


def run_first(spark: Any, spec: Dict[str, Any], req: Dict[str, Any], targets: Targets) -> Dict[str, Any]:
    from .ss_first import prepare

    work = tempfile.mkdtemp(prefix=f"deo-ss-first-{req['sink']}-{req['peer']}-", dir=spec["workdir"])
    records = reader(spark, spec, "deo-kafka", req["topic"], headers=False)
    writer, verify = prepare(spark, spec, req, records, work, targets)
    writer = writer.option("checkpointLocation", os.path.join(work, "cp"))
    meter = CpuMeter(spec.get("broker_pid")).start()
    t0 = time.perf_counter()
    query = writer.start()
    first: Any = None
    try:
        while first is None:
            first = next((p for p in query.recentProgress if _batch_id(p) == 0), None)
            if first is not None:
                break
            if not query.isActive:
                return {"error": f"the query ended before its first batch: {str(query.exception())[:1500]}"}
            if time.perf_counter() - t0 > FIRST_TIMEOUT_S:
                return {"error": f"no committed batch {FIRST_TIMEOUT_S:.0f} s after start()"}
            time.sleep(0.02)
        seconds = time.perf_counter() - t0
        sample = meter.stop()
    finally:
        query.stop()
    durations = _durations(first)
    out = {"first_s": seconds, "trigger_ms": durations.get("triggerExecution", float("nan")),
           "add_batch_ms": durations.get("addBatch", float("nan")), "rows_in": int(_get(first, "numInputRows") or 0),
           **_cpu(sample)}
    out["check"] = verify()
    return out


def _get(progress: Any, key: str) -> Any:
    """``key`` of a progress record: the attribute first (a Spark Connect progress object computes some
    fields, such as ``numInputRows``, that its item access returns as None), then item access."""
    value = getattr(progress, key, None)
    if value is None:
        try:
            value = progress[key]
        except Exception:  # noqa: BLE001 - neither form has it
            value = None
    return value


# ------------------------------------------------------------------------------------------ main
def main() -> int:
    spec = json.loads(sys.argv[1])
    stack: List[Any] = []
    targets = Targets(spec)
    try:
        spark = open_session(spec, stack)
    except Exception as exc:  # noqa: BLE001 - reported to the parent as data
        print("RESULT " + json.dumps({"error": f"cannot start the {spec['mode']} session: "
                                      f"{type(exc).__name__}: {str(exc)[:1500]}"}), flush=True)
        _unwind(stack)
        return 0
    print("READY " + json.dumps({"version": spark.version, "mode": spec["mode"]}), flush=True)
    try:
        for line in sys.stdin:
            if not line.strip():
                continue
            req = json.loads(line)
            try:
                if req["op"] == "read":
                    out = run_read(spark, spec, req)
                elif req["op"] == "first":
                    out = run_first(spark, spec, req, targets)
                else:
                    out = {"error": f"unknown op {req['op']!r}; allowed: 'read', 'first'"}
            except Exception as exc:  # noqa: BLE001 - reported to the parent as data
                out = {"error": f"{type(exc).__name__}: {str(exc)[:1500]}"}
            print("RESULT " + json.dumps(out), flush=True)
    finally:
        targets.close()
        _unwind(stack)
    return 0


def _unwind(stack: List[Any]) -> None:
    for stop in reversed(stack):
        try:
            stop()
        except Exception:  # noqa: BLE001,S110 - best effort at exit
            pass


def new_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


__all__ = ["COLUMNS", "SESSION_CONF", "fold_to", "main", "new_name"]

if __name__ == "__main__":
    sys.exit(main())
