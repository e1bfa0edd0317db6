"""The direct file stream on real Spark keeps bounded state over a rotating log.

A log rotated by rename as soon as a batch read its lines (the oldest rotated file beyond two
deleted), 25 times, under a stream of 0.5 s batches: every line is read once, and the identities
the planner still tracks at the end are the files present plus those retired within the last few
batches — not one per rotation.
"""

from __future__ import annotations

import os
import threading
import time

import pytest
from pyspark.streaming import StreamingContext

from dstream_exactly_once import FileUtils
from dstream_exactly_once.core._retirement import DIRECT_GRACE_BATCHES

from ..helpers import eventually, logrotate
from .streams import run_until

pytestmark = [pytest.mark.integration]

KEEP = 2  # rotated files kept besides service.log
ROTATIONS = 25


def _count(seen: list, lock: threading.Lock) -> int:
    with lock:
        return len(seen)


def _rotate(d: str) -> None:
    logrotate(d, KEEP)


def test_direct_stream_forgets_the_identities_of_deleted_rotated_files(sc, tmp_path):
    d = tmp_path / "logs"
    d.mkdir()
    (d / "service.log").touch()
    ssc = StreamingContext(sc, 0.5)
    stream = FileUtils.createDirectFileStream(ssc, f"{d}/service.log*")
    seen, lock = [], threading.Lock()

    def collect(rdd):
        got = rdd.collect()
        with lock:
            seen.extend(got)

    stream.foreachRDD(collect)
    written = []

    def write():
        for n in range(ROTATIONS):
            lines = [f"{n}-{i}" for i in range(3)]
            with open(d / "service.log", "a", encoding="utf-8") as f:
                f.write("".join(line + "\n" for line in lines))
            written.extend(lines)
            # rotate once a batch read them (the oldest rotated file is deleted: read before, nothing lost)
            eventually(lambda: _count(seen, lock) >= len(written), "the lines before a rotation", 60)
            _rotate(str(d))
        with open(d / "service.log", "a", encoding="utf-8") as f:
            f.write("end\n")
        written.append("end")

    writer = threading.Thread(target=write, daemon=True)
    writer.start()

    def done():
        with lock:
            return not writer.is_alive() and len(seen) >= len(written)

    def settled():  # every line read, and a few more batches planned after the last rotation
        if not done():
            return False
        time.sleep(DIRECT_GRACE_BATCHES * 0.5 + 1)
        return True

    try:
        run_until(ssc, settled, timeout=180)
    finally:
        writer.join()
    assert sorted(seen) == sorted(written), "every line once"
    present = len(os.listdir(d))
    tracked = stream.planner.tracked()
    # without retirement the planner would track one identity per file ever created (ROTATIONS + 1)
    assert len(tracked) <= present + DIRECT_GRACE_BATCHES, tracked
    assert stream.retirement.forgotten >= ROTATIONS - KEEP - DIRECT_GRACE_BATCHES, stream.retirement.forgotten
