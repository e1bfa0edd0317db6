"""Child driver of the aof Structured Streaming SIGKILL tests (``python -m tests.integration.aof_query_proc …``).

- ``driver GLOB CHECKPOINT STORE APP N HOLD_DIR``: one Spark driver running
  ``readStream.format("aof")`` over ``GLOB`` (``bytes.max`` 4096, a 0.3 s trigger) into
  ``writeStream.format("deo-store")`` on ``CHECKPOINT``: every line ``i`` becomes one ``incr`` of
  namespace ``seen``, key ``i``. Prints ``STARTED`` once the query runs, ``DONE <lines>`` when the
  store holds ``N`` distinct lines (exit 0), ``OVERCOUNT <line> <count>`` (exit 2) as soon as a line
  is counted twice. Kill it at any moment with SIGKILL and start it again on the same checkpoint
  and store.

The sink registered as ``deo-store`` here is the library's (:class:`HoldingStoreSink`) with two
points a test can arm, to SIGKILL the driver at a known step of a micro-batch: a file
``HOLD_DIR/before-commit`` holds the sink's ``commit(messages, batchId)`` before the store
transaction (Spark has written the batch's offset-log entry; the store has not seen the batch), a
file ``HOLD_DIR/after-commit`` holds it after the store transaction (before Spark's commit-log
entry). A file holding a number holds only batch ids from that number on (an empty file: any). A
held commit writes ``HOLD_DIR/held`` (``<point> <batch id>``) and waits to be killed.

The writer process is :mod:`tests.integration.file_faults_proc` (``writer DIR N PAUSE ROTATE_EVERY``).
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any, List, Optional

from dstream_exactly_once.structured._spark_store_sink import StoreSinkDataSource, StoreStreamWriter

#: Spark gives a streaming source's Python worker 10 s to connect back; a loaded machine may miss it.
WORKER_TIMEOUT = "Python worker failed to connect back"

#: Environment variable naming the hold directory (Spark's Python workers inherit the driver's environment).
HOLD_DIR = "AOF_FAULTS_HOLD_DIR"


def _hold(point: str, batch_id: int) -> None:
    directory = os.environ.get(HOLD_DIR)
    try:
        with open(os.path.join(directory or "", point)) as f:
            lowest = int(f.read().strip() or 0)
    except FileNotFoundError:
        return
    if batch_id < lowest:
        return
    with open(os.path.join(directory, "held.tmp"), "w") as f:
        f.write(f"{point} {batch_id}")
    os.replace(os.path.join(directory, "held.tmp"), os.path.join(directory, "held"))
    while True:  # the test SIGKILLs the driver's process group here
        time.sleep(1)


class HoldingStreamWriter(StoreStreamWriter):
    """The deo-store writer, holding before or after its store transaction when the test armed it."""

    def commit(self, messages: List[Optional[Any]], batchId: int) -> None:  # noqa: N803 - Spark's name
        _hold("before-commit", batchId)
        super().commit(messages, batchId)
        _hold("after-commit", batchId)


class HoldingStoreSink(StoreSinkDataSource):
    """``deo-store`` with :class:`HoldingStreamWriter`."""

    def streamWriter(self, schema: Any, overwrite: bool) -> HoldingStreamWriter:  # noqa: N802 - Spark's name
        return HoldingStreamWriter(super().streamWriter(schema, overwrite).opts)


def drive(pattern: str, checkpoint: str, store_url: str, app: str, n: int, hold_dir: str) -> int:
    os.environ[HOLD_DIR] = hold_dir  # before the JVM starts: its Python workers inherit it
    from pyspark.sql import SparkSession

    from dstream_exactly_once import open_store
    from dstream_exactly_once.structured import store_sink_options
    from dstream_exactly_once.structured.aof import register_aof
    from dstream_exactly_once.testing.spark import make_spark_context

    sc = make_spark_context("local[2]", "aof-query")
    spark = SparkSession(sc)
    register_aof(spark)
    spark.dataSource.register(HoldingStoreSink)
    options = store_sink_options(store_url, app)  # a new epoch: fences an older driver of the same app

    def start():  # type: ignore[no-untyped-def]
        return (spark.readStream.format("aof").option("path", pattern).option("bytes.max", "4096").load()
                .selectExpr("'seen' AS namespace", "value AS key", "'incr' AS op", "CAST(1 AS BIGINT) AS value")
                .writeStream.format("deo-store").options(**options).option("checkpointLocation", checkpoint)
                .trigger(processingTime="300 milliseconds").start())

    query = start()
    print("STARTED", flush=True)
    with open_store(store_url, app) as reader:
        while True:
            failure = query.exception()
            if failure is not None and WORKER_TIMEOUT in str(failure):
                query = start()  # the source's Python worker was too slow to start: again, same checkpoint
            elif failure is not None:
                print(f"FAILED {failure}", flush=True)
                return 3
            seen = reader.get_values("seen")
            twice = next(((line, count) for line, count in seen.items() if count != 1), None)
            if twice is not None:
                print(f"OVERCOUNT {twice[0]} {twice[1]}", flush=True)
                return 2
            if len(seen) >= n:
                print(f"DONE {len(seen)}", flush=True)
                query.stop()
                return 0
            time.sleep(0.3)


if __name__ == "__main__":
    mode, *rest = sys.argv[1:]
    if mode != "driver":
        sys.exit(f"unknown mode {mode!r}; want: driver GLOB CHECKPOINT STORE APP N HOLD_DIR")
    sys.exit(drive(rest[0], rest[1], rest[2], rest[3], int(rest[4]), rest[5]))
