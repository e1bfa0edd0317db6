"""One peer of the keep-up benchmark in its own process: ``python -m bench.keepup_child '<json spec>'``.

Each peer gets a fresh JVM (its own SparkContext / SparkSession, ``local[2]``) and prints one line
``RESULT {json}`` at the end. The spec's ``peer``:

- ``ours``: ``KafkaUtils.createExactlyOnceStream`` over the topic from its latest offsets,
  ``commit_each_batch`` folding each batch to a count and a sum (``Writes().incr``), SQLite store,
  the task planner's defaults. Per batch, from the stream's progress records: the whole batch
  (``triggerExecution``), planning (``latestOffset``), the Spark job (``addBatch``), the commit
  (``commitOffsets``) and the Spark tasks that read it (``numTasks``);
- ``ss``: the same query with this library's ``deo-kafka`` source (no JVM connector; the session still
  loads it, as for ``jvm``);
- ``jvm``: Spark's Structured Streaming Kafka source (``spark-sql-kafka-0-10``) subscribed to the same
  topic from its latest offsets, the same trigger, ``foreachBatch`` computing the same count and sum
  and writing them to SQLite in one transaction; per batch ``triggerExecution`` and ``addBatch`` from
  the query's progress;
- ``files``: ``FileUtils.createExactlyOnceFileStream`` over ``dir/*.log`` from ``earliest`` with the same
  count-and-sum commit (lines and their lengths), SQLite; its first batch (every file's existing lines)
  is reported apart, and the lag at the end is in bytes;
- ``floor``: a plain PySpark job of ``tasks`` tasks (``parallelize(range(tasks), tasks).map().fold()``),
  run back to back: what Spark itself charges for a job of that many tasks, the floor under any batch.

Timing: ``warm_s`` seconds of warm-up counted from the peer's first completed batch (not counted),
then a window of ``window_s`` seconds. A batch counts in the window when it *finished* inside it.
Reported: batches completed in the window, their durations, the records they read, the CPU seconds
of the peer's whole process tree (driver, JVM, Python workers) over the window, the time to the
first completed batch, and the records left behind at the end (the topic's end offsets minus what
the peer had read).
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import tempfile
import threading
import time
from typing import Any, Dict, List, Tuple

from .cpu import CpuMeter
from .jvm_read import session_builder


def _end_offsets(bootstrap: str, topic: str) -> Dict[int, int]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        parts = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        return {tp.partition: int(o) for tp, o in consumer.end_offsets(parts).items()}
    finally:
        consumer.close()


class Window:
    """Per-batch measurements, stamped when each batch finished.

    The warm-up is the same for every peer: ``warm_s`` seconds counted from the peer's first completed
    batch (start-up times differ: a SparkSession resolving packages takes longer than a SparkContext).
    A peer with no batch after ``first_timeout_s`` is measured from then on.
    """

    def __init__(self, warm_s: float, window_s: float, first_timeout_s: float = 300.0) -> None:
        self.t0 = time.monotonic()
        self.warm_s, self.window_s, self.first_timeout_s = warm_s, window_s, first_timeout_s
        self.first_batch_s: float = float("nan")
        self.rows: List[Tuple[float, Dict[str, float]]] = []
        self.lock = threading.Lock()
        self.first = threading.Event()

    def add(self, row: Dict[str, float]) -> None:
        now = time.monotonic()
        with self.lock:
            if not self.first.is_set():
                self.first_batch_s = now - self.t0
                self.first.set()
            self.rows.append((now, row))

    def wait(self, meter: CpuMeter) -> Dict[str, Any]:
        self.first.wait(self.first_timeout_s)
        time.sleep(self.warm_s)
        start = time.monotonic()
        meter.start()
        time.sleep(self.window_s)
        cpu = meter.stop()
        end = time.monotonic()
        with self.lock:
            rows = [r for t, r in self.rows if start <= t < end]
            return {"rows": rows, "first_batch_s": self.first_batch_s, "cpu_s": cpu.ours, "wall_s": cpu.wall,
                    "machine_cpu_s": cpu.machine}


def _while(window: Window, meter: CpuMeter, body: Any) -> Dict[str, Any]:
    """``window.wait(meter)`` while ``body(stop)`` runs in a thread of its own (stopped and joined after)."""
    stop = threading.Event()
    thread = threading.Thread(target=body, args=(stop,), daemon=True)
    thread.start()
    try:
        return window.wait(meter)
    finally:
        stop.set()
        thread.join()


def _progress_row(record: Dict[str, Any]) -> Dict[str, float]:
    """One batch of a stream of this library, from its progress record."""
    d = record["durationMs"]
    return {"batch_ms": d["triggerExecution"], "plan_ms": d["latestOffset"], "job_ms": d["addBatch"],
            "commit_ms": d["commitOffsets"], "tasks": record["sources"][0].get("numTasks", -1),
            "records": record["numInputRows"]}


def _run(ssc: Any, stream: Any, func: Any, window: Window, meter: CpuMeter) -> Dict[str, Any]:
    """Run ``stream`` with ``commit_each_batch(func)`` through the window; its first batch kept apart.
    The StreamingContext is stopped after (not its SparkContext)."""
    first: List[Dict[str, float]] = []

    def on_progress(record: Dict[str, Any]) -> None:
        row = _progress_row(record)
        if not first:
            first.append(row)
        window.add(row)

    stream.commit_each_batch(func)
    stream.add_progress_listener(on_progress)
    ssc.start()
    try:
        out = window.wait(meter)
    finally:
        ssc.stop(stopSparkContext=False, stopGraceFully=False)
    out["first_batch"] = first[0] if first else None
    return out


def _ours(spec: Dict[str, Any], window: Window, meter: CpuMeter) -> Dict[str, Any]:
    from pyspark.streaming import StreamingContext

    from dstream_exactly_once import KafkaUtils, Writes
    from dstream_exactly_once.stores import open_store
    from dstream_exactly_once.testing import make_spark_context

    sc = make_spark_context("local[2]", "deo-bench-keepup", {"spark.driver.memory": "2g", **spec.get("conf", {})})
    ssc = StreamingContext(sc, spec["batch_s"])
    workdir = tempfile.mkdtemp(prefix="deo-keepup-")
    url, app = f"sqlite:///{workdir}/keepup.db", f"keepup-{os.getpid()}"
    params = {"bootstrap.servers": spec["bootstrap"], "auto.offset.reset": spec.get("starting", "latest"),
              **spec["settings"]}
    stream = KafkaUtils.createExactlyOnceStream(ssc, params, [spec["topic"]], store=url, app_id=app,
                                                **spec.get("stream_options", {}))

    def count_and_sum(_batch: Any, rdd: Any) -> Any:
        n, total = rdd.map(lambda r: (1, len(r[1] or ""))).fold((0, 0), lambda a, b: (a[0] + b[0], a[1] + b[1]))
        return Writes().incr("keepup", "count", n).incr("keepup", "sum", total)

    out = _run(ssc, stream, count_and_sum, window, meter)
    with open_store(url, app) as store:
        read = sum(int(v) for v in store.load_offsets().values())  # the next offset to read, per partition
    ends = _end_offsets(spec["bootstrap"], spec["topic"])
    sc.stop()
    out["lag_records"] = sum(ends.values()) - read
    return out


def _files(spec: Dict[str, Any], window: Window, meter: CpuMeter) -> Dict[str, Any]:
    from pyspark.streaming import StreamingContext

    from dstream_exactly_once import FileUtils, Writes
    from dstream_exactly_once.stores import open_store
    from dstream_exactly_once.testing import make_spark_context

    sc = make_spark_context("local[2]", "deo-bench-keepup-files", {"spark.driver.memory": "2g",
                                                                   **spec.get("conf", {})})
    ssc = StreamingContext(sc, spec["batch_s"])
    workdir = tempfile.mkdtemp(prefix="deo-keepup-files-")
    url, app = f"sqlite:///{workdir}/keepup.db", f"keepup-files-{os.getpid()}"
    stream = FileUtils.createExactlyOnceFileStream(ssc, os.path.join(spec["dir"], "*.log"),
                                                   {"starting.offsets": "earliest"}, store=url, app_id=app)

    def count_and_sum(_batch: Any, rdd: Any) -> Any:
        n, total = rdd.map(lambda line: (1, len(line))).fold((0, 0), lambda a, b: (a[0] + b[0], a[1] + b[1]))
        return Writes().incr("keepup", "count", n).incr("keepup", "sum", total)

    out = _run(ssc, stream, count_and_sum, window, meter)
    sc.stop()
    with open_store(url, app) as store:
        read = sum(int(p.offset) for p in store.load_positions().values())
    size = sum(e.stat().st_size for e in os.scandir(spec["dir"]) if e.name.endswith(".log"))
    out["lag_records"] = size - read  # bytes behind, for files
    return out


def _jvm(spec: Dict[str, Any], window: Window, meter: CpuMeter) -> Dict[str, Any]:
    return _structured(spec, window, meter, "kafka")


def _ss(spec: Dict[str, Any], window: Window, meter: CpuMeter) -> Dict[str, Any]:
    return _structured(spec, window, meter, "deo-kafka")


def _structured(spec: Dict[str, Any], window: Window, meter: CpuMeter, source: str) -> Dict[str, Any]:
    """A Structured Streaming query reading ``source`` (Spark's ``kafka`` or this library's ``deo-kafka``,
    the same options) into the same ``foreachBatch`` count and sum."""
    from pyspark.sql import functions as F  # noqa: N812 - PySpark's convention

    builder = session_builder(spec, "local[2]", f"deo-bench-keepup-{spec['peer']}", shuffle_partitions=2)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if source == "deo-kafka":
        from dstream_exactly_once.structured import register

        register(spark)
    workdir = tempfile.mkdtemp(prefix=f"deo-keepup-{spec['peer']}-")
    db = sqlite3.connect(os.path.join(workdir, "keepup.db"), check_same_thread=False)
    db.execute("CREATE TABLE totals (k TEXT PRIMARY KEY, v INTEGER NOT NULL)")
    reader = (spark.readStream.format(source).option("kafka.bootstrap.servers", spec["bootstrap"])
              .option("subscribe", spec["topic"]).option("startingOffsets", "latest"))
    for key, value in spec["settings"].items():
        reader = reader.option(f"kafka.{key}", str(value))

    def count_and_sum(df: Any, _batch_id: int) -> None:
        row = df.agg(F.count(F.lit(1)).alias("n"), F.sum(F.length("value")).alias("s")).collect()[0]
        with db:
            for k, v in (("count", row["n"]), ("sum", row["s"] or 0)):
                db.execute("INSERT INTO totals (k, v) VALUES (?, ?) ON CONFLICT (k) DO UPDATE SET v = v + excluded.v",
                           (k, int(v)))

    query = (reader.load().writeStream.foreachBatch(count_and_sum)
             .option("checkpointLocation", os.path.join(workdir, "checkpoint"))
             .trigger(processingTime=f"{spec['batch_s']} seconds").start())
    seen: set = set()

    def follow(stop: threading.Event) -> None:  # the query's progress records, as they come
        while not stop.is_set():
            for p in query.recentProgress:
                if p["batchId"] not in seen and p.get("numInputRows", 0) >= 0:
                    seen.add(p["batchId"])
                    d = p["durationMs"]
                    window.add({"batch_ms": d.get("triggerExecution", 0), "plan_ms": d.get("latestOffset", 0),
                                "job_ms": d.get("addBatch", 0), "commit_ms": d.get("commitOffsets", 0),
                                "tasks": -1, "records": p["numInputRows"]})
            stop.wait(0.05)

    try:
        out = _while(window, meter, follow)
    finally:
        last = query.lastProgress
        failed = query.exception()
        query.stop()
    if failed is not None:
        spark.stop()
        return {"error": f"the query failed: {str(failed)[:1500]}"}
    read = 0
    if last:
        for source in last["sources"]:
            ends = json.loads(source["endOffset"]) if isinstance(source["endOffset"], str) else source["endOffset"]
            read += sum(int(o) for topic, parts in (ends or {}).items() if not topic.startswith("@")
                        for o in parts.values())
    spark.stop()
    out["lag_records"] = sum(_end_offsets(spec["bootstrap"], spec["topic"]).values()) - read
    return out


def _floor(spec: Dict[str, Any], window: Window, meter: CpuMeter) -> Dict[str, Any]:
    from dstream_exactly_once.testing import make_spark_context

    sc = make_spark_context("local[2]", "deo-bench-keepup-floor", {"spark.driver.memory": "2g"})
    tasks = max(1, int(spec["tasks"]))

    def loop(stop: threading.Event) -> None:
        while not stop.is_set():
            t0 = time.perf_counter()
            sc.parallelize(range(tasks), tasks).map(lambda i: (1, i)).fold((0, 0), lambda a, b: (a[0] + b[0],
                                                                                                  a[1] + b[1]))
            ms = (time.perf_counter() - t0) * 1000
            window.add({"batch_ms": ms, "plan_ms": 0, "job_ms": ms, "commit_ms": 0, "tasks": tasks, "records": 0})

    try:
        out = _while(window, meter, loop)
    finally:
        sc.stop()
    out["lag_records"] = 0
    return out


PEERS = {"ours": _ours, "jvm": _jvm, "ss": _ss, "floor": _floor, "files": _files}


def main() -> int:
    spec = json.loads(sys.argv[1])
    window = Window(float(spec["warm_s"]), float(spec["window_s"]))
    try:
        out = PEERS[spec["peer"]](spec, window, CpuMeter())
    except Exception as exc:  # noqa: BLE001 - reported to the parent as data
        out = {"error": f"{type(exc).__name__}: {str(exc)[:1500]}"}
    print("RESULT " + json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())


__all__: Tuple[str, ...] = ("main",)
