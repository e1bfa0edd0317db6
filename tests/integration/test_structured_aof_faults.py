"""Acceptance: ``readStream.format("aof")`` over rotating logs → ``writeStream.format("deo-store")``, the
driver SIGKILLed and restarted from its checkpoint; every line counted exactly once on SQLite,
PostgreSQL and Redis.

A writer process (``file_faults_proc writer``) appends the lines 1..N to ``service.log``, rotating it
by rename and copytruncate; the test hands it a share of the lines once each driver of the query
(``aof_query_proc driver``: line ``i`` → one ``incr`` of ``seen``/``i``) has started, so every run
reads new lines while it is SIGKILLed as a whole process group at one of three kinds of points:

- ``mid-batch``: a random moment after Spark committed a micro-batch of this run (planning, reading
  or committing the next one);
- ``before-commit``: the sink's ``commit`` holds before its store transaction, on a batch the store
  has not seen (checked: Spark's offset-log entry written, no commit-log entry, the store's next
  batch id is the held one) — the restart runs the batch again and the store applies it once;
- ``after-commit``: the sink's ``commit`` holds after its store transaction (checked: the store's
  next batch id is past the held one, Spark has no commit-log entry for it) — the restart runs the
  batch again and the store must answer "replayed".

A last driver drains from the same checkpoint; the store must count every line exactly once, none
missing. A sink that applied replayed batch ids again would count the lines of every batch held at
``after-commit`` twice; a source that re-planned a killed micro-batch differently would miss or
double the lines at the seam.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Optional, Tuple

import pytest

from dstream_exactly_once.stores import open_store
from dstream_exactly_once.structured.store_sink import SINK_POSITION_KEY

from ..helpers import eventually
from .faults import ROOT, kill_group
from .test_file_faults import _lines, _spawn, _wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

N = 2_000
WRITER_PAUSE = "0.2"  # seconds per 50 lines: a run's new lines span several 0.3 s triggers

#: The kill points per store, in order (10 SIGKILLs in all).
SCHEDULES = {
    "sqlite": ("mid-batch", "before-commit", "after-commit", "mid-batch"),
    "postgres": ("before-commit", "after-commit", "mid-batch"),
    "redis": ("after-commit", "before-commit", "mid-batch"),
}


def _aof(*args: str, stderr_path: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), "PYTHONUNBUFFERED": "1"}
    with open(stderr_path, "ab") as err:
        return subprocess.Popen([sys.executable, "-m", "tests.integration.aof_query_proc", *args],
                                stdout=subprocess.PIPE, stderr=err, text=True, cwd=ROOT, env=env,
                                start_new_session=True)


def _next_batch(url: str, app: str) -> int:
    """The next batch id the store expects from the sink (0 before the first commit)."""
    with open_store(url, app) as store:
        stored = store.load_positions().get(SINK_POSITION_KEY)
    return 0 if stored is None else stored.offset


def _spark_log(checkpoint: Path, log: str) -> set:
    """The batch ids of Spark's ``offsets`` or ``commits`` log in ``checkpoint``."""
    folder = checkpoint / log
    return {int(p.name) for p in folder.iterdir() if p.name.isdigit()} if folder.is_dir() else set()


def _release(path: Path, lines: int) -> None:
    """Let the writer append lines up to number ``lines``."""
    path.with_suffix(".tmp").write_text(str(lines))
    os.replace(path.with_suffix(".tmp"), path)


def _held(hold: Path) -> Optional[Tuple[str, int]]:
    try:
        point, batch = (hold / "held").read_text().split()
    except (FileNotFoundError, ValueError):
        return None
    return point, int(batch)


def _store_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if backend == "sqlite":
        return f"sqlite:///{tmp_path}/aof.db"
    return request.getfixturevalue({"postgres": "postgres_url", "redis": "redis_url"}[backend])


@pytest.mark.parametrize("backend", list(SCHEDULES))
def test_aof_to_store_sink_every_line_once_across_sigkills(backend, tmp_path, request):
    url, app = _store_url(backend, tmp_path, request), f"aof-faults-{uuid.uuid4().hex[:8]}"
    logs, checkpoint, hold = tmp_path / "logs", tmp_path / "checkpoint", tmp_path / "hold"
    logs.mkdir()
    hold.mkdir()
    (logs / "service.log").touch()
    stderr = str(tmp_path / "children.err")
    args = (f"{logs}/service.log*", str(checkpoint), url, app, str(N), str(hold))
    rng = random.Random(backend)
    release = tmp_path / "release"  # how many lines the writer may have written
    writer = _spawn("writer", str(logs), str(N), WRITER_PAUSE, str(N // 4), str(release), stderr_path=stderr)
    steps = SCHEDULES[backend]
    killed = []
    try:
        for step, point in enumerate(steps, 1):
            if point == "before-commit":  # armed before the start, for the first batch new to the store
                (hold / point).write_text(str(_next_batch(url, app)))
            elif point == "after-commit":  # the run's first commit call, a replay or not
                (hold / point).touch()
            committed = _spark_log(checkpoint, "commits")
            driver = _aof("driver", *args, stderr_path=stderr)
            try:
                _wait_for(_lines(driver), "STARTED", 180)
                _release(release, step * N // (len(steps) + 1))  # new lines, written while this run reads
                if point == "mid-batch":
                    # also the first kill's constraint: Spark refuses to restart a query whose first
                    # offset-log entry a SIGKILL left half written (STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY)
                    eventually(lambda before=committed: _spark_log(checkpoint, "commits") - before,
                               "a micro-batch committed by this run", 180, interval=0.05, proc=driver)
                    time.sleep(rng.uniform(0.0, 0.6))
                    killed.append((point, None))
                else:
                    held, batch = eventually(lambda: _held(hold), f"the sink's commit held at {point}", 180,
                                             interval=0.05, proc=driver)
                    assert held == point
                    assert batch not in _spark_log(checkpoint, "commits")
                    if point == "before-commit":
                        assert batch in _spark_log(checkpoint, "offsets")
                    stored = _next_batch(url, app)
                    killed.append((point, batch))
                    assert stored == batch + (point == "after-commit"), (point, batch, stored)
            finally:
                kill_group(driver)
            for name in (point, "held"):
                (hold / name).unlink(missing_ok=True)
        final = _aof("driver", *args, stderr_path=stderr)
        try:
            _release(release, N)
            done = _wait_for(_lines(final), "DONE", 300)
        finally:
            kill_group(final)
        assert writer.wait(60) == 0
    except AssertionError as exc:
        with open(stderr, errors="replace") as f:
            raise AssertionError(f"{exc}\nkills so far: {killed}\nchildren's stderr (tail):\n"
                                 f"{f.read()[-3000:]}") from None
    finally:
        kill_group(writer)
    assert [p for p, _ in killed] == list(SCHEDULES[backend])
    assert done == f"DONE {N}"
    with open_store(url, app) as store:
        seen = store.get_values("seen")
    assert sorted(set(range(1, N + 1)) - {int(k) for k in seen}) == []  # none missing
    assert {k: v for k, v in seen.items() if v != 1} == {}  # none counted twice
    assert len(seen) == N
    assert len(list(logs.iterdir())) == 4  # service.log and 3 rotations (rename, copytruncate, rename)
