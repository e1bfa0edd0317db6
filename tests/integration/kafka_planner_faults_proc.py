"""Child driver of the Kafka task-planner SIGKILL test (``python -m tests.integration.kafka_planner_faults_proc …``).

``driver BOOTSTRAP TOPIC STORE APP N MODE MARKER [STORE APP …]``: ``createExactlyOnceStream`` over
``TOPIC`` from its earliest offsets with packed tasks (``spark.streaming.kafka.tasks.target.count=3``)
on ``local[1]`` (one task at a time), summing and counting the numbers (one per record) in the store;
one stream per ``STORE APP`` pair, all in one StreamingContext (the replays of several stores share
one driver). Unless ``MARKER`` exists, the driver's whole process group SIGKILLs itself once (creating ``MARKER``
first) at the point ``MODE`` names:

- ``inside``: ``commit_each_partition``, inside a packed task's function, before its commit;
- ``after_commit``: ``commit_each_partition``, in the task after a packed task committed (the store
  already holds part of the batch, the commit log does not);
- ``between_pieces``: ``commit_each_batch`` with split ranges (``spark.streaming.kafka.tasks.split.size``),
  while reading a piece of a range after its first piece was read.

Prints ``STARTED`` once streaming, ``DONE <count> <sum>`` when every store holds ``N`` numbers (exit 0),
``OVERCOUNT …`` (exit 2) if one ever holds more.
"""

from __future__ import annotations

import os
import sys
from typing import Sequence, Tuple

from .planner_faults_proc import _GROUP, sum_numbers


def drive(bootstrap: str, topic: str, targets: Sequence[Tuple[str, str]], n: int, mode: str, marker: str) -> int:
    from pyspark.streaming import StreamingContext

    from dstream_exactly_once import KafkaUtils
    from dstream_exactly_once.testing._spark import make_spark_context

    os.environ[_GROUP] = str(os.getpgid(0))  # inherited by the JVM and its Python workers
    conf = {"spark.streaming.kafka.tasks.target.count": "3"}
    if mode == "between_pieces":
        conf["spark.streaming.kafka.tasks.split.size"] = "300"
    sc = make_spark_context("local[1]", "kafka-planner-faults", conf)
    ssc = StreamingContext(sc, 0.5)
    params = {"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"}
    streams = [(KafkaUtils.createExactlyOnceStream(ssc, params, [topic], store=store, app_id=app,
                                                   poll_timeout_ms=30000), store, app) for store, app in targets]
    return sum_numbers(ssc, streams, n, mode, marker, lambda record: int(record[1]))


if __name__ == "__main__":
    _, *rest = sys.argv[1:]
    more = rest[7:]
    pairs = [(rest[2], rest[3])] + list(zip(more[0::2], more[1::2], strict=True))
    sys.exit(drive(rest[0], rest[1], pairs, int(rest[4]), rest[5], rest[6]))
