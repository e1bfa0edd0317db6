"""Acceptance: ``readStream.format("aof")`` over rotating logs → ``writeStream.format("deo-store")``, the
driver SIGKILLed 3 times and restarted from its checkpoints; every line counted exactly once on
SQLite, PostgreSQL and Redis.

A writer process (``file_faults_proc writer``) appends the lines 1..N to ``service.log``, rotating it
by rename and copytruncate; the test hands it a share of the lines once each driver
(``aof_query_proc driver``) has started, so every run reads new lines. The driver runs three
queries over the same logs, one per store (its own checkpoint and application id each; line ``i``
→ one ``incr`` of ``seen``/``i``), so one JVM start per kill serves the three stores. Every run is
SIGKILLed as a whole process group once each query reached its kill point of that run; the points
rotate over the stores so each store is killed at each of them once:

- ``mid-batch``: a random moment after Spark committed a micro-batch of this run (planning, reading
  or committing the next one);
- ``before-commit``: the sink's ``commit`` holds before its store transaction, on a batch the store
  has not seen (checked: Spark's offset-log entry written, no commit-log entry, the store's next
  batch id is the held one) — the restart runs the batch again and the store applies it once;
- ``after-commit``: the sink's ``commit`` holds after its store transaction (checked: the store's
  next batch id is past the held one, Spark has no commit-log entry for it) — the restart runs the
  batch again and the store must answer "replayed".

A last driver drains from the same checkpoints; every store must count every line exactly once,
none missing. A sink that applied replayed batch ids again would count the lines of every batch
held at ``after-commit`` twice; a source that re-planned a killed micro-batch differently would miss
or double the lines at the seam.
"""

from __future__ import annotations

import os
import queue
import random
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest

from dstream_exactly_once.stores import open_store
from dstream_exactly_once.structured._store_sink import SINK_POSITION_KEY

from ..helpers import eventually
from .faults import ROOT, kill_group
from .test_file_faults import _lines, _spawn, _wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

N = 4_000
WRITER_PAUSE = "0.2"  # seconds per 50 lines: a run's new lines span several 0.3 s triggers
STORES = ("sqlite", "postgres", "redis")
POINTS = ("mid-batch", "before-commit", "after-commit")
KILLS = 3  # every store meets every point once; each run kills all three queries


def schedule(store: int, kill: int) -> str:
    """The kill point of store number ``store`` in run ``kill`` (0-based): the stores start at
    different points and rotate, so every run kills at every point and each store meets each point
    at least ``KILLS // 3`` times."""
    return POINTS[(store + kill) % len(POINTS)]


def _aof(*args: str, stderr_path: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), "PYTHONUNBUFFERED": "1"}
    with open(stderr_path, "ab") as err:
        return subprocess.Popen([sys.executable, "-m", "tests.integration.aof_query_proc", *args],
                                stdout=subprocess.PIPE, stderr=err, text=True, cwd=ROOT, env=env,
                                start_new_session=True)


def _unread(outputs: List[queue.Queue[str]]) -> List[List[str]]:
    """Each driver's stdout lines nobody waited for (a query started again, a failure), in order."""
    unread: List[List[str]] = []
    for out in outputs:
        lines: List[str] = []
        while True:
            try:
                lines.append(out.get_nowait()[:300])
            except queue.Empty:
                break
        unread.append(lines[-20:])
    return unread


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


def _at_point(point: str, checkpoint: Path, hold: Path, committed: set) -> object:
    """Whether a query reached its kill point of this run (``committed``: its commit-log entries
    before the run)."""
    if point == "mid-batch":
        # also the first kill's constraint: Spark refuses to restart a query whose first offset-log
        # entry a SIGKILL left half written (STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY)
        return _spark_log(checkpoint, "commits") - committed
    return _held(hold)


