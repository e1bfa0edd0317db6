"""A driver SIGKILLed between planning a batch and reading it (``python -m tests.integration.data_loss_proc …``).

- ``files GLOB STORE APP FROM UNTIL``: ``createExactlyOnceFileStream`` + ``commit_each_batch`` (sum and
  count of the numbers, one per line);
- ``kafka BOOTSTRAP TOPIC STORE APP FROM UNTIL``: ``createExactlyOnceStream`` with
  ``maxRatePerPartition`` 25 per second and 2 s batches (at most 50 records a batch) + ``commit_each_batch``.

Each prints ``STARTED`` once streaming. When a batch holds a range ``[FROM, UNTIL)`` (bytes of a
file, offsets of a Kafka partition) the output function prints ``PLANNED <batch id>`` and blocks
before it reads anything: the batch is in the offset log, nothing of it is read or committed,
and the test SIGKILLs the driver there.
"""

from __future__ import annotations

import sys
import time


def _sum_and_count(start: int, until: int, value):  # type: ignore[no-untyped-def]
    from dstream_exactly_once import Writes

    def func(batch, rdd):  # type: ignore[no-untyped-def]
        if any((r.start, r.end) == (start, until) for r in batch.ranges):
            print(f"PLANNED {batch.batch_id}", flush=True)
            while True:
                time.sleep(1)
        total, count = rdd.map(lambda x: (int(value(x)), 1)).fold((0, 0), lambda a, b: (a[0] + b[0], a[1] + b[1]))
        return Writes().incr("numbers", "sum", total).incr("numbers", "count", count)

    return func


def main(mode: str, args: list) -> None:
    from pyspark.streaming import StreamingContext

    from dstream_exactly_once import FileUtils, KafkaUtils
    from dstream_exactly_once.testing._spark import make_spark_context

    if mode == "files":
        pattern, store, app, start, until = args
        sc = make_spark_context("local[2]", "data-loss-files")
        ssc = StreamingContext(sc, 0.5)
        stream = FileUtils.createExactlyOnceFileStream(ssc, pattern, store=store, app_id=app)
        stream.commit_each_batch(_sum_and_count(int(start), int(until), lambda line: line))
    else:
        bootstrap, topic, store, app, start, until = args
        sc = make_spark_context("local[2]", "data-loss-kafka",
                                {"spark.streaming.kafka.maxRatePerPartition": "25"})
        ssc = StreamingContext(sc, 2)
        stream = KafkaUtils.createExactlyOnceStream(
            ssc, {"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"}, [topic], store=store, app_id=app)
        stream.commit_each_batch(_sum_and_count(int(start), int(until), lambda kv: kv[1]))
    ssc.start()
    print("STARTED", flush=True)
    while True:
        time.sleep(1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
