"""Child driver of the aof Structured Streaming SIGKILL tests (``python -m tests.integration.aof_query_proc …``).

- ``driver GLOB CHECKPOINT STORE APP N``: one Spark driver running an ``aof`` query over ``GLOB`` on
  ``CHECKPOINT`` (``bytes.max`` 4096, a 0.5 s trigger) whose ``foreachBatch`` writer commits the count
  and sum of the batch's numbers and the batch id through the store as one :class:`Writes`, in a
  transaction keyed by Spark's batch id (the store's commit log: a micro-batch Spark replays after a
  crash is ``REPLAYED``, never applied twice). Prints ``STARTED`` once the query runs, ``DONE <count>
  <sum>`` when the store holds ``N`` numbers (exit 0), ``OVERCOUNT <count> <sum>`` (exit 2) if it ever
  holds more. Kill it at any moment with SIGKILL and start it again on the same checkpoint and store.

The writer process is :mod:`tests.integration.file_faults_proc` (``writer DIR N PAUSE ROTATE_EVERY``).
"""

from __future__ import annotations

import sys
import time

#: Spark gives a streaming source's Python worker 10 s to connect back; a loaded machine may miss it.
WORKER_TIMEOUT = "Python worker failed to connect back"


def drive(pattern: str, checkpoint: str, store_url: str, app: str, n: int) -> int:
    from pyspark.sql import SparkSession

    from dstream_exactly_once import Writes, open_store
    from dstream_exactly_once.stores.writes import PlannedBatch
    from dstream_exactly_once.structured import register
    from dstream_exactly_once.testing.spark import make_spark_context

    sc = make_spark_context("local[2]", "aof-query")
    spark = SparkSession(sc)
    register(spark)
    store = open_store(store_url, app)
    epoch = store.start_epoch()  # fences an older driver of the same app still committing

    def commit(df, batch_id):  # type: ignore[no-untyped-def]
        numbers = [int(r.value) for r in df.collect()]
        writes = (Writes().incr("numbers", "sum", sum(numbers)).incr("numbers", "count", len(numbers))
                  .put("numbers", "last_batch", batch_id))
        store.commit(epoch, PlannedBatch(batch_id, int(time.time() * 1000), ()), writes, log_entry=True)

    def start():  # type: ignore[no-untyped-def]
        return (spark.readStream.format("aof").option("path", pattern).option("bytes.max", "4096").load()
                .writeStream.foreachBatch(commit).option("checkpointLocation", checkpoint)
                .trigger(processingTime="500 milliseconds").start())

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
            values = reader.get_values("numbers")
            count = values.get("count", 0)
            if count > n:
                print(f"OVERCOUNT {count} {values.get('sum')}", flush=True)
                return 2
            if count == n:
                print(f"DONE {count} {values.get('sum')}", flush=True)
                query.stop()
                return 0
            time.sleep(0.3)


if __name__ == "__main__":
    mode, *rest = sys.argv[1:]
    if mode != "driver":
        sys.exit(f"unknown mode {mode!r}; want: driver GLOB CHECKPOINT STORE APP N")
    sys.exit(drive(rest[0], rest[1], rest[2], rest[3], int(rest[4])))
