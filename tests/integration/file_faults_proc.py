"""Child processes of the file-source SIGKILL test (``python -m tests.integration.file_faults_proc …``).

- ``writer DIR N PAUSE ROTATE_EVERY [RELEASE]``: appends the numbers 1..N (one per line) to
  ``DIR/service.log`` in chunks, rotating every ``ROTATE_EVERY`` numbers alternately by rename
  (``service.log`` -> ``service.log.<k>``, a new ``service.log``) and by copytruncate (copy to
  ``service.log.<k>``, truncate in place); prints ``WRITTEN`` at the end. With ``RELEASE`` (a file
  holding a number, written by the test), a chunk is written only once its last number is at most
  that number: the test hands out the lines step by step.
- ``driver GLOB STORE APP N [STORE APP ...]``: one driver of ``createExactlyOnceFileStream`` +
  ``commit_each_batch`` (sum and count of the numbers) per ``STORE APP`` pair, all in one
  StreamingContext (so one SIGKILL stops every store's stream at once); prints ``STARTED`` once
  streaming, ``DONE <count> <sum>`` when every store holds ``N`` numbers (exit 0), ``OVERCOUNT …``
  (exit 2) if one ever holds more.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from typing import List, Optional, Tuple

from .store_sum import await_counts


def _released(release: Optional[str]) -> float:
    if release is None:
        return float("inf")
    try:
        with open(release) as f:
            return int(f.read().strip() or 0)
    except (FileNotFoundError, ValueError):  # not written yet, or being replaced
        return 0


def write(directory: str, n: int, pause: float, rotate_every: int, chunk: int = 50,
          release: Optional[str] = None) -> None:
    live = os.path.join(directory, "service.log")
    k = 0
    for start in range(1, n + 1, chunk):
        end = min(start + chunk, n + 1)
        while _released(release) < end - 1:
            time.sleep(0.05)
        with open(live, "a", encoding="utf-8") as f:
            f.write("".join(f"{i}\n" for i in range(start, end)))
        written = end - 1
        if written % rotate_every == 0 and written < n:
            k += 1
            rotated = os.path.join(directory, f"service.log.{k}")
            if k % 2:
                os.rename(live, rotated)
            else:
                shutil.copyfile(live, rotated)
                with open(live, "r+b") as f:
                    f.truncate(0)
        time.sleep(pause)
    print("WRITTEN", flush=True)


def drive(pattern: str, targets: List[Tuple[str, str]], n: int) -> int:
    from pyspark.streaming import StreamingContext

    from dstream_exactly_once import FileUtils, Writes
    from dstream_exactly_once.testing._spark import make_spark_context

    def sum_and_count(batch, rdd):  # type: ignore[no-untyped-def]
        total, count = rdd.map(lambda line: (int(line), 1)).fold((0, 0), lambda a, b: (a[0] + b[0], a[1] + b[1]))
        return Writes().incr("numbers", "sum", total).incr("numbers", "count", count)

    sc = make_spark_context("local[2]", "file-faults")
    ssc = StreamingContext(sc, 0.5)
    for store, app in targets:
        stream = FileUtils.createExactlyOnceFileStream(ssc, pattern, {"bytes.max": 65536}, store=store, app_id=app)
        stream.commit_each_batch(sum_and_count)
    ssc.start()
    print("STARTED", flush=True)
    return await_counts(targets, n, lambda: ssc.stop(stopSparkContext=True, stopGraceFully=False))


if __name__ == "__main__":
    mode, *rest = sys.argv[1:]
    if mode == "writer":
        write(rest[0], int(rest[1]), float(rest[2]), int(rest[3]), release=rest[4] if len(rest) > 4 else None)
    else:
        pattern, first_store, first_app, count, *more = rest
        pairs = [(first_store, first_app)] + list(zip(more[0::2], more[1::2], strict=True))
        sys.exit(drive(pattern, pairs, int(count)))
