"""Child driver of the task-planner SIGKILL test (``python -m tests.integration.planner_faults_proc …``).

``driver GLOB STORE APP N MODE MARKER [STORE APP …]``: ``createExactlyOnceFileStream`` over ``GLOB`` with
packed tasks (``tasks.target.count=3``) on ``local[1]`` (one task at a time), summing and counting the
numbers (one per line) in the store; one stream per ``STORE APP`` pair, all in one StreamingContext
(the replays of several stores share one driver). Unless ``MARKER`` exists, the driver's whole process group SIGKILLs
itself once (creating ``MARKER`` first) at the point ``MODE`` names:

- ``inside``: ``commit_each_partition``, inside a packed task's function, before its commit;
- ``after_commit``: ``commit_each_partition``, in the task after a packed task committed (the store
  already holds part of the batch, the commit log does not);
- ``between_pieces``: ``commit_each_batch`` with split ranges (``tasks.split.size``), while reading a
  piece of a range after its first piece was read.

Prints ``STARTED`` once streaming, ``DONE <count> <sum>`` when every store holds ``N`` numbers (exit 0),
``OVERCOUNT …`` (exit 2) if one ever holds more.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any, Callable, Sequence, Tuple

from .store_sum import await_counts

_GROUP = "PLANNER_FAULTS_DRIVER_GROUP"  # the driver's process group (PySpark workers run in their own)


def _die_once(marker: str) -> None:
    """SIGKILL the driver's process group (driver, JVM) and this process unless ``marker`` says it happened."""
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return
    os.close(fd)
    os.killpg(int(os.environ.get(_GROUP, os.getpgid(0))), signal.SIGKILL)
    # a Python worker runs in its own process group: it dies here too, so the task that kills never
    # commits (otherwise it could finish and commit the rest of the batch after the driver is gone)
    os.kill(os.getpid(), signal.SIGKILL)


def sum_numbers(ssc: Any, streams: Sequence[Tuple[Any, str, str]], n: int, mode: str, marker: str,
                number_of: Callable[[Any], int]) -> int:
    """Sum and count ``number_of(record)`` of each ``(stream, store, app)``'s records with the output
    ``mode`` names (dying once at its point), start ``ssc`` and wait until every store holds ``n``
    numbers."""
    from dstream_exactly_once import Writes, open_store
    from dstream_exactly_once.streaming._task_context import current_pieces

    for stream, store, app in streams:
        if mode == "between_pieces":
            def number(record: Any) -> tuple:
                if any(p.start > p.range.start for p in current_pieces()):
                    _die_once(marker)
                return number_of(record), 1

            def per_batch(batch, rdd):  # type: ignore[no-untyped-def]
                total, count = rdd.map(number).fold((0, 0), lambda a, b: (a[0] + b[0], a[1] + b[1]))
                return Writes().incr("numbers", "sum", total).incr("numbers", "count", count)

            stream.commit_each_batch(per_batch)
        else:
            def per_task(records, ranges, batch, store=store, app=app):  # type: ignore[no-untyped-def]
                numbers = [number_of(r) for r in records]
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
    return await_counts([(store, app) for _, store, app in streams], n,
                        lambda: ssc.stop(stopSparkContext=True, stopGraceFully=False))


def drive(pattern: str, targets: Sequence[Tuple[str, str]], n: int, mode: str, marker: str) -> int:
    from pyspark.streaming import StreamingContext

    from dstream_exactly_once import FileUtils
    from dstream_exactly_once.testing._spark import make_spark_context

    os.environ[_GROUP] = str(os.getpgid(0))  # inherited by the JVM and its Python workers
    sc = make_spark_context("local[1]", "planner-faults")
    ssc = StreamingContext(sc, 0.5)
    options = {"tasks.target.count": 3}
    if mode == "between_pieces":
        options["tasks.split.size"] = 3000
    streams = [(FileUtils.createExactlyOnceFileStream(ssc, pattern, options, store=store, app_id=app), store, app)
               for store, app in targets]
    return sum_numbers(ssc, streams, n, mode, marker, int)


if __name__ == "__main__":
    _, *rest = sys.argv[1:]
    more = rest[6:]
    pairs = [(rest[1], rest[2])] + list(zip(more[0::2], more[1::2], strict=True))
    sys.exit(drive(rest[0], pairs, int(rest[3]), rest[4], rest[5]))
