"""Driver program for ``test_cluster_exactly_once.py``: the exactly-once stream on a standalone
cluster with both output patterns, in its own process (one SparkContext per process).

Usage: ``python cluster_eo_job.py MASTER_URL BOOTSTRAP TOPIC STORE_URL APP_PREFIX CONTROL_DIR``.

Two applications in one driver over ``TOPIC``: ``APP_PREFIX-batch`` (``commit_each_batch``) and
``APP_PREFIX-partition`` (``commit_each_partition``), both writing the demo pipeline's results
(``dstream_exactly_once.teaching._pipeline.to_writes``, checked by ``demo.verify``). It runs until it is killed.

Fault hooks for the test: while ``CONTROL_DIR/hold`` exists, every task that starts reading a
partition writes ``CONTROL_DIR/inside-<executor JVM pid>`` and waits (up to 30 s) until the file is
gone — so the test can SIGKILL an executor JVM while it is provably in the middle of a batch.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any, Iterable, Iterator, List


def _executor_jvm() -> int:
    pid = os.getpid()
    while pid > 1:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        pid = int(stat[stat.rindex(")") + 2:].split()[1])
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            if b"CoarseGrainedExecutorBackend" in f.read():
                return pid
    return -1


def held(control: str, records: Iterable[Any]) -> Iterator[Any]:
    """``records``, after waiting while ``control/hold`` exists (announcing this executor JVM)."""
    hold = os.path.join(control, "hold")
    if os.path.exists(hold):
        marker = os.path.join(control, f"inside-{_executor_jvm()}")
        with open(marker, "w") as f:
            f.write(str(os.getpid()))
        deadline = time.monotonic() + 30
        while os.path.exists(hold) and time.monotonic() < deadline:
            time.sleep(0.05)
    yield from records


def main(argv: List[str]) -> int:
    master, bootstrap, topic, store, prefix, control = argv
    from pyspark.streaming import StreamingContext

    from dstream_exactly_once import KafkaUtils
    from dstream_exactly_once.teaching._pipeline import summarize, to_writes
    from dstream_exactly_once.testing._spark import make_spark_context

    sc = make_spark_context(master, f"deo-cluster-eo-{prefix}", {
        "spark.executor.memory": "512m",
        "spark.executor.cores": "1",
        "spark.cores.max": "2",
        "spark.streaming.kafka.maxRatePerPartition": "40",
        "spark.network.timeout": "60s",
        "spark.executor.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
    })
    ssc = StreamingContext(sc, 1)
    params = {"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"}

    batch_stream = KafkaUtils.createExactlyOnceStream(ssc, params, [topic], store=store, app_id=f"{prefix}-batch",
                                                      poll_timeout_ms=30000)

    def per_batch(batch: Any, rdd: Any) -> Any:
        def values(records: Iterable[Any]) -> Iterator[List[int]]:
            yield [int(v) for _k, v in held(control, records)]

        vals = [v for part in rdd.mapPartitions(values).collect() for v in part]
        return to_writes(summarize(vals), {"batch_id": batch.batch_id, "part": "all"})

    batch_stream.commit_each_batch(per_batch)

    part_stream = KafkaUtils.createExactlyOnceStream(ssc, params, [topic], store=store,
                                                     app_id=f"{prefix}-partition", poll_timeout_ms=30000)

    def per_partition(records: Iterable[Any], r: Any, batch: Any) -> Any:
        vals = [int(v) for _k, v in held(control, records)]
        part = ",".join(f"{x.topic}/{x.partition}" for x in (r if isinstance(r, tuple) else (r,)))
        return to_writes(summarize(vals), {"batch_id": batch.batch_id, "part": part})

    part_stream.commit_each_partition(per_partition)
    pending = f"{len(batch_stream.store.pending_batches())},{len(part_stream.store.pending_batches())}"
    ssc.start()  # takes both streams' epochs
    print(f"STARTED pid={os.getpid()} epochs={batch_stream.epoch},{part_stream.epoch} pending={pending}", flush=True)
    ssc.awaitTermination()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
