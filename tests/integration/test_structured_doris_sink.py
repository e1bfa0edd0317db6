"""A real Spark query into the deo-doris sink and the Doris protocol double; the driver SIGKILLed at each
point of the two-phase protocol and restarted from its checkpoint: no label committed twice, none lost.
The store deciding the batches is SQLite at every point, and PostgreSQL and Redis at the decision."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections import Counter

import pytest

from dstream_exactly_once.stores import open_store
from dstream_exactly_once.structured._store_sink import SINK_POSITION_KEY
from dstream_exactly_once.testing._doris_double import DorisProtocolDouble

from ..helpers import eventually
from .faults import ROOT, kill_group
from .test_file_faults import _store_url

VALUES = 30  # 3 micro-batches of 10


def start(fe_url, store, app, checkpoint):
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.Popen([sys.executable, "-m", "tests.integration.structured_doris_proc", fe_url, store, app,
                             checkpoint], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
                            env=env, start_new_session=True)


def decided(store, app):
    """The next batch id the store expects (every batch below it is decided)."""
    with open_store(store, app) as s:
        stored = s.load_positions().get(SINK_POSITION_KEY)
    return 0 if stored is None else stored.offset


def states(doris):
    return doris.labels("db")


def output(proc):
    kill_group(proc)
    return proc.stdout.read() if proc.stdout else ""


def crash_after_precommit(doris, store, app):
    doris.fail_next_loads(1)  # one task's load retries after a backoff: the other one waits pre-committed
    return lambda: "PRECOMMITTED" in states(doris).values() and decided(store, app) == 0


def crash_after_decision(doris, store, app):
    doris.fail_next(4, endpoint="2pc")  # the Doris commits retry for seconds after the store decided

    def point():
        return decided(store, app) >= 1 and "PRECOMMITTED" in states(doris).values()
    return point


def crash_after_commit(doris, store, app):
    return lambda: "VISIBLE" in states(doris).values()


# every point on SQLite; the decision point (the replay reads the store's recorded decision) also on
# PostgreSQL and Redis
CASES = [(crash_after_precommit, "sqlite"), (crash_after_decision, "sqlite"), (crash_after_commit, "sqlite"),
         (crash_after_decision, "postgres"), (crash_after_decision, "redis")]


@pytest.mark.slow
@pytest.mark.parametrize(("point", "backend"), CASES, ids=[f"{p.__name__}-{b}" for p, b in CASES])
def test_sigkill_at_each_protocol_point_exactly_once(point, backend, tmp_path, request):
    store, app, checkpoint = _store_url(backend, tmp_path, request), "sd-" + uuid.uuid4().hex[:8], str(tmp_path / "cp")
    with DorisProtocolDouble(password="doris-pw") as doris:
        crashed = point(doris, store, app)
        proc = start(doris.fe_url, store, app, checkpoint)
        try:
            eventually(crashed, f"the crash point {point.__name__}", timeout=480, interval=0.02, proc=proc,
                       detail=lambda: output(proc)[-3000:])
        finally:
            kill_group(proc)
        at_kill = states(doris)
        doris.reset_faults()
        proc = start(doris.fe_url, store, app, checkpoint)
        try:
            eventually(lambda: len({r[0] for r in doris.rows("db", "t")}) >= VALUES, f"{VALUES} values in Doris",
                       timeout=600, proc=proc, detail=lambda: output(proc)[-3000:])
        finally:
            kill_group(proc)
        values = Counter(int(r[0]) for r in doris.rows("db", "t"))
        final = states(doris)
    assert {v: n for v, n in values.items() if n > 1} == {}  # none loaded twice
    assert set(range(VALUES)) <= set(values)  # none lost
    assert set(values) == set(range(len(values)))
    held = {label for label, state in at_kill.items() if state != "ABORTED"}
    assert all(final[label] in ("VISIBLE", "ABORTED") for label in held), {k: final[k] for k in held}
    with open_store(store, app) as s:
        recorded = s.get_values("__doris__")
    visible = {label for label, state in final.items() if state == "VISIBLE"}
    assert visible <= set(recorded) or visible == set(recorded)  # every committed label was decided
    assert visible >= {label for label in recorded if final.get(label) != "PRECOMMITTED"}
