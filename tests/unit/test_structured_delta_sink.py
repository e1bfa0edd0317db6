"""The ``deo-delta`` sink's options and its protocol, Spark-free (the functions the Data Source classes
call), on a real ``deltalake`` table and a real SQLite store."""

from __future__ import annotations

import deltalake  # the delta extra, part of the test extra
import pyarrow as pa  # noqa: E402
import pytest

from dstream_exactly_once.errors import ConfigurationError, OffsetConflictError  # noqa: E402
from dstream_exactly_once.sinks.delta._log import last_committed_batch, unreferenced_files  # noqa: E402
from dstream_exactly_once.stores import CommitOutcome, open_store  # noqa: E402
from dstream_exactly_once.structured._delta_sink import (  # noqa: E402
    DeltaSinkOptions,
    check_delta_mode,
    commit_delta_batch,
    delta_sink_options,
    write_partition,
)
from dstream_exactly_once.structured._sink_runs import QueryRun  # noqa: E402

SCHEMA = pa.schema([("key", pa.string()), ("n", pa.int64())])
RUN = QueryRun("query-1", "run-1")


def options(tmp_path, **kw):
    return DeltaSinkOptions.parse(delta_sink_options(f"sqlite:///{tmp_path}/state.db", "orders",
                                                     str(tmp_path / "table"), **kw))


def micro_batch(opts, batch_id, start, end, run=RUN, parts=2):
    msgs = [write_partition(opts, SCHEMA, batch_id, p, ({"key": f"k{i}", "n": i} for i in range(start, end)
                                                        if i % parts == p), run) for p in range(parts)]
    return msgs


def ns(opts):
    return sorted(deltalake.DeltaTable(opts.table).to_pyarrow_table().column("n").to_pylist())


def test_batches_commit_once_and_a_replay_writes_nothing(tmp_path):
    opts = options(tmp_path)
    outcome, version = commit_delta_batch(opts, SCHEMA, micro_batch(opts, 0, 0, 6), 0)
    assert outcome is CommitOutcome.APPLIED and version == 0
    commit_delta_batch(opts, SCHEMA, micro_batch(opts, 1, 6, 10), 1)
    assert ns(opts) == list(range(10))
    replay = micro_batch(opts, 1, 6, 10)  # Spark replays batch 1 after the store committed it
    assert all(m.skipped and not m.files for m in replay)
    assert commit_delta_batch(opts, SCHEMA, replay, 1) == (CommitOutcome.REPLAYED, None)
    assert ns(opts) == list(range(10))
    last = last_committed_batch(opts.table, "orders")
    assert last is not None and last["batch_id"] == 1 and last["spark_batch_id"] == 1 and last["rows"] == 4


def test_a_crash_between_the_table_commit_and_the_store_commit(tmp_path, monkeypatch):
    from dstream_exactly_once.structured import _delta_sink as delta_sink

    opts = options(tmp_path)
    commit_delta_batch(opts, SCHEMA, micro_batch(opts, 0, 0, 4), 0)
    msgs = micro_batch(opts, 1, 4, 8)

    def crash(*args, **kwargs):
        raise KeyboardInterrupt("the driver dies after the table commit")

    monkeypatch.setattr(delta_sink, "commit_batch", crash)
    with pytest.raises(KeyboardInterrupt):
        commit_delta_batch(opts, SCHEMA, msgs, 1)
    monkeypatch.undo()
    assert ns(opts) == list(range(8))
    replay = micro_batch(opts, 1, 4, 8)  # the table holds batch 1: the tasks write nothing
    assert all(m.skipped for m in replay)
    assert commit_delta_batch(opts, SCHEMA, replay, 1) == (CommitOutcome.APPLIED, None)
    assert ns(opts) == list(range(8)) and unreferenced_files(opts.table) == []


def test_a_crash_before_the_table_commit_leaves_unreferenced_files(tmp_path):
    opts = options(tmp_path)
    commit_delta_batch(opts, SCHEMA, micro_batch(opts, 0, 0, 4), 0)
    micro_batch(opts, 1, 4, 8)  # the driver dies before commit()
    assert len(unreferenced_files(opts.table)) == 2
    commit_delta_batch(opts, SCHEMA, micro_batch(opts, 1, 4, 8), 1)
    assert ns(opts) == list(range(8)) and len(unreferenced_files(opts.table)) == 2


def test_a_new_checkpoint_is_refused_before_anything_is_written(tmp_path):
    opts = options(tmp_path)
    commit_delta_batch(opts, SCHEMA, micro_batch(opts, 0, 0, 4), 0)
    with pytest.raises(OffsetConflictError):
        micro_batch(opts, 0, 0, 4, run=QueryRun("query-2", "run-9"))
    assert unreferenced_files(opts.table) == []


def test_a_table_ahead_of_the_store_is_refused(tmp_path):
    opts = options(tmp_path)
    commit_delta_batch(opts, SCHEMA, micro_batch(opts, 0, 0, 2), 0)
    commit_delta_batch(opts, SCHEMA, micro_batch(opts, 1, 2, 4), 1)
    other = DeltaSinkOptions.parse(delta_sink_options(f"sqlite:///{tmp_path}/other.db", "orders", opts.table))
    with pytest.raises(ConfigurationError, match="another application writes under the same transaction id"):
        micro_batch(other, 0, 0, 2)


