"""File identity across real driver restarts (Spark local mode, SQLite store, ``createExactlyOnceFileStream``).

- A logrotate copy written in pieces smaller than ``md5.sample.length`` while the stream runs — and
  while it is restarted — is a copy in progress: every number is counted exactly once.
- A rotated file deleted unread while no driver runs is reported as a loss by the next driver, with
  its byte range (WARN log, planner counters, the identity's ``gone`` state).
"""

from __future__ import annotations

import logging
import os
import uuid
from typing import Any, Dict

from pyspark.streaming import StreamingContext

from dstream_exactly_once import FileUtils
from dstream_exactly_once.stores import Writes, open_store
from dstream_exactly_once.testing._process import wait_until


def _append(path: str, numbers: Any, end: str = "") -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write("".join(f"{n}\n" for n in numbers) + end)


def sum_and_count(batch, rdd):  # type: ignore[no-untyped-def]
    total, count = rdd.map(lambda line: (int(line), 1)).fold((0, 0), lambda a, b: (a[0] + b[0], a[1] + b[1]))
    return Writes().incr("numbers", "sum", total).incr("numbers", "count", count)


class Driver:
    """One driver of the stream: a StreamingContext on the shared SparkContext, started, stopped once."""

    def __init__(self, sc: Any, pattern: str, url: str, app: str, options: Dict[str, Any]) -> None:
        self.ssc = StreamingContext(sc, 0.5)
        self.stream = FileUtils.createExactlyOnceFileStream(self.ssc, pattern, options, store=url, app_id=app)
        self.stream.commit_each_batch(sum_and_count)
        self.ssc.start()

    @property
    def plans(self) -> int:
        """Plans made so far (empty ones included)."""
        c = self.stream.committer
        return c.skipped_empty + c.next_batch_id

    def planned_twice_more(self, timeout: float = 30) -> None:
        """Wait until two more plans were made: the second scanned the files as they are now."""
        target = self.plans + 2
        wait_until(lambda: self.plans >= target, timeout=timeout, what="two more batch plans")

    def stop(self) -> None:
        self.ssc.stop(stopSparkContext=False, stopGraceFully=False)


def _values(url: str, app: str) -> Dict[str, Any]:
    with open_store(url, app) as store:
        return store.get_values("numbers")


def _counted(url: str, app: str, n: int, timeout: float = 60) -> None:
    wait_until(lambda: _values(url, app).get("count", 0) >= n, timeout=timeout, what=f"{n} numbers counted")


def test_copy_in_pieces_smaller_than_the_sample_across_a_restart_is_counted_once(sc, tmp_path):
    url, app = f"sqlite:///{tmp_path}/state.db", f"copy-pieces-{uuid.uuid4().hex[:6]}"
    logs = tmp_path / "logs"
    logs.mkdir()
    live, rotated = str(logs / "service.log"), str(logs / "service.log.1")
    _append(live, range(1, 401))  # 1492 bytes: the fingerprint covers the first 1024
    pattern, options = f"{logs}/service.log*", {"md5.sample.length": 1024}
    driver = Driver(sc, pattern, url, app, options)
    try:
        _counted(url, app, 400)
        copied = 0
        for piece in range(8):  # logrotate copies 200 bytes at a time; each piece is planned over
            if piece == 3:  # a real restart of the stream while the copy is half done
                driver.stop()
                driver = Driver(sc, pattern, url, app, options)
            with open(live, "rb") as src, open(rotated, "ab") as dst:
                src.seek(copied)
                data = src.read(200)
                dst.write(data)
            copied += len(data)
            driver.planned_twice_more()
            assert _values(url, app)["count"] == 400, f"the copy was read after piece {piece}"
        assert copied == os.path.getsize(live)
        os.truncate(live, 0)  # copytruncate's truncate
        _append(live, range(401, 451))
        _counted(url, app, 450)
        driver.planned_twice_more()
        counters = driver.stream.committer.source.counters
    finally:
        driver.stop()
    got = _values(url, app)
    assert (got["count"], got["sum"]) == (450, 450 * 451 // 2)
    assert counters["losses"] == 0 and counters["copies"] == 1


def test_rotated_file_deleted_while_no_driver_runs_is_reported_by_the_next(sc, tmp_path, caplog):
    url, app = f"sqlite:///{tmp_path}/state.db", f"gone-unread-{uuid.uuid4().hex[:6]}"
    logs = tmp_path / "logs"
    logs.mkdir()
    live = str(logs / "service.log")
    _append(live, range(1, 401), end="40")  # the writer is in the middle of line 401
    seen_size = os.path.getsize(live)
    pattern = f"{logs}/service.log*"
    first = Driver(sc, pattern, url, app, {})
    try:
        _counted(url, app, 400)
        first.planned_twice_more()  # nothing more to read: no batch is left to replay
    finally:
        first.stop()
    with open_store(url, app) as store:
        assert store.pending_batches() == []
        ((key, pos),) = store.load_positions().items()
    read_until = pos.offset
    assert read_until == seen_size - 2
    # no driver runs: the writer ends line 401 and goes on, logrotate renames service.log, the
    # service opens a new one, and the rotated file is deleted before any driver read it
    _append(live, [1], end="")
    _append(live, range(402, 451))
    os.rename(live, live + ".1")
    _append(live, range(1001, 1101))
    os.remove(live + ".1")
    with caplog.at_level(logging.WARNING, logger="dstream_exactly_once.files._planner"):
        second = Driver(sc, pattern, url, app, {})
        try:
            _counted(url, app, 500)
            second.planned_twice_more()
            source = second.stream.committer.source
            counters, tracked = source.counters, source.tracked()
        finally:
            second.stop()
    got = _values(url, app)
    assert (got["count"], got["sum"]) == (500, 400 * 401 // 2 + sum(range(1001, 1101)))
    assert counters["losses"] == 1 and counters["lost_bytes"] == seen_size - read_until
    assert f"[{read_until}, {seen_size}): LOST" in caplog.text and live in caplog.text
    assert tracked[key][0] == "gone"
