"""Driver program for ``test_cluster.py``, run in its own process (one SparkContext per process).

Usage: ``python cluster_job.py MASTER_URL BOOTSTRAP TOPIC PARTITIONS``.

Connects to the standalone master, reads partitions ``0..PARTITIONS-1`` of ``TOPIC`` with
``KafkaUtils.createRDD`` over explicit ranges ``[earliest, latest)`` (asked from the broker),
and prints one JSON line (prefixed ``RESULT ``) with the driver PID, the ranges and, per record,
``[partition, offset, value, pid, executor_jvm_pid, worker_pid]``: the PID of the executor's
Python worker that read the record, of the executor JVM above it and of that JVM's parent (the
standalone worker that launched it), all from ``/proc``.
"""

from __future__ import annotations

import json
import os
import sys


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    return int(stat[stat.rindex(")") + 2:].split()[1])


def executor_jvm(pid: int) -> tuple[int, int]:
    """``(executor JVM pid, its parent pid)`` for a process running under an executor JVM."""
    while pid > 1:
        pid = _parent(pid)
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            if b"CoarseGrainedExecutorBackend" in f.read():
                return pid, _parent(pid)
    return -1, -1


def main(argv: list[str]) -> int:
    master, bootstrap, topic, partitions = argv[0], argv[1], argv[2], int(argv[3])

    from kafka import KafkaAdminClient, TopicPartition
    from kafka.admin import OffsetSpec

    from dstream_exactly_once import KafkaMessageAndMetadata, KafkaUtils, OffsetRange
    from dstream_exactly_once.testing._spark import make_spark_context

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="deo-cluster-job")
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        early = admin.list_partition_offsets({tp: OffsetSpec.EARLIEST for tp in tps})
        late = admin.list_partition_offsets({tp: OffsetSpec.LATEST for tp in tps})
    finally:
        admin.close()
    ranges = [OffsetRange(topic, tp.partition, early[tp].offset, late[tp].offset) for tp in tps]

    sc = make_spark_context(master, "deo-cluster-test", {
        "spark.executor.memory": "512m",
        "spark.executor.cores": "1",
        "spark.cores.max": "2",
        "spark.task.maxFailures": "1",
        "spark.network.timeout": "60s",
        # short-lived JVMs: C1 only and the serial GC start and warm up faster on a small box
        "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
        "spark.executor.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
    })
    try:
        def handler(m: KafkaMessageAndMetadata) -> list:
            return [m.partition, m.offset, m.message]

        def tag(records):  # runs in the executor's Python worker
            pid = os.getpid()
            jvm, jvm_parent = executor_jvm(pid)
            for r in records:
                yield r + [pid, jvm, jvm_parent]

        rdd = KafkaUtils.createRDD(sc, {"bootstrap.servers": bootstrap}, ranges, messageHandler=handler,
                                   poll_timeout_ms=30000)
        rows = rdd.mapPartitions(tag).collect()
        result = {
            "driver_pid": os.getpid(),
            "master": sc.master,
            "ranges": [list(r.toTuple()) for r in rdd.offsetRanges()],
            "records": rows,
        }
    finally:
        sc.stop()
    print("RESULT " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
