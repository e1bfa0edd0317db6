"""The deo-doris sink's Spark-free part against the Doris protocol double and SQLite: options, labels,
the two-phase protocol, and a replay after a crash at each point of it."""

from __future__ import annotations

import os

import pytest

from dstream_exactly_once.errors import ConfigurationError, OffsetConflictError
from dstream_exactly_once.sinks.doris import DorisStreamLoadClient
from dstream_exactly_once.stores import open_store
from dstream_exactly_once.stores._writes import CommitOutcome
from dstream_exactly_once.structured._doris_sink import (
    DorisSinkOptions,
    abort_batch,
    check_doris_mode,
    commit_doris_batch,
    doris_sink_options,
    load_partition,
)
from dstream_exactly_once.structured._sink_runs import QueryRun
from dstream_exactly_once.testing._doris_double import DorisProtocolDouble

PARTS = {0: [(1, "a"), (2, "b")], 1: [(3, "c")]}


class Crash(BaseException):
    """Stands for a SIGKILL of the driver at one point of the protocol."""


@pytest.fixture
def doris():
    with DorisProtocolDouble(password="pw-secret") as double:
        yield double


@pytest.fixture
def opts(doris, tmp_path):
    options = doris_sink_options(f"sqlite:///{tmp_path}/s.db", "q1", doris.fe_url, "db", "t", password="pw-secret")
    return DorisSinkOptions.parse(options)


RUN = QueryRun("query-1", "run-1")
NEW = QueryRun("query-2", "run-2")  # a new checkpoint on the same application


def run_tasks(opts, batch, parts=PARTS, run=RUN):
    return [load_partition(opts, batch, p, iter(rows), run) for p, rows in parts.items()]


def visible(doris):
    return sorted(doris.rows("db", "t"))


def test_options_name_key_value_and_allowed_and_write_nothing(tmp_path, doris):
    url = f"sqlite:///{tmp_path}/fresh.db"
    with pytest.raises(ConfigurationError, match=r"option 'fe' is required"):
        doris_sink_options(url, "q", "", "db", "t")
    with pytest.raises(ConfigurationError, match=r"unknown deo-doris option\(s\) \['tabel'\]; allowed"):
        DorisSinkOptions.parse({"store": url, "app": "q", "fe": doris.fe_url, "db": "d", "table": "t",
                                "tabel": "x"})
    with pytest.raises(ConfigurationError, match=r"'strict_labels' must be true or false, got 'yes'"):
        doris_sink_options(url, "q", doris.fe_url, "db", "t", strict_labels="yes")
    with pytest.raises(ConfigurationError, match=r"deo-doris options: Doris fe_url must be http\(s\)"):
        doris_sink_options(url, "q", "ftp://fe:1", "db", "t")
    assert not os.path.exists(f"{tmp_path}/fresh.db")


def test_repr_hides_passwords(opts):
    assert "pw-secret" not in repr(opts)


def test_labels_are_the_dstream_sinks_with_the_128_cap(opts):
    assert load_partition(opts, 0, 0, iter([]), RUN).label == "q1_t_0_0"
    long = DorisSinkOptions.parse({**_raw(opts), "app_id": "x" * 150})
    label = load_partition(long, 7, 3, iter([]), RUN).label
    assert len(label) <= 128 and label.endswith("_7_3")


def _raw(opts):
    return {"store": opts.store.store, "app_id": opts.app, **opts.doris}


def test_batch_committed_once(opts, doris):
    msgs = run_tasks(opts, 0)
    assert visible(doris) == []  # pre-committed only
    outcome, done = commit_doris_batch(opts, msgs, 0)
    assert outcome is CommitOutcome.APPLIED and set(done.values()) == {"committed"}
    assert visible(doris) == [("1", "a"), ("2", "b"), ("3", "c")]
    with open_store(opts.store.store, "q1") as s:
        assert {m.label for m in msgs} <= {k for k in s.get_values("__doris__")}


def test_crash_after_precommit_replay_aborts_and_loads_again(opts, doris):
    first = run_tasks(opts, 0)  # the driver dies before commit(): no decision
    again = run_tasks(opts, 0)
    assert {doris.txn_status(m.txn_id) for m in first} == {"ABORTED"}
    commit_doris_batch(opts, again, 0)
    assert visible(doris) == [("1", "a"), ("2", "b"), ("3", "c")]


