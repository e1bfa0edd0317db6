"""Exactly-once file streams on real Spark keep bounded state over a log rotated with deletions.

A writer appends numbered lines to ``service.log`` and rotates it by rename, deleting the oldest
rotated file beyond two; both output patterns (whole-batch commits and per-partition commits with
the driver's ``mark_committed``) must count every line once and leave the store's positions and the
planner's identities bounded by the files present plus the retained batches.
"""

from __future__ import annotations

import os
import threading
import time
import uuid

import pytest
from pyspark.streaming import StreamingContext

from dstream_exactly_once import FileUtils
from dstream_exactly_once.stores import Writes, open_store

from ..helpers import logrotate
from .streams import run_until

pytestmark = pytest.mark.integration

KEEP = 2
ROTATIONS = 8
PER_ROTATION = 40
RETAIN = 2


def _counted(url: str, app: str) -> int:
    with open_store(url, app) as store:
        return int(store.get_values("numbers").get("count", 0))


def _writer(d: str, url: str, app: str) -> None:
    """Rotates once the stream counted the file's lines (a deletion before the read is a loss, tested elsewhere)."""
    log = os.path.join(d, "service.log")
    n = 0
    for _ in range(ROTATIONS):
        with open(log, "a", encoding="utf-8") as f:
            f.write("".join(f"{i}\n" for i in range(n + 1, n + PER_ROTATION + 1)))
        n += PER_ROTATION
        deadline = time.monotonic() + 60
        while _counted(url, app) < n and time.monotonic() < deadline:
            time.sleep(0.2)
        logrotate(d, KEEP)


@pytest.mark.parametrize("output", ["commit_each_batch", "commit_each_partition"])
def test_rotation_with_deletions_counts_once_and_keeps_positions_bounded(output, sc, tmp_path):
    url = f"sqlite:///{tmp_path}/files.db"
    app = f"retire-{uuid.uuid4().hex[:6]}"
    d = tmp_path / "logs"
    d.mkdir()
    (d / "service.log").touch()
    total = ROTATIONS * PER_ROTATION
    ssc = StreamingContext(sc, 0.5)
    stream = FileUtils.createExactlyOnceFileStream(ssc, f"{d}/service.log*", {"starting.offsets": "earliest"},
                                                   store=url, app_id=app, retain_batches=RETAIN)
    most = {"rows": 0, "tracked": 0}
    if output == "commit_each_batch":
        def count(batch, rdd):  # type: ignore[no-untyped-def]
            numbers = rdd.map(int).collect()
            return Writes().incr("numbers", "sum", sum(numbers)).incr("numbers", "count", len(numbers))

        stream.commit_each_batch(count)
    else:
        def count_part(records, offset_range, batch):  # type: ignore[no-untyped-def]
            numbers = [int(r) for r in records]
            return Writes().incr("numbers", "sum", sum(numbers)).incr("numbers", "count", len(numbers))

        stream.commit_each_partition(count_part)
    writer = threading.Thread(target=_writer, args=(str(d), url, app), daemon=True)
    writer.start()

    def done() -> bool:
        with open_store(url, app) as store:
            most["rows"] = max(most["rows"], len(store.load_positions()))
            counted = store.get_values("numbers").get("count", 0)
        most["tracked"] = max(most["tracked"], len(stream.committer.source.tracked()))
        return not writer.is_alive() and counted >= total

    run_until(ssc, done, timeout=240)
    writer.join()
    with open_store(url, app) as store:
        assert store.get_values("numbers") == {"count": total, "sum": total * (total + 1) // 2}
    present = KEEP + 1
    # without retirement every one of the 9 files keeps a row; here: those present + the few gone
    # files a retained batch still reads
    bound = present + 2 * RETAIN
    assert most["rows"] <= bound and most["tracked"] <= bound, (most, bound)
    assert stream.committer.source.counters["losses"] == 0
