"""The Delta sink under SIGKILL, on SQLite, PostgreSQL and Redis: a DStream app (Kafka → ``DeltaSink``) whose
driver is killed between the batch's file writes and its Delta commit, then right after the Delta
commit (before the store's commit); the restarted driver finishes, and the table read back with
``deltalake`` holds every record exactly once, each batch in exactly one commit. Also: the crash
left unreferenced files only, which ``dstream-eo delta orphans --apply`` removes without changing
what the table reads. On Redis the app merges by key (``merge_keys``: one merge commit a batch, no
file before it), on SQLite and PostgreSQL it appends: the store's part of the protocol is the same.

The ``deo-delta`` Structured Streaming query (Spark's Kafka source) under SIGKILL before a batch's
Delta commit and after it: on SQLite both, on PostgreSQL before it, on Redis (merging by key) after it.
One driver runs the queries of the three stores, so a kill hits each store at its own point and the
seven runs become three. Few kills and small topics keep the file's time down."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections import Counter
from typing import List

import pytest

from dstream_exactly_once.sinks.delta import table_offsets
from dstream_exactly_once.stores import open_store

from ..helpers import run_cli as cli
from .faults import ROOT, kill_group

N = 600  # 3 partitions at 60 records a partition a batch: about 4 batches
N_QUERY = 300  # 60 offsets a trigger: 5 micro-batches
pytestmark = pytest.mark.slow


def batch_commits(table: str, app: str) -> List[int]:
    """The batch ids of the table's commits the sink made under ``app``, oldest first."""
    import deltalake

    from dstream_exactly_once.sinks.delta._table import METADATA_KEY

    found = [json.loads(h[METADATA_KEY]) for h in deltalake.DeltaTable(table).history() if METADATA_KEY in h]
    return sorted(int(m["batch_id"]) for m in found if m["app_id"] == app)


def run_driver(kafka, topic: str, store: str, app: str, table: str, crash_point: str, crash_at: int,
               mode: str = "append") -> str:
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen([sys.executable, "-m", "tests.integration.delta_dstream_proc", kafka.bootstrap, topic,
                             store, app, table, crash_point, str(crash_at), mode], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, cwd=ROOT, env=env, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=240)
    finally:
        kill_group(proc)
    if crash_point == "none":
        assert proc.returncode == 0 and "DONE" in out, out[-4000:]
    else:
        assert proc.returncode == -signal.SIGKILL and "CRASH:" in out, out[-4000:]
    return out


@pytest.mark.parametrize("store_kind,mode", [("sqlite", "append"), ("postgres", "append"), ("redis", "merge")])
def test_dstream_to_delta_exactly_once_under_sigkill(kafka, tmp_path, request, capsys, store_kind, mode):
    import deltalake

    store = {"sqlite": lambda: f"sqlite:///{tmp_path}/delta.db",
             "postgres": lambda: request.getfixturevalue("postgres_url"),
             "redis": lambda: request.getfixturevalue("redis_url")}[store_kind]()
    topic = "delta-" + uuid.uuid4().hex[:8]
    app = "delta-" + uuid.uuid4().hex[:6]
    table = str(tmp_path / "table")
    kafka.create_topic(topic, 3)
    kafka.produce(topic, range(1, N + 1), partitions=3)

    run_driver(kafka, topic, store, app, table, "files", 2, mode)  # batch 1's files written, no table commit
    with open_store(store, app) as s:
        assert s.get_value("__delta__", f"{app}@{table}")["state"] == "pending"
    code, out, _ = cli(capsys, "delta", "orphans", "--table", table, "--min-age", "0", "--json")
    orphans = json.loads(out)["unreferenced"]
    if mode == "append":
        assert code == 0 and orphans, "the crash before the table commit left the batch's files unreferenced"
    else:
        assert code == 0 and orphans == [], "merge mode writes no file before its merge commit"
    run_driver(kafka, topic, store, app, table, "table", 2, mode)  # the table holds a batch the store has not
    run_driver(kafka, topic, store, app, table, "none", 0, mode)

    dt = deltalake.DeltaTable(table)
    rows = dt.to_pyarrow_table()
    values = Counter(rows.column("v").to_pylist())
    assert sum(values.values()) == N and set(values) == set(range(1, N + 1)) and max(values.values()) == 1
    assert all(b == v % 3 for v, b in zip(rows.column("v").to_pylist(), rows.column("bucket").to_pylist(),
                                          strict=True))
    with open_store(store, app) as s:
        last = s.last_committed_batch_id()
        assert s.pending_batches() == [] and dt.transaction_version(app) == last
        assert table_offsets(table, app) == s.load_offsets()  # the table alone says where the stream stands
    assert batch_commits(table, app) == list(range(last + 1))  # each batch in exactly one commit
    code, out, _ = cli(capsys, "delta", "status", "--table", table, "--json")
    assert json.loads(out)["last_batch"]["batch_id"] == last
    code, out, _ = cli(capsys, "delta", "orphans", "--table", table, "--min-age", "0", "--apply", "--json")
    removed = {f["path"] for f in json.loads(out)["unreferenced"] if f["removed"]}
    assert {f["path"] for f in orphans} <= removed
    assert sorted(deltalake.DeltaTable(table).to_pyarrow_table().column("v").to_pylist()) == list(range(1, N + 1))