def test_options_are_checked_before_anything_runs(tmp_path):
    url = f"sqlite:///{tmp_path}/state.db"
    assert delta_sink_options(url, "a", "/t", partition_by=["k"], txn_app_id="x") == {
        "store": url, "app_id": "a", "table": "/t", "new_checkpoint": "refuse", "partition_by": "k", "txn_app_id": "x"}
    with pytest.raises(ConfigurationError, match="partition_by"):
        delta_sink_options(url, "a", "/t", partition_by="k")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="without commas"):
        delta_sink_options(url, "a", "/t", partition_by=["a,b"])
    with pytest.raises(ConfigurationError, match="table_uri"):
        delta_sink_options(url, "a", "")
    with pytest.raises(ConfigurationError, match=r"unknown deo-delta option\(s\) \['tabel'\]"):
        DeltaSinkOptions.parse({"store": url, "app_id": "a", "tabel": "/t"})
    with pytest.raises(ConfigurationError, match="'table' is required"):
        DeltaSinkOptions.parse({"store": url, "app_id": "a"})
    with pytest.raises(ConfigurationError, match="append"):
        check_delta_mode(True)
    assert not (tmp_path / "state.db").exists()


def test_the_query_schema_is_checked_against_the_table(tmp_path):
    opts = options(tmp_path)
    opts.check_table(SCHEMA)  # no table yet: fine
    commit_delta_batch(opts, SCHEMA, micro_batch(opts, 0, 0, 2), 0)
    with pytest.raises(ConfigurationError, match="column 'n' has type double but the table's column has type int64"):
        opts.check_table(pa.schema([("key", pa.string()), ("n", pa.float64())]))
    with pytest.raises(ConfigurationError, match="partitioned by"):
        options(tmp_path, partition_by=["key"]).check_table(SCHEMA)


# ---------------------------------------------------------------- merge by key (upsert)
def keyed_batch(opts, batch_id, pairs, run=RUN):
    """Two tasks' (key, n) rows in batch order: the first half of ``pairs`` in partition 0."""
    half = len(pairs) // 2
    return [write_partition(opts, SCHEMA, batch_id, p, ({"key": k, "n": n} for k, n in part), run)
            for p, part in enumerate((pairs[:half], pairs[half:]))]


def table_rows(opts):
    t = deltalake.DeltaTable(opts.table).to_pyarrow_table()
    keys, ns_ = t.column("key").to_pylist(), t.column("n").to_pylist()
    assert len(set(keys)) == len(keys), keys  # one row per key
    return dict(zip(keys, ns_, strict=True))


def test_merge_mode_upserts_each_key_once_in_one_commit_per_batch(tmp_path):
    opts = options(tmp_path, merge_keys=["key"])
    assert opts.merge_keys == ("key",)
    msgs = keyed_batch(opts, 0, [("a", 1), ("b", 2), ("a", 3), ("c", 4)])
    assert all(m.files == () and m.data is not None for m in msgs)  # no file written on the executors
    assert not (tmp_path / "table").exists()
    assert commit_delta_batch(opts, SCHEMA, msgs, 0) == (CommitOutcome.APPLIED, 0)
    assert table_rows(opts) == {"a": 3, "b": 2, "c": 4}  # the batch's last row of "a"
    outcome, version = commit_delta_batch(opts, SCHEMA, keyed_batch(opts, 1, [("b", 20), ("d", 5), ("b", 21)]), 1)
    assert outcome is CommitOutcome.APPLIED and version == 1
    assert table_rows(opts) == {"a": 3, "b": 21, "c": 4, "d": 5}
    table = deltalake.DeltaTable(opts.table)
    assert table.transaction_version("orders") == 1 and table.version() == 1
    assert [h["operation"] for h in table.history()][0] == "MERGE"
    last = last_committed_batch(opts.table, "orders")
    assert last is not None and last["batch_id"] == 1 and last["rows"] == 2
    with open_store(opts.store.store, "orders") as store:
        record = store.get_value("__delta__", f"orders@{opts.table}")
    assert record["state"] == "committed" and record["version"] == 1 and record["rows"] == 2


