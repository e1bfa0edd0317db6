"""Rotating logs keep bounded state: positions and identities of deleted files are dropped.

A real SQLite store and the real committer (no Spark): each batch is planned, read with the
executor-side reader and committed with the positions the committer retires, as
``commit_each_batch`` does.
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from datetime import datetime, timedelta, timezone
from typing import Any, List, Optional, Set

import pytest

from dstream_exactly_once.engine._committer import BatchCommitter
from dstream_exactly_once.errors import ConfigurationError
from dstream_exactly_once.files import FilePlanner, FileSourceOptions
from dstream_exactly_once.stores import CommitOutcome, PlannedBatch, Writes, open_store

from ._files_harness import on_inode, until_on_inode, write

HEADER = "# service log v1\n"
KEEP = 3  # rotated files kept besides service.log
RETAIN = 4  # retain_batches


class Driver:
    """One driver: committer + planner on a SQLite store, batches at consecutive seconds."""

    def __init__(self, url: str, pattern: str, t0: int) -> None:
        self.planner = FilePlanner(pattern, FileSourceOptions.from_mapping({"starting.offsets": "earliest"}))
        self.committer = BatchCommitter(open_store(url, "rot"), self.planner, retain_batches=RETAIN)
        self.t = t0
        self.keys_seen: Set[str] = set()

    def batch(self, lines: Counter) -> None:
        self.t += 1
        c = self.committer
        batch = c.next_batch(datetime(2026, 1, 1, tzinfo=timezone.utc) + timedelta(seconds=self.t))
        if batch is None:
            return
        reader = self.planner.reader()
        for r in batch.ranges:
            lines.update(reader.read(r))
        drops = c.position_drops(batch)
        outcome = c.store.commit(c.epoch, batch, Writes().drop_positions(drops))
        c.committed_batch(outcome, batch, drops)
        self.keys_seen.update(r.position_key for r in batch.ranges)


def rotate(d: str) -> None:
    log = os.path.join(d, "service.log")
    oldest = f"{log}.{KEEP}"
    if os.path.exists(oldest):
        os.remove(oldest)
    for i in range(KEEP - 1, 0, -1):
        if os.path.exists(f"{log}.{i}"):
            os.rename(f"{log}.{i}", f"{log}.{i + 1}")
    os.rename(log, f"{log}.1")
    with open(log, "w", encoding="utf-8") as f:  # usually on the inode of the file just deleted
        f.write(HEADER)


def append(d: str, lines: List[str]) -> None:
    with open(os.path.join(d, "service.log"), "a", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in lines))


def test_thirty_rotations_keep_positions_and_identities_bounded(tmp_path, caplog):
    d = tmp_path / "logs"
    d.mkdir()
    url = f"sqlite:///{tmp_path / 'store.db'}"
    with open(d / "service.log", "w", encoding="utf-8") as f:
        f.write(HEADER)
    driver = Driver(url, str(d / "service.log*"), 0)
    read: Counter = Counter()
    written: List[str] = []
    dropped_keys: Set[str] = set()
    most_rows = most_tracked = most_steady = 0
    caplog.set_level(logging.INFO, logger="dstream_exactly_once")
    for n in range(30):
        driver.batch(read)  # sees the new service.log holding the header only (same first bytes each time)
        new = [f"rotation {n} line {i}" for i in range(5)]
        append(str(d), new)
        written += new
        driver.batch(read)
        if n == 15:  # a restarted driver keeps the bound too
            driver.committer.close()
            before = driver.keys_seen
            driver = Driver(url, str(d / "service.log*"), driver.t)
            driver.keys_seen = before
        rotate(str(d))
        rows = driver.committer.store.load_positions()
        dropped_keys |= driver.keys_seen - set(rows)
        most_rows = max(most_rows, len(rows))
        if not 15 <= n < 15 + RETAIN:  # a restarted driver keeps what it loaded for RETAIN batches
            most_steady = max(most_steady, len(rows), len(driver.planner.tracked()))
        most_tracked = max(most_tracked, len(driver.planner.tracked()))
    append(str(d), ["end"])  # the last file differs from the header it shares with the others
    for _ in range(RETAIN + 3):
        driver.batch(read)
    assert read == Counter(written + ["end"] + [HEADER.rstrip("\n")] * 31), "every line once"
    present = KEEP + 1
    # a gone file is kept until no batch of the retained window reads it (a renamed file's range records
    # its new name: the batch after each rotation reads every file); after a restart, what the driver
    # loaded counts as read by the newest logged batch
    assert most_steady <= present + RETAIN, most_steady
    bound = present + RETAIN + 1
    assert most_rows <= bound, (most_rows, bound)
    assert most_tracked <= bound, (most_tracked, bound)
    assert len(dropped_keys) >= 30 - bound
    # a dropped key is never given to a later file (the new files share path, inode and first bytes)
    assert len(driver.keys_seen) == 31  # one key per file ever created
    text = caplog.text
    assert "was replaced" not in text
    assert "which was deleted after being read to its end" in text
    driver.committer.close()


def test_a_dropped_position_is_deleted_only_by_an_applied_commit(tmp_path):
    store = open_store(f"sqlite:///{tmp_path / 's.db'}", "app")
    from dstream_exactly_once.files import FileRange

    a = FileRange("a", "/x/a", 0, 10)
    b = FileRange("b", "/x/b", 0, 10)
    b2 = FileRange("b", "/x/b", 10, 20)
    epoch = store.start_epoch()
    assert store.commit(epoch, PlannedBatch(0, 0, (a,)), Writes()) is CommitOutcome.APPLIED
    assert store.commit(epoch, PlannedBatch(1, 0, (b,)), Writes()) is CommitOutcome.APPLIED
    replayed = store.commit(epoch, PlannedBatch(1, 0, (b,)), Writes().drop_position("file:a"))
    assert replayed is CommitOutcome.REPLAYED and "file:a" in store.load_positions()
    with pytest.raises(ConfigurationError, match="cannot drop the positions \\['file:b'\\]"):
        store.commit(epoch, PlannedBatch(2, 0, (b2,)), Writes().drop_position("file:b"))
    assert store.commit(epoch, PlannedBatch(2, 0, (b2,)), Writes().drop_position("file:a")) is CommitOutcome.APPLIED
    assert {k: p.offset for k, p in store.load_positions().items()} == {"file:b": 20}
    store.close()


def test_a_forgotten_key_is_never_given_to_a_later_file_with_the_same_path_inode_and_bytes(tmp_path):
    t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)

    def case(directory: str) -> Optional[Any]:
        log = os.path.join(directory, "x.log")
        write(log, HEADER, mode="w")
        planner = FilePlanner(os.path.join(directory, "*.log"))
        planner.start({})
        (first,) = planner.plan(t0)
        inode = os.stat(log).st_ino
        os.unlink(log)
        planner.plan(t0 + timedelta(seconds=1))
        assert planner.retired_positions() == [first.position_key]
        planner.forget_positions([first.position_key])
        if not on_inode(log, HEADER, inode, directory):  # the same path and first bytes, on the freed inode
            return None
        return planner, first

    planner, first = until_on_inode(case, tmp_path)
    (again,) = planner.plan(t0 + timedelta(seconds=2))
    assert (again.path, again.fingerprint, again.from_byte) == (first.path, first.fingerprint, 0)
    assert again.position_key != first.position_key
