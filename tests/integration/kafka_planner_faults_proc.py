"""Child driver of the Kafka task-planner SIGKILL test (``python -m tests.integration.kafka_planner_faults_proc …``).

``driver BOOTSTRAP TOPIC STORE APP N MODE MARKER``: ``createExactlyOnceStream`` over ``TOPIC`` from
its earliest offsets with packed tasks (``spark.streaming.kafka.tasks.target.count=3``) on
``local[1]`` (one task at a time), summing and counting the numbers (one per record) in the store.
Unless ``MARKER`` exists, the driver's whole process group SIGKILLs itself once (creating ``MARKER``
first) at the point ``MODE`` names:

- ``inside``: ``commit_each_partition``, inside a packed task's function, before its commit;
- ``after_commit``: ``commit_each_partition``, in the task after a packed task committed (the store
  already holds part of the batch, the commit log does not);
- ``between_pieces``: ``commit_each_batch`` with split ranges (``spark.streaming.kafka.tasks.split.size``),
  while reading a piece of a range after its first piece was read.

Prints ``STARTED`` once streaming, ``DONE <count> <sum>`` when the store holds ``N`` numbers (exit 0),
``OVERCOUNT …`` (exit 2) if it ever holds more.
"""

from __future__ import annotations

import os
import sys
import time

from .planner_faults_proc import _GROUP, _die_once


def drive(bootstrap: str, topic: str, store: str, app: str, n: int, mode: str, marker: str) -> int:
    from pyspark.streaming import StreamingContext

    from dstream_exactly_once import KafkaUtils, Writes, open_store
    from dstream_exactly_once.streaming.task_context import current_pieces
    from dstream_exactly_once.testing.spark import make_spark_context

    os.environ[_GROUP] = str(os.getpgid(0))  # inherited by the JVM and its Python workers
    conf = {"spark.streaming.kafka.tasks.target.count": "3"}
    if mode == "between_pieces":
        conf["spark.streaming.kafka.tasks.split.size"] = "300"
    sc = make_spark_context("local[1]", "kafka-planner-faults", conf)
    ssc = StreamingContext(sc, 0.5)
    params = {"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"}
    stream = KafkaUtils.createExactlyOnceStream(ssc, params, [topic], store=store, app_id=app, poll_timeout_ms=30000)

    if mode == "between_pieces":
        def number(record: tuple) -> tuple:
            if any(p.start > p.range.start for p in current_pieces()):
                _die_once(marker)
            return int(record[1]), 1

        def per_batch(batch, rdd):  # type: ignore[no-untyped-def]
            total, count = rdd.map(number).fold((0, 0), lambda a, b: (a[0] + b[0], a[1] + b[1]))
            return Writes().incr("numbers", "sum", total).incr("numbers", "count", count)

        stream.commit_each_batch(per_batch)
    else:
        def per_task(records, ranges, batch):  # type: ignore[no-untyped-def]
            numbers = [int(v) for _k, v in records]
            if mode == "inside" and len(ranges) > 1:  # a task holding several ranges
                _die_once(marker)
            if mode == "after_commit":
                with open_store(store, app) as s:
                    if s.get_values("numbers").get("count", 0) > 0:
                        _die_once(marker)
            return Writes().incr("numbers", "sum", sum(numbers)).incr("numbers", "count", len(numbers))

        stream.commit_each_partition(per_task, pack=True)
    ssc.start()
    print("STARTED", flush=True)
    with open_store(store, app) as reader:
        while True:
            values = reader.get_values("numbers")
            count = values.get("count", 0)
            if count > n:
                print(f"OVERCOUNT {count} {values.get('sum')}", flush=True)
                return 2
            if count == n:
                print(f"DONE {count} {values.get('sum')}", flush=True)
                ssc.stop(stopSparkContext=True, stopGraceFully=False)
                return 0
            time.sleep(0.2)


if __name__ == "__main__":
    _, *rest = sys.argv[1:]
    sys.exit(drive(rest[0], rest[1], rest[2], rest[3], int(rest[4]), rest[5], rest[6]))
