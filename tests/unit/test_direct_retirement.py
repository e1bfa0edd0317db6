"""A source without a store (the direct file stream) forgets retired file identities after a grace.

The real ``FilePlanner`` over a log rotated by rename, the oldest rotated file deleted: without
:class:`RetiredPartitions` its tracked identities grow by one per rotation; with it they stay
bounded by the files present plus the grace.
"""

from __future__ import annotations

import os
from collections import Counter
from datetime import datetime, timedelta, timezone
from typing import List, Optional

import pytest

from dstream_exactly_once.core._retirement import DIRECT_GRACE_BATCHES, RetiredPartitions
from dstream_exactly_once.errors import ConfigurationError
from dstream_exactly_once.files import FilePlanner, FileSourceOptions

from ..helpers import logrotate

KEEP = 2  # rotated files kept besides service.log
ROTATIONS = 40


def _rotate(d: str) -> None:
    logrotate(d, KEEP)


def _run(d: str, retirement: bool) -> tuple:
    options = FileSourceOptions.from_mapping({"starting.offsets": "earliest"})
    planner = FilePlanner(os.path.join(d, "service.log*"), options)
    planner.start({})
    forget: Optional[RetiredPartitions] = RetiredPartitions(planner) if retirement else None
    reader = planner.reader()
    read: Counter = Counter()
    written: List[str] = []
    most = 0
    t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
    for n in range(ROTATIONS):
        lines = [f"{n}-{i}" for i in range(3)]
        with open(os.path.join(d, "service.log"), "a", encoding="utf-8") as f:
            f.write("".join(line + "\n" for line in lines))
        written += lines
        for b in range(2):
            for r in planner.plan(t0 + timedelta(seconds=2 * n + b)):
                read.update(reader.read(r))
            if forget is not None:
                forget.after_plan()
        _rotate(d)
        present = len(os.listdir(d))
        most = max(most, len(planner.tracked()) - present)
    return read, Counter(written), most, forget


def test_retired_identities_are_forgotten_after_the_grace(tmp_path):
    read, written, most, forget = _run(str(tmp_path), retirement=True)
    assert read == written, "every line once"
    # each batch retires at most one file (the one deleted by the rotation before it)
    assert most <= DIRECT_GRACE_BATCHES, most
    assert forget.forgotten >= ROTATIONS - KEEP - 1 - DIRECT_GRACE_BATCHES
    assert forget.pending() <= DIRECT_GRACE_BATCHES


def test_without_retirement_identities_grow_with_every_rotation(tmp_path):
    read, written, most, _ = _run(str(tmp_path), retirement=False)
    assert read == written
    assert most >= ROTATIONS - KEEP - 1  # what the direct stream's planner did before it retired identities


def test_a_file_back_within_the_grace_continues(tmp_path):
    log = tmp_path / "a.log"
    log.write_text("1\n2\n")
    planner = FilePlanner(f"{tmp_path}/*.log", FileSourceOptions.from_mapping({"starting.offsets": "earliest"}))
    planner.start({})
    forget = RetiredPartitions(planner, grace_batches=2)
    t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
    assert [r.untilOffset for r in planner.plan(t0)] == [4]
    forget.after_plan()
    os.rename(log, tmp_path / "a.moved")  # leaves the pattern: gone (read to its end)
    assert planner.plan(t0 + timedelta(seconds=1)) == []
    assert forget.after_plan() == [] and forget.pending() == 1
    os.rename(tmp_path / "a.moved", log)
    with open(log, "a", encoding="utf-8") as f:
        f.write("3\n")
    assert [(r.fromOffset, r.untilOffset) for r in planner.plan(t0 + timedelta(seconds=2))] == [(4, 6)]
    assert forget.after_plan() == [] and forget.pending() == 0  # back: no longer retired
    os.rename(log, tmp_path / "a.moved")
    for s in range(3, 5):  # the batch that finds it gone, and one more
        assert planner.plan(t0 + timedelta(seconds=s)) == []
        assert forget.after_plan() == []
    assert planner.plan(t0 + timedelta(seconds=5)) == []
    assert len(forget.after_plan()) == 1  # two batches after the one that found it gone
    assert planner.tracked() == {}


@pytest.mark.parametrize("bad", [-1, 1.5, True, "3"])
def test_a_bad_grace_is_refused(tmp_path, bad):
    planner = FilePlanner(f"{tmp_path}/*.log")
    with pytest.raises(ConfigurationError, match=rf"grace_batches must be an int >= 0, got {bad!r}"):
        RetiredPartitions(planner, grace_batches=bad)
