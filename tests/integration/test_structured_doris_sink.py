"""Real Spark queries into the deo-doris sink and the Doris protocol double; the driver SIGKILLed at each
point of the two-phase protocol and restarted from its checkpoint: no label committed twice, none lost.
The store deciding the batches is SQLite at every point, and PostgreSQL and Redis at the decision.

One driver runs the five cases' queries (each its own Doris double, store and checkpoint), so the five
kills take one JVM start and one restart. Each double holds its query at the case's point until the
test released it (the first Stream Load waits; the commit requests wait; the commits' answers wait),
so the one SIGKILL finds every query at its own point."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import uuid
from collections import Counter
from typing import Any, Dict

import pytest

from dstream_exactly_once.stores import open_store
from dstream_exactly_once.structured._store_sink import SINK_POSITION_KEY
from dstream_exactly_once.testing._doris_double import DorisProtocolDouble

from ..helpers import eventually
from .faults import ROOT, kill_group
from .test_file_faults import _store_url

VALUES = 30  # 3 micro-batches of 10


def start(targets):
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    args = [part for target in targets for part in target]
    return subprocess.Popen([sys.executable, "-m", "tests.integration.structured_doris_proc", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT, env=env,
                            start_new_session=True)


class HeldDoris(DorisProtocolDouble):
    """The Doris double holding its query at one point of the protocol until :meth:`reset_faults`:
    ``first_load`` (the first Stream Load waits before Doris begins it: the other task's load is
    pre-committed, the batch undecided), ``commit_request`` (every 2PC request waits before Doris
    sees it: the store decided, the loads stay pre-committed) or ``commit_answer`` (a 2PC commit is
    applied, its answer waits: Doris committed, the sink has not heard)."""

    def __init__(self, hold: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.hold = hold
        self.released = threading.Event()
        self._loads = 0

    def reset_faults(self) -> None:
        super().reset_faults()
        self.released.set()

    def _take_failure(self, kind: str) -> Any:
        if not self.released.is_set():
            if self.hold == "first_load" and kind == "stream_load":
                with self._lock:
                    self._loads += 1
                    first = self._loads == 1
                if first:
                    self.released.wait(900)
            elif self.hold == "commit_request" and kind == "2pc":
                self.released.wait(900)
        return super()._take_failure(kind)

    def _reply(self, h: Any, status: int, doc: Any = None, **kwargs: Any) -> None:  # type: ignore[override]
        if (self.hold == "commit_answer" and getattr(h, "role", "") == "be" and h.path.endswith("_stream_load_2pc")
                and h.headers.get("txn_operation", "").lower() == "commit" and (doc or {}).get("status") == "Success"):
            self.released.wait(900)
        DorisProtocolDouble._reply(h, status, doc, **kwargs)


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
    return lambda: "PRECOMMITTED" in states(doris).values() and decided(store, app) == 0


def crash_after_decision(doris, store, app):
    def point():
        return decided(store, app) >= 1 and "PRECOMMITTED" in states(doris).values()
    return point


def crash_after_commit(doris, store, app):
    return lambda: "VISIBLE" in states(doris).values()


HOLDS = {crash_after_precommit: "first_load", crash_after_decision: "commit_request",
         crash_after_commit: "commit_answer"}
# every point on SQLite; the decision point (the replay reads the store's recorded decision) also on
# PostgreSQL and Redis
CASES = [(crash_after_precommit, "sqlite"), (crash_after_decision, "sqlite"), (crash_after_commit, "sqlite"),
         (crash_after_decision, "postgres"), (crash_after_decision, "redis")]


@pytest.mark.slow
def test_sigkill_at_each_protocol_point_exactly_once(tmp_path, request):
    """Every case at its point at once, one SIGKILL, one restart; then each case's own checks."""
    cases: Dict[str, Dict[str, Any]] = {}
    with contextlib.ExitStack() as stack:
        for point, backend in CASES:
            name = f"{point.__name__}-{backend}"
            base = tmp_path / name
            base.mkdir()
            doris = stack.enter_context(HeldDoris(HOLDS[point], password="doris-pw"))
            store, app = _store_url(backend, base, request), "sd-" + uuid.uuid4().hex[:8]
            cases[name] = {"doris": doris, "store": store, "app": app, "crashed": point(doris, store, app),
                           "target": (doris.fe_url, store, app, str(base / "cp"))}
        targets = [case["target"] for case in cases.values()]
        proc = start(targets)
        try:
            eventually(lambda: all(case["crashed"]() for case in cases.values()),
                       f"the crash points {sorted(cases)}", timeout=480, interval=0.05, proc=proc,
                       detail=lambda: output(proc)[-3000:])
        finally:
            kill_group(proc)
        for case in cases.values():
            case["at_kill"] = states(case["doris"])
            case["doris"].reset_faults()
        proc = start(targets)
        try:
            eventually(lambda: all(len({r[0] for r in case["doris"].rows("db", "t")}) >= VALUES
                                   for case in cases.values()), f"{VALUES} values in each Doris",
                       timeout=600, proc=proc, detail=lambda: output(proc)[-3000:])
        finally:
            kill_group(proc)
        for case in cases.values():
            case["values"] = Counter(int(r[0]) for r in case["doris"].rows("db", "t"))
            case["final"] = states(case["doris"])
    for name, case in cases.items():
        values, final, at_kill = case["values"], case["final"], case["at_kill"]
        assert {v: n for v, n in values.items() if n > 1} == {}, name  # none loaded twice
        assert set(range(VALUES)) <= set(values), name  # none lost
        assert set(values) == set(range(len(values))), name
        held = {label for label, state in at_kill.items() if state != "ABORTED"}
        assert all(final[label] in ("VISIBLE", "ABORTED") for label in held), (name, {k: final[k] for k in held})
        with open_store(case["store"], case["app"]) as s:
            recorded = s.get_values("__doris__")
        visible = {label for label, state in final.items() if state == "VISIBLE"}
        assert visible <= set(recorded) or visible == set(recorded), name  # every committed label was decided
        assert visible >= {label for label in recorded if final.get(label) != "PRECOMMITTED"}, name
