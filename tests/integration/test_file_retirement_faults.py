"""Exactly-once across SIGKILLs around the retirement of rotated files' positions.

A log is rotated by rename (the oldest beyond two deleted) between driver runs; every other run
SIGKILLs itself on its first batch whose commit drops retired positions — right after that commit, or with
the batch in the offset log and its commit not made — and the next driver continues. On SQLite,
PostgreSQL and Redis the stored count and sum of the numbered lines must be exact and the positions
bounded by the files present plus the retained batches. Child process: ``retirement_faults_proc.py``;
pattern: ``test_file_faults.py``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid

import pytest

from dstream_exactly_once.stores import open_store

from ..helpers import logrotate
from .faults import ROOT

pytestmark = [pytest.mark.integration]

MODULE = "tests.integration.retirement_faults_proc"
KEEP = 2  # rotated files kept besides service.log
ROUNDS = 8
PER_ROUND = 40


def _run(directory: str, url: str, app: str, kill: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", MODULE, directory, url, app, kill], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=120)


def _store_url(kind: str, tmp_path, request) -> str:
    if kind == "sqlite":
        return f"sqlite:///{tmp_path}/faults.db"
    if kind == "postgres":
        return str(request.getfixturevalue("postgres_url"))
    return str(request.getfixturevalue("redis_server").url)


@pytest.mark.parametrize("kind", ["sqlite", "postgres", "redis"])
@pytest.mark.parametrize("kill", ["after-commit", "before-commit"])
def test_sigkill_around_a_retiring_commit_stays_exact(kind, kill, tmp_path, request):
    url = _store_url(kind, tmp_path, request)
    app = f"retire-{kill}-{uuid.uuid4().hex[:6]}"
    d = tmp_path / "logs"
    d.mkdir()
    (d / "service.log").touch()
    n = kills = 0
    idle = []
    for i in range(ROUNDS):
        with open(d / "service.log", "a", encoding="utf-8") as f:
            f.write("".join(f"{i}\n" for i in range(n + 1, n + PER_ROUND + 1)))
        n += PER_ROUND
        logrotate(str(d), KEEP)
        killed = _run(str(d), url, app, kill if i % 2 else "none")  # every other round commits its drops
        if killed.returncode == -signal.SIGKILL:
            kills += 1
        else:
            assert killed.returncode == 0, killed.stderr[-3000:]
        done = _run(str(d), url, app, "none")
        assert done.returncode == 0, done.stderr[-3000:]
        idle.append(done.stdout.split())
    assert kills >= ROUNDS // 2 - 1, kills  # the first rounds have nothing to retire yet
    with open_store(url, app) as store:
        assert store.get_values("numbers") == {"count": n, "sum": n * (n + 1) // 2}
        positions = store.load_positions()
    present = KEEP + 1
    # files present + those read by the 2 retained batches (and the last driver's loaded ones)
    assert len(positions) <= present + 3, sorted(positions)
    assert all(int(rows) <= present + 3 and int(tracked) <= present + 3 for _, rows, tracked in idle), idle
