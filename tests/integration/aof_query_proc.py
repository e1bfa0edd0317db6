"""Child driver of the aof Structured Streaming SIGKILL tests (``python -m tests.integration.aof_query_proc …``).

- ``driver GLOB CHECKPOINTS N HOLD_DIR STORE APP [STORE APP …]``: one Spark driver running one query
  per ``STORE APP`` pair: ``readStream.format("aof")`` over ``GLOB`` (``bytes.max`` 4096, a 0.3 s
  trigger) into ``writeStream.format("deo-store")`` on checkpoint ``CHECKPOINTS/APP``: every line
  ``i`` becomes one ``incr`` of namespace ``seen``, key ``i``. Prints ``STARTED`` once every query
  runs, ``DONE <lines> …`` (each store's, in argument order) when every store holds ``N`` distinct
  lines (exit 0), ``OVERCOUNT <app> <line> <count>`` (exit 2) as soon as a line is counted twice.
  Kill it at any moment with SIGKILL and start it again on the same checkpoints and stores. The
  queries share the driver (one JVM start serves them all) and nothing else: each has its own
  checkpoint, application id and store.

The sink registered as ``deo-store`` here is the library's (:class:`HoldingStoreSink`) with two
points a test can arm per query, to SIGKILL the driver at a known step of a micro-batch: a file
``HOLD_DIR/APP/before-commit`` holds the query's ``commit(messages, batchId)`` before the store
transaction (Spark has written the batch's offset-log entry; the store has not seen the batch), a
file ``HOLD_DIR/APP/after-commit`` holds it after the store transaction (before Spark's commit-log
entry). A file holding a number holds only batch ids from that number on (an empty file: any). A
held commit writes ``HOLD_DIR/APP/held`` (``<point> <batch id>``) and waits to be killed; the
other queries go on.

The writer process is :mod:`tests.integration.file_faults_proc` (``writer DIR N PAUSE ROTATE_EVERY``).
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from dstream_exactly_once.structured._spark_store_sink import StoreSinkDataSource, StoreStreamWriter

from .faults import restartable, wait_settled

#: Environment variable naming the hold directory (Spark's Python workers inherit the driver's environment).
HOLD_DIR = "AOF_FAULTS_HOLD_DIR"


def _hold(app: str, point: str, batch_id: int) -> None:
    directory = os.path.join(os.environ.get(HOLD_DIR) or "", app)
    try:
        with open(os.path.join(directory, point)) as f:
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
        _hold(self.opts.app, "before-commit", batchId)
        super().commit(messages, batchId)
        _hold(self.opts.app, "after-commit", batchId)


class HoldingStoreSink(StoreSinkDataSource):
    """``deo-store`` with :class:`HoldingStreamWriter`."""

    def streamWriter(self, schema: Any, overwrite: bool) -> HoldingStreamWriter:  # noqa: N802 - Spark's name
        return HoldingStreamWriter(super().streamWriter(schema, overwrite).opts)


def drive(pattern: str, checkpoints: str, n: int, hold_dir: str, targets: Sequence[Tuple[str, str]]) -> int:
    os.environ[HOLD_DIR] = hold_dir  # before the JVM starts: its Python workers inherit it
    from pyspark.sql import SparkSession

    from dstream_exactly_once import open_store
    from dstream_exactly_once.files.structured._aof import register_aof
    from dstream_exactly_once.structured import store_sink_options
    from dstream_exactly_once.testing._spark import make_spark_context

    sc = make_spark_context("local[2]", "aof-query")
    spark = SparkSession(sc)
    register_aof(spark)
    spark.dataSource.register(HoldingStoreSink)

    def start(store_url: str, app: str) -> Any:
        options = store_sink_options(store_url, app)  # the first commit takes the epoch: fences an older driver
        return (spark.readStream.format("aof").option("path", pattern).option("bytes.max", "4096").load()
                .selectExpr("'seen' AS namespace", "value AS key", "'incr' AS op", "CAST(1 AS BIGINT) AS value")
                .writeStream.format("deo-store").options(**options)
                .option("checkpointLocation", os.path.join(checkpoints, app))
                .trigger(processingTime="300 milliseconds").start())

    queries: Dict[str, Any] = {}
    for url, app in targets:  # one at a time: three source runners starting at once may miss Spark's 10 s
        queries[app] = query = start(url, app)
        wait_settled(query, os.path.join(hold_dir, app, "held"), 30.0)
    print("STARTED", flush=True)
    readers = {app: open_store(url, app) for url, app in targets}
    try:
        while True:
            counts = []
            for url, app in targets:
                failure = queries[app].exception()
                if restartable(failure):
                    print(f"RESTARTED {app} {str(failure)[:200]!r}", flush=True)
                    queries[app] = start(url, app)
                elif failure is not None:
                    print(f"FAILED {app} {failure}", flush=True)
                    return 3
                seen = readers[app].get_values("seen")
                twice = next(((line, count) for line, count in seen.items() if count != 1), None)
                if twice is not None:
                    print(f"OVERCOUNT {app} {twice[0]} {twice[1]}", flush=True)
                    return 2
                counts.append(len(seen))
            if min(counts) >= n:
                print("DONE " + " ".join(map(str, counts)), flush=True)
                for query in queries.values():
                    query.stop()
                return 0
            time.sleep(0.3)
    finally:
        for reader in readers.values():
            reader.close()


if __name__ == "__main__":
    mode, *rest = sys.argv[1:]
    pairs = rest[4:]
    if mode != "driver" or not pairs or len(pairs) % 2:
        sys.exit(f"want: driver GLOB CHECKPOINTS N HOLD_DIR STORE APP [STORE APP …]; got {sys.argv[1:]!r}")
    sys.exit(drive(rest[0], rest[1], int(rest[2]), rest[3], list(zip(pairs[::2], pairs[1::2], strict=True))))