def run_query(kafka, topic: str, barrier: str, queries) -> str:
    """One driver running a query per store (``queries``: (store, app, table, checkpoint, mode, crash))."""
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen([sys.executable, "-m", "tests.integration.delta_structured_proc", kafka.bootstrap, topic,
                             str(N_QUERY), barrier, *[part for query in queries for part in query]],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT, env=env,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=360)
    finally:
        kill_group(proc)
    if all(crash == "none" for *_, crash in queries):
        assert proc.returncode == 0 and "DONE" in out, out[-4000:]
    else:
        assert proc.returncode == -signal.SIGKILL, out[-4000:]
        crashing = sorted(app for _, app, *_, crash in queries if crash != "none")
        assert sorted(os.listdir(barrier)) == crashing, "every crashing query reached its crash point"
    return out


QUERY_CASES = {  # store kind: (mode, the kills of the runs before the last)
    "sqlite": ("append", [("files", 1), ("table", 3)]),
    "postgres": ("append", [("files", 1)]),
    "redis": ("merge", [("table", 2)]),
}


def test_structured_query_to_delta_exactly_once_under_sigkill(kafka, tmp_path, request, capsys):
    """One driver runs the query of every store whose next kill is due: the run's one SIGKILL comes once
    each of those queries is at its own crash point (run 1: SQLite and PostgreSQL before the Delta
    commit of batch 1, Redis after that of batch 2; run 2: SQLite after that of batch 3); a last run
    of the three queries finishes."""
    import deltalake

    urls = {"sqlite": f"sqlite:///{tmp_path}/ss.db", "postgres": request.getfixturevalue("postgres_url"),
            "redis": request.getfixturevalue("redis_url")}
    topic = "ss-delta-" + uuid.uuid4().hex[:8]
    kafka.create_topic(topic, 2)
    kafka.produce(topic, range(1, N_QUERY + 1), partitions=2)
    setups = {kind: (urls[kind], "ss-delta-" + uuid.uuid4().hex[:6], str(tmp_path / kind / "table"),
                     str(tmp_path / kind / "checkpoint"), QUERY_CASES[kind][0]) for kind in QUERY_CASES}

    runs = max(len(kills) for _, kills in QUERY_CASES.values())
    for run in range(runs):
        due = {kind: kills[run] for kind, (_, kills) in QUERY_CASES.items() if run < len(kills)}
        run_query(kafka, topic, str(tmp_path / f"barrier-{run}"),
                  [(*setups[kind], f"{point}:{at}") for kind, (point, at) in due.items()])
        for kind, (point, at) in due.items():
            store, app, table, _, _ = setups[kind]
            if point == "files" and at == 1:
                assert deltalake.DeltaTable(table).transaction_version(app) == 0  # the crash left batch 0 only
                with open_store(store, app) as s:  # the store named the batch's files before the table commit
                    record = s.get_value("__delta__", f"{app}@{table}")
                code, out, _ = cli(capsys, "delta", "orphans", "--table", table, "--min-age", "0", "--json")
                orphans = {f["path"] for f in json.loads(out)["unreferenced"]}
                assert record["state"] == "pending" and record["batch"] == 1 and record["files"]
                assert set(record["files"]) <= orphans
    run_query(kafka, topic, str(tmp_path / "barrier-last"), [(*setups[kind], "none") for kind in QUERY_CASES])

    for kind, (store, app, table, _, _) in setups.items():
        dt = deltalake.DeltaTable(table)
        values = Counter(dt.to_pyarrow_table().column("v").to_pylist())
        assert sum(values.values()) == N_QUERY and set(values) == set(range(1, N_QUERY + 1)), kind
        assert max(values.values()) == 1, kind
        with open_store(store, app) as s:
            last = s.last_committed_batch_id()
            assert dt.transaction_version(app) == last, kind
        assert batch_commits(table, app) == list(range(last + 1)), kind  # each batch in exactly one commit
