"""Exactly-once file streaming under SIGKILL: numbered lines, rotation by rename and copytruncate.

A writer process appends 1..N to ``service.log`` and rotates it (alternately rename and
copytruncate) while drivers of ``createExactlyOnceFileStream`` + ``commit_each_batch`` (sum and
count in the store) are SIGKILLed as whole process groups (Python driver, JVM, Python workers) at
random moments after they started streaming. A last driver drains; the stored count must be exactly
N and the sum exactly N(N+1)/2. Harness pattern: ``faults.py`` (``kill_group``).
"""

from __future__ import annotations

import os
import queue
import random
import subprocess
import sys
import threading
import time
import uuid

import pytest

from dstream_exactly_once.stores import open_store

from .faults import ROOT, kill_group

pytestmark = pytest.mark.slow

N = 20_000
MODULE = "tests.integration.file_faults_proc"


def _spawn(*args: str, stderr_path: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), "PYTHONUNBUFFERED": "1"}
    with open(stderr_path, "ab") as err:
        return subprocess.Popen([sys.executable, "-m", MODULE, *args], stdout=subprocess.PIPE, stderr=err, text=True,
                                cwd=ROOT, env=env, start_new_session=True)


def _lines(proc: subprocess.Popen) -> queue.Queue[str]:
    out: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            out.put(line.strip())
        out.put("<EOF>")

    threading.Thread(target=pump, daemon=True).start()
    return out


def _wait_for(lines: queue.Queue[str], prefix: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            break
        if line.startswith(prefix):
            return line
        if line.startswith(("<EOF>", "OVERCOUNT")):
            raise AssertionError(f"driver ended before {prefix}: {line}")
    raise AssertionError(f"no {prefix} within {timeout}s")


def _store_url(kind, tmp_path, request):
    if kind == "sqlite":
        return f"sqlite:///{tmp_path}/faults.db"
    if kind == "postgres":
        server = request.getfixturevalue("postgres_server")
        return server.url(server.create_database())
    return request.getfixturevalue("redis_server").url


# The SIGKILLs and the writer's pause per 50 lines: every store gets the >= 10 driver kills while the
# writer appends and rotates (its pace keeps it writing across all of them). One driver process runs
# one stream per store, so each SIGKILL (of the whole process group) hits the three at once.
KILLS, PAUSE = 10, 0.15
KINDS = ("sqlite", "postgres", "redis")


def test_every_line_counted_once_across_sigkills_and_rotations(tmp_path, request):
    run = uuid.uuid4().hex[:6]
    targets = [(_store_url(kind, tmp_path, request), f"file-faults-{kind}-{run}") for kind in KINDS]
    store_args = [arg for pair in targets for arg in pair]
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "service.log").touch()
    stderr = str(tmp_path / "children.err")
    rng = random.Random(21)
    writer = _spawn("writer", str(logs), str(N), str(PAUSE), str(N // 8), stderr_path=stderr)
    done_kills = 0
    first_store, first_app, *more = store_args
    try:
        while done_kills < KILLS:
            driver = _spawn("driver", f"{logs}/service.log*", first_store, first_app, str(N), *more,
                            stderr_path=stderr)
            try:
                _wait_for(_lines(driver), "STARTED", 120)
                time.sleep(rng.uniform(0.2, 3.0))  # mid-batch: planning, reading, committing
            finally:
                kill_group(driver)
            done_kills += 1
        assert writer.wait(240) == 0
        final = _spawn("driver", f"{logs}/service.log*", first_store, first_app, str(N), *more, stderr_path=stderr)
        try:
            done = _wait_for(_lines(final), "DONE", 150)
        finally:
            kill_group(final)
    except AssertionError as exc:
        with open(stderr, errors="replace") as f:
            raise AssertionError(f"{exc}\nchildren's stderr (tail):\n{f.read()[-3000:]}") from None
    finally:
        kill_group(writer)
    rotated = sorted(p.name for p in logs.iterdir())
    assert len(rotated) == 8, rotated  # service.log and 7 rotations (4 renames, 3 copytruncates)
    assert done == f"DONE {N} {N * (N + 1) // 2}"
    for url, app in targets:
        with open_store(url, app) as store:
            assert store.get_values("numbers") == {"count": N, "sum": N * (N + 1) // 2}, app
    assert done_kills >= KILLS
