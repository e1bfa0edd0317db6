"""The aof Structured Streaming source under SIGKILL, over rotating logs, into the SQLite store.

A writer process (``file_faults_proc writer``) appends 1..N to ``service.log``, rotating it by
rename and copytruncate, while drivers of an ``aof`` query (``aof_query_proc driver``: foreachBatch
commits count and sum keyed by Spark's batch id) are SIGKILLed as whole process groups at random
moments after they started. A last driver drains from the same checkpoint; the store must hold
exactly N numbers summing to N(N+1)/2.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
import uuid

import pytest

from dstream_exactly_once.stores import open_store

from ..helpers import eventually
from .faults import ROOT, kill_group
from .test_file_faults import _lines, _spawn, _wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

N = 4_000
KILLS = 3


def _aof(*args: str, stderr_path: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), "PYTHONUNBUFFERED": "1"}
    with open(stderr_path, "ab") as err:
        return subprocess.Popen([sys.executable, "-m", "tests.integration.aof_query_proc", *args],
                                stdout=subprocess.PIPE, stderr=err, text=True, cwd=ROOT, env=env,
                                start_new_session=True)


def _count(url: str, app: str) -> int:
    try:
        with open_store(url, app) as store:
            return int(store.get_values("numbers").get("count", 0))
    except Exception:  # noqa: BLE001 - the store is created by the first driver
        return 0


def test_every_line_once_across_sigkills_of_the_aof_query(tmp_path):
    url, app = f"sqlite:///{tmp_path}/aof.db", f"aof-faults-{uuid.uuid4().hex[:6]}"
    logs, checkpoint = tmp_path / "logs", str(tmp_path / "checkpoint")
    logs.mkdir()
    (logs / "service.log").touch()
    stderr = str(tmp_path / "children.err")
    rng = random.Random(31)
    writer = _spawn("writer", str(logs), str(N), "0.3", str(N // 4), stderr_path=stderr)
    try:
        for kill in range(KILLS):
            driver = _aof("driver", f"{logs}/service.log*", checkpoint, url, app, str(N), stderr_path=stderr)
            try:
                _wait_for(_lines(driver), "STARTED", 180)
                if kill == 0:
                    # Spark refuses to restart a query whose first offset-log entry a SIGKILL left half
                    # written (STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY): the first kill waits for a commit
                    eventually(lambda: _count(url, app) > 0, "the aof query's first committed micro-batch", 180)
                time.sleep(rng.uniform(3.0, 10.0))  # a random kill moment: micro-batches run meanwhile
            finally:
                kill_group(driver)
        assert writer.wait(300) == 0
        final = _aof("driver", f"{logs}/service.log*", checkpoint, url, app, str(N), stderr_path=stderr)
        try:
            done = _wait_for(_lines(final), "DONE", 300)
        finally:
            kill_group(final)
    except AssertionError as exc:
        with open(stderr, errors="replace") as f:
            raise AssertionError(f"{exc}\nchildren's stderr (tail):\n{f.read()[-3000:]}") from None
    finally:
        kill_group(writer)
    assert done == f"DONE {N} {N * (N + 1) // 2}"
    with open_store(url, app) as store:
        values = store.get_values("numbers")
    assert (values["count"], values["sum"]) == (N, N * (N + 1) // 2)
    assert len(list(logs.iterdir())) == 4  # service.log and 3 rotations (rename, copytruncate, rename)

