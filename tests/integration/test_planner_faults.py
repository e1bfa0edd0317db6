"""Exactly-once file streaming with packed and split tasks under SIGKILL, on all three stores.

Numbered lines in many small files (packed several to a task) and one large file (split into pieces
for ``commit_each_batch``). A first driver SIGKILLs its own process group at one chosen point
(``planner_faults_proc.py``): inside a packed task before its commit, right after a packed task's
per-task commit (the batch partly committed), or between two pieces of one split range; each store
gets its own first driver (its own SIGKILL). One second driver replays the batch of the three
stores (a stream each); every store must hold every number exactly once.
"""

from __future__ import annotations

import os
import uuid
from typing import Callable, List, Tuple

import pytest

from dstream_exactly_once.stores import open_store

from .test_file_faults import _lines, _spawn, _store_url, _wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

MODULE = "tests.integration.planner_faults_proc"
SMALL_FILES, PER_FILE, BIG = 30, 20, 1000
N = SMALL_FILES * PER_FILE + BIG

KINDS = ("sqlite", "postgres", "redis")
MODES = ("inside", "after_commit", "between_pieces")


def _write_input(logs):
    n = 0
    for i in range(SMALL_FILES):
        with open(logs / f"small-{i:02d}.log", "w", encoding="utf-8") as f:
            f.write("".join(f"{n + k}\n" for k in range(1, PER_FILE + 1)))
        n += PER_FILE
    with open(logs / "big.log", "w", encoding="utf-8") as f:
        f.write("".join(f"{n + k}\n" for k in range(1, BIG + 1)))


@pytest.mark.parametrize("mode", MODES)
def test_every_line_once_after_a_kill_in_packed_or_split_tasks(mode, tmp_path, request, monkeypatch):
    monkeypatch.setattr("tests.integration.test_file_faults.MODULE", MODULE)
    logs = tmp_path / "logs"
    logs.mkdir()
    _write_input(logs)
    targets = []
    for kind in KINDS:
        (tmp_path / kind).mkdir()
        targets.append((_store_url(kind, tmp_path / kind, request), f"planner-faults-{mode}-{uuid.uuid4().hex[:6]}",
                        str(tmp_path / kind / "killed")))
    kill_each_then_replay(lambda url, app, marker: (f"{logs}/*.log", url, app, str(N), mode, marker), targets, N,
                          mode, str(tmp_path / "children.err"))


def kill_each_then_replay(args: Callable[[str, str, str], Tuple[str, ...]], targets: List[Tuple[str, str, str]],
                          n: int, mode: str, stderr: str) -> None:
    """For each ``(url, app, marker)`` target, a first driver (``args(url, app, marker)``) that SIGKILLs
    itself at the point ``mode`` names, leaving what that point leaves in that store; then one second
    driver that replays every target's batch (a stream each); every number once in each store."""
    try:
        for url, app, marker in targets:
            first = _spawn("driver", *args(url, app, marker), stderr_path=stderr)
            lines = _lines(first)
            try:
                with pytest.raises(AssertionError, match="driver ended before DONE: <EOF>"):
                    _wait_for(lines, "DONE", 150)
            finally:
                first.wait(30)
            assert os.path.exists(marker), f"the first driver on {app} was not killed at the planned point"
            with open_store(url, app) as store:
                partial = store.get_values("numbers").get("count", 0)
            if mode == "after_commit":  # (the killed task's Python worker, outside the group, may still commit)
                assert 0 < partial < n, app  # the kill left the batch partly committed
            elif mode == "inside":
                assert partial < n, app  # tasks before the killed one may have committed their ranges
            else:
                assert partial == 0, app  # a whole-batch commit: nothing of the batch
        (url, app, marker), more = targets[0], [part for url, app, _ in targets[1:] for part in (url, app)]
        second = _spawn("driver", *args(url, app, marker), *more, stderr_path=stderr)  # the marker: no more kills
        try:
            done = _wait_for(_lines(second), "DONE", 240)
        finally:
            second.kill()
            second.wait(30)
    except AssertionError as exc:
        with open(stderr, errors="replace") as f:
            raise AssertionError(f"{exc}\nchildren's stderr (tail):\n{f.read()[-3000:]}") from None
    assert done == f"DONE {n} {n * (n + 1) // 2}"
    for url, app, _ in targets:
        with open_store(url, app) as store:
            assert store.get_values("numbers") == {"count": n, "sum": n * (n + 1) // 2}, app
