"""The driver SIGKILLed with a logged batch unread (``python -m tests.integration.replay_rotation_proc …``).

``GLOB STORE APP PATTERN MARKER``: ``createExactlyOnceFileStream`` with ``commit_each_batch`` or
``commit_each_partition`` (``PATTERN``: ``batch`` or ``partition``) summing and counting the numbers
(one per line). Prints ``STARTED`` once streaming. The output of the batch holding a range of
``service.log.3`` creates the file ``MARKER`` and blocks before it reads anything (on the driver for
``batch``, in that range's task for ``partition``): the batch is in the offset log, its
``service.log.3`` range unread, and the test SIGKILLs the driver there.
"""

from __future__ import annotations

import sys
import time


def _block(marker: str) -> None:
    open(marker, "w").close()
    while True:
        time.sleep(1)


def main(pattern: str, store: str, app: str, output: str, marker: str) -> None:
    from pyspark.streaming import StreamingContext

    from dstream_exactly_once import FileUtils, Writes
    from dstream_exactly_once.testing._spark import make_spark_context

    sc = make_spark_context("local[2]", "replay-rotation")
    ssc = StreamingContext(sc, 0.5)
    stream = FileUtils.createExactlyOnceFileStream(ssc, pattern, {"bytes.max": 1 << 20}, store=store, app_id=app)
    if output == "batch":
        def per_batch(batch, rdd):  # type: ignore[no-untyped-def]
            if any(r.path.endswith("service.log.3") for r in batch.ranges):
                _block(marker)
            numbers = rdd.map(int).collect()
            return Writes().incr("numbers", "sum", sum(numbers)).incr("numbers", "count", len(numbers))

        stream.commit_each_batch(per_batch)
    else:
        def per_partition(records, r, batch):  # type: ignore[no-untyped-def]
            if r.path.endswith("service.log.3"):
                _block(marker)
            numbers = [int(x) for x in records]
            return Writes().incr("numbers", "sum", sum(numbers)).incr("numbers", "count", len(numbers))

        stream.commit_each_partition(per_partition)
    ssc.start()
    print("STARTED", flush=True)
    while True:
        time.sleep(1)


if __name__ == "__main__":
    main(*sys.argv[1:])