def test_merge_mode_replay_after_the_table_commit_changes_nothing(tmp_path, monkeypatch):
    from dstream_exactly_once.structured import _delta_sink as delta_sink

    opts = options(tmp_path, merge_keys=["key"])
    commit_delta_batch(opts, SCHEMA, keyed_batch(opts, 0, [("a", 1), ("b", 2)]), 0)
    msgs = keyed_batch(opts, 1, [("a", 10), ("c", 3)])

    def crash(*args, **kwargs):
        raise KeyboardInterrupt("the driver dies after the table commit")

    monkeypatch.setattr(delta_sink, "commit_batch", crash)
    with pytest.raises(KeyboardInterrupt):
        commit_delta_batch(opts, SCHEMA, msgs, 1)
    monkeypatch.undo()
    version = deltalake.DeltaTable(opts.table).version()
    replay = keyed_batch(opts, 1, [("a", 99), ("c", 99)])  # the table holds batch 1: the tasks send nothing
    assert all(m.skipped and m.data is None for m in replay)
    assert commit_delta_batch(opts, SCHEMA, replay, 1) == (CommitOutcome.APPLIED, None)
    assert table_rows(opts) == {"a": 10, "b": 2, "c": 3} and deltalake.DeltaTable(opts.table).version() == version
    assert commit_delta_batch(opts, SCHEMA, keyed_batch(opts, 1, [("a", 7)]), 1) == (CommitOutcome.REPLAYED, None)
    assert table_rows(opts) == {"a": 10, "b": 2, "c": 3} and deltalake.DeltaTable(opts.table).version() == version


def test_complete_mode_needs_merge_keys_and_upserts_the_whole_result(tmp_path):
    check_delta_mode(True, ("key",))  # complete with merge_keys: accepted
    with pytest.raises(ConfigurationError, match="'complete' only with option merge_keys"):
        check_delta_mode(True, ())
    opts = options(tmp_path, merge_keys=["key"])
    commit_delta_batch(opts, SCHEMA, keyed_batch(opts, 0, [("a", 1), ("b", 1)]), 0)  # counts so far
    commit_delta_batch(opts, SCHEMA, keyed_batch(opts, 1, [("a", 2), ("b", 1), ("c", 1)]), 1)  # the whole result
    assert table_rows(opts) == {"a": 2, "b": 1, "c": 1}


def test_merge_keys_are_checked_before_anything_is_written(tmp_path):
    url = f"sqlite:///{tmp_path}/state.db"
    table = str(tmp_path / "table")
    assert delta_sink_options(url, "a", table, merge_keys=["key", "n"])["merge_keys"] == "key,n"
    with pytest.raises(ConfigurationError, match=r"merge_keys \['id'\] are not columns of the batch schema"):
        options(tmp_path, merge_keys=["id"]).check_table(SCHEMA)
    with pytest.raises(ConfigurationError, match="merge_keys.*without commas"):
        delta_sink_options(url, "a", table, merge_keys=["a,b"])
    with pytest.raises(ConfigurationError, match="merge_keys"):
        delta_sink_options(url, "a", table, merge_keys="key")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="'merge_keys' names a column twice"):
        DeltaSinkOptions.parse({"store": url, "app_id": "a", "table": table, "merge_keys": "key, key"})
    assert not (tmp_path / "state.db").exists() and not (tmp_path / "table").exists()


# ---------------------------------------------------------------- the store's decision before the table commit
def crash_at_the_table_commit(monkeypatch):
    from dstream_exactly_once.sinks.delta._table import DeltaTarget

    def crash(*args, **kwargs):
        raise KeyboardInterrupt("the driver dies before the Delta commit")

    monkeypatch.setattr(DeltaTarget, "commit", crash)


def test_the_batch_is_recorded_pending_in_the_store_before_its_table_commit(tmp_path, monkeypatch):
    opts = options(tmp_path)
    commit_delta_batch(opts, SCHEMA, micro_batch(opts, 0, 0, 4), 0)
    msgs = micro_batch(opts, 1, 4, 8)
    crash_at_the_table_commit(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        commit_delta_batch(opts, SCHEMA, msgs, 1)
    monkeypatch.undo()
    with open_store(opts.store.store, "orders") as store:
        record = store.get_value("__delta__", f"orders@{opts.table}")
        assert store.last_committed_batch_id() == 0
    assert record is not None and record["state"] == "pending" and record["batch"] == 1
    assert sorted(record["files"]) == [f.path for f in unreferenced_files(opts.table)] == sorted(
        f.path for m in msgs for f in m.files)
    commit_delta_batch(opts, SCHEMA, micro_batch(opts, 1, 4, 8), 1)  # the restart writes the batch again
    assert ns(opts) == list(range(8))


def test_a_replaced_run_stops_before_the_table(tmp_path, monkeypatch):
    from dstream_exactly_once.errors import FencedError

    opts = options(tmp_path)
    commit_delta_batch(opts, SCHEMA, micro_batch(opts, 0, 0, 4), 0)
    zombie = micro_batch(opts, 1, 4, 8)  # run 1 wrote batch 1's files, then stalled
    crash_at_the_table_commit(monkeypatch)  # a restart (run 2) records batch 1, then dies before the table
    with pytest.raises(KeyboardInterrupt):
        commit_delta_batch(opts, SCHEMA, micro_batch(opts, 1, 4, 8, run=QueryRun("query-1", "run-2")), 1)
    monkeypatch.undo()
    with pytest.raises(FencedError):
        commit_delta_batch(opts, SCHEMA, zombie, 1)
    assert deltalake.DeltaTable(opts.table).transaction_version("orders") == 0 and ns(opts) == list(range(4))
    commit_delta_batch(opts, SCHEMA, micro_batch(opts, 1, 4, 8, run=QueryRun("query-1", "run-3")), 1)
    assert ns(opts) == list(range(8))