def test_aof_to_store_sinks_every_line_once_across_sigkills(tmp_path, request):
    urls = {"sqlite": f"sqlite:///{tmp_path}/aof.db", "postgres": request.getfixturevalue("postgres_url"),
            "redis": request.getfixturevalue("redis_url")}
    apps = {store: f"aof-faults-{store}-{uuid.uuid4().hex[:8]}" for store in STORES}
    logs, checkpoints, hold = tmp_path / "logs", tmp_path / "checkpoints", tmp_path / "hold"
    logs.mkdir()
    for app in apps.values():
        (hold / app).mkdir(parents=True)
    (logs / "service.log").touch()
    stderr = str(tmp_path / "children.err")
    args = [f"{logs}/service.log*", str(checkpoints), str(N), str(hold)]
    for store in STORES:
        args += [urls[store], apps[store]]
    rng = random.Random(KILLS)
    release = tmp_path / "release"  # how many lines the writer may have written
    writer = _spawn("writer", str(logs), str(N), WRITER_PAUSE, str(N // 4), str(release), stderr_path=stderr)
    killed: Dict[str, List[Tuple[str, Optional[int]]]] = {store: [] for store in STORES}
    outputs: List[queue.Queue[str]] = []  # each driver's stdout lines not read yet (RESTARTED, FAILED)
    try:
        for kill in range(KILLS):
            points = {store: schedule(i, kill) for i, store in enumerate(STORES)}
            committed = {}
            for store, point in points.items():
                if point == "before-commit":  # armed before the start, for the first batch new to the store
                    (hold / apps[store] / point).write_text(str(_next_batch(urls[store], apps[store])))
                elif point == "after-commit":  # the run's first commit call, a replay or not
                    (hold / apps[store] / point).touch()
                committed[store] = _spark_log(checkpoints / apps[store], "commits")
            driver = _aof("driver", *args, stderr_path=stderr)
            outputs.append(out := _lines(driver))
            try:
                _wait_for(out, "STARTED", 180)
                _release(release, (kill + 1) * N // (KILLS + 1))  # new lines, written while this run reads
                eventually(lambda run=(points, committed): all(
                    _at_point(run[0][s], checkpoints / apps[s], hold / apps[s], run[1][s]) for s in STORES),
                           "every query at its kill point (" + ", ".join(f"{s}: {p}" for s, p in points.items())
                           + ")", 180, interval=0.05, proc=driver)
                for store, point in points.items():
                    if point == "mid-batch":
                        killed[store].append((point, None))
                        continue
                    held, batch = _held(hold / apps[store])
                    assert held == point, (store, held, point)
                    checkpoint = checkpoints / apps[store]
                    assert batch not in _spark_log(checkpoint, "commits"), (store, point, batch)
                    if point == "before-commit":
                        assert batch in _spark_log(checkpoint, "offsets"), (store, point, batch)
                    stored = _next_batch(urls[store], apps[store])
                    killed[store].append((point, batch))
                    assert stored == batch + (point == "after-commit"), (store, point, batch, stored)
                if "mid-batch" in points.values():
                    time.sleep(rng.uniform(0.0, 0.6))
            finally:
                kill_group(driver)
            for app in apps.values():
                for name in (*POINTS[1:], "held"):
                    (hold / app / name).unlink(missing_ok=True)
        final = _aof("driver", *args, stderr_path=stderr)
        outputs.append(out := _lines(final))
        try:
            _release(release, N)
            done = _wait_for(out, "DONE", 300)
        finally:
            kill_group(final)
        assert writer.wait(60) == 0
    except AssertionError as exc:
        with open(stderr, errors="replace") as f:
            raise AssertionError(f"{exc}\nkills so far: {killed}\ndrivers' unread output: {_unread(outputs)}\n"
                                 f"children's stderr (tail):\n{f.read()[-3000:]}") from None
    finally:
        kill_group(writer)
    for i, store in enumerate(STORES):  # every SIGKILL really happened, at the planned point
        assert [p for p, _ in killed[store]] == [schedule(i, kill) for kill in range(KILLS)], store
        assert all(sum(p == point for p, _ in killed[store]) >= KILLS // 3 for point in POINTS), killed[store]
    assert done == "DONE " + " ".join([str(N)] * len(STORES))
    for store in STORES:
        with open_store(urls[store], apps[store]) as opened:
            seen = opened.get_values("seen")
        assert sorted(set(range(1, N + 1)) - {int(k) for k in seen}) == [], store  # none missing
        assert {k: v for k, v in seen.items() if v != 1} == {}, store  # none counted twice
        assert len(seen) == N, store
    assert len(list(logs.iterdir())) == 4  # service.log and 3 rotations (rename, copytruncate, rename)
