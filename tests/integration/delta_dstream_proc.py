"""An exactly-once DStream writing to a Delta table through ``DeltaSink``, as a child driver.

``python -m tests.integration.delta_dstream_proc BOOTSTRAP TOPIC STORE APP TABLE CRASH_POINT CRASH_AT [MODE]``

Each record's value ``v`` becomes the row ``{"v": v, "bucket": v % 3}`` of a table partitioned by
``bucket``; ``MODE`` is ``append`` (the default) or ``merge`` (``merge_keys=["v"]``: each batch is ONE
Delta merge commit, and no file is written before it). ``CRASH_POINT`` is ``files`` (the driver's
whole process group is SIGKILLed after the batch's files are written and recorded as pending, before
the Delta commit), ``table`` (right after the Delta commit, before the store commits the positions)
or ``none``; ``CRASH_AT`` = n crashes at the n-th table commit (or merge) of this run (so every run
makes progress first). Prints ``DONE`` once the store's positions reach the topic's end.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any, Iterable, List


def kill_everything() -> None:
    print(f"CRASH: SIGKILL of the process group of {os.getpid()}", flush=True)
    os.killpg(os.getpgid(0), signal.SIGKILL)


def main(bootstrap: str, topic: str, store_url: str, app: str, table: str, crash_point: str, crash_at: int,
         mode: str = "append") -> int:
    import pyarrow as pa
    from pyspark.streaming import StreamingContext

    from dstream_exactly_once import KafkaUtils, TopicAndPartition
    from dstream_exactly_once.kafka._metadata import KafkaMetadata
    from dstream_exactly_once.kafka._params import parse_kafka_params
    from dstream_exactly_once.sinks.delta import DeltaSink
    from dstream_exactly_once.stores import open_store
    from dstream_exactly_once.testing._child_driver import run_until_done
    from dstream_exactly_once.testing._spark import make_spark_context

    params = {"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"}
    md = KafkaMetadata(parse_kafka_params(params))
    target = md.latest([TopicAndPartition(topic, p) for p in md.partitions([topic])[topic]])
    md.close()
    sc = make_spark_context("local[2]", f"deo-delta-{app}", {"spark.streaming.kafka.maxRatePerPartition": 60})
    ssc = StreamingContext(sc, 1)
    store = open_store(store_url, app)
    stream = KafkaUtils.createExactlyOnceStream(ssc, params, [topic], store=store, failOnDataLoss=True,
                                                poll_timeout_ms=30000)
    sink = DeltaSink(table, schema=pa.schema([("v", pa.int64()), ("bucket", pa.int64())]), partition_by=["bucket"],
                     merge_keys=["v"] if mode == "merge" else ())
    commits = [0]
    real_commit = sink.target.merge if mode == "merge" else sink.target.commit

    def commit(*args: Any, **kwargs: Any) -> int:
        commits[0] += 1
        crash = commits[0] == crash_at
        if crash and crash_point == "files":
            kill_everything()
        version = real_commit(*args, **kwargs)
        if crash and crash_point == "table":
            kill_everything()
        return version

    if mode == "merge":
        sink.target.merge = commit  # type: ignore[method-assign]
    else:
        sink.target.commit = commit  # type: ignore[method-assign]

    def rows(records: Iterable[Any]) -> List[dict]:
        return [{"v": int(v), "bucket": int(v) % 3} for _, v in records]

    sink.attach(stream, rows=rows)
    checker = open_store(store_url, app)  # the stream's store object stays with the stream's threads
    return run_until_done(ssc, lambda: checker.load_offsets() == target)


if __name__ == "__main__":
    a = sys.argv[1:]
    if len(a) not in (7, 8):
        sys.exit(f"want: BOOTSTRAP TOPIC STORE APP TABLE CRASH_POINT CRASH_AT [MODE]; got {a!r}")
    sys.exit(main(a[0], a[1], a[2], a[3], a[4], a[5], int(a[6]), *a[7:]))