def test_crash_after_decision_replay_commits_the_recorded_loads(opts, doris, monkeypatch):
    msgs = run_tasks(opts, 0)

    def crash(self, txn):
        raise Crash()

    monkeypatch.setattr(DorisStreamLoadClient, "commit_txn", crash)
    with pytest.raises(Crash):
        commit_doris_batch(opts, msgs, 0)
    monkeypatch.undo()
    assert visible(doris) == []
    assert abort_batch(opts, msgs, 0) == []  # decided: an abort leaves the loads alone
    replay = run_tasks(opts, 0)
    assert [m.txn_id for m in replay] == [None, None] and all(m.finished_before for m in replay)
    outcome, done = commit_doris_batch(opts, replay, 0)
    assert outcome is CommitOutcome.REPLAYED and set(done.values()) == {"committed"}
    assert visible(doris) == [("1", "a"), ("2", "b"), ("3", "c")]


def test_crash_after_commit_replay_loads_nothing(opts, doris):
    commit_doris_batch(opts, run_tasks(opts, 0), 0)
    outcome, done = commit_doris_batch(opts, run_tasks(opts, 0), 0)
    assert outcome is CommitOutcome.REPLAYED and set(done.values()) == {"already_committed"}
    assert visible(doris) == [("1", "a"), ("2", "b"), ("3", "c")]
    commit_doris_batch(opts, run_tasks(opts, 1, {0: [(4, "d")]}), 1)
    assert len(visible(doris)) == 4


def test_abort_of_an_undecided_batch_aborts_its_loads(opts, doris):
    msgs = run_tasks(opts, 0)
    assert sorted(abort_batch(opts, msgs, 0)) == sorted(m.label for m in msgs)
    assert {doris.txn_status(m.txn_id) for m in msgs} == {"ABORTED"}


def test_label_doris_reports_finished_is_not_loaded_twice(opts, doris):
    client = opts.client()
    client.load("q1_t_0_0", [(1, "a"), (2, "b")])
    msg = load_partition(opts, 0, 0, iter(PARTS[0]), RUN)
    assert msg.finished_before and msg.rows == 0
    commit_doris_batch(opts, [msg], 0)
    assert visible(doris) == [("1", "a"), ("2", "b")]


@pytest.mark.parametrize("n", [0, 1, 2, 5])
def test_new_checkpoint_is_refused_before_anything_is_loaded(opts, doris, n):
    for b in range(n):
        commit_doris_batch(opts, run_tasks(opts, b, {0: [(b, "x")]}), b)
    loaded = visible(doris)
    if n == 0:
        commit_doris_batch(opts, run_tasks(opts, 0, run=NEW), 0)
        assert len(visible(doris)) == 3
        return
    with pytest.raises(OffsetConflictError, match=rf"deo-doris app q1 batch 0: batch 0 comes from query query-2, a new "
                                                  rf"checkpoint, but the application's batches up to {n - 1}"):
        run_tasks(opts, 0, run=NEW)
    assert visible(doris) == loaded and "PRECOMMITTED" not in doris.labels("db").values()


@pytest.mark.parametrize("n", [1, 2])
def test_new_checkpoint_continues_under_new_labels(opts, doris, n):
    for b in range(n):
        commit_doris_batch(opts, run_tasks(opts, b, {0: [(b, "x")]}), b)
    cont = DorisSinkOptions.parse({**_raw(opts), "new_checkpoint": "continue"})
    msgs = run_tasks(cont, 0, run=NEW)
    assert [m.label for m in msgs] == [f"q1_t_{n}_0", f"q1_t_{n}_1"]  # the application's batch n, not 0
    outcome, _ = commit_doris_batch(cont, msgs, 0)
    assert outcome is CommitOutcome.APPLIED and len(visible(doris)) == n + 3
    assert commit_doris_batch(cont, run_tasks(cont, 0, run=NEW), 0)[0] is CommitOutcome.REPLAYED


def test_complete_mode_is_refused_at_start():
    check_doris_mode(False)
    with pytest.raises(ConfigurationError, match=r"deo-doris sink accepts output mode 'append' only, got 'complete'"):
        check_doris_mode(True)
