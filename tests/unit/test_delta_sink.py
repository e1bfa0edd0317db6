"""The Delta sink's protocol on a real ``deltalake`` table and a real SQLite store (Spark replaced by a
local stand-in that runs each partition's function in this process)."""

from __future__ import annotations

import os
from typing import Any, Callable, Iterable, List

import deltalake  # the delta extra, part of the test extra
import pyarrow as pa  # noqa: E402
import pytest

from dstream_exactly_once.errors import (  # noqa: E402
    ConfigurationError,
    FencedError,
    RowRejectedError,
    SinkError,
)
from dstream_exactly_once.kafka._offsets import OffsetRange  # noqa: E402
from dstream_exactly_once.sinks.delta import DeltaSink  # noqa: E402
from dstream_exactly_once.sinks.delta._log import last_committed_batch, unreferenced_files  # noqa: E402
from dstream_exactly_once.stores import PlannedBatch, Writes, open_store  # noqa: E402

SCHEMA = pa.schema([("key", pa.string()), ("n", pa.int64())])


class LocalRDD:
    """The part of an RDD the sink uses, with partitions run here."""

    def __init__(self, partitions: List[List[Any]]) -> None:
        self.partitions = partitions

    def mapPartitionsWithIndex(self, f: Callable[[int, Iterable[Any]], Iterable[Any]]) -> LocalRDD:  # noqa: N802
        return LocalRDD([list(f(i, iter(p))) for i, p in enumerate(self.partitions)])

    def collect(self) -> List[Any]:
        return [x for p in self.partitions for x in p]


def batch(batch_id: int, start: int, end: int) -> PlannedBatch:
    return PlannedBatch(batch_id, 1_700_000_000_000 + batch_id, (OffsetRange("events", 0, start, end),))


def rows(start: int, end: int) -> LocalRDD:
    half = (start + end) // 2
    return LocalRDD([[{"key": f"k{i % 3}", "n": i} for i in range(start, half)],
                     [(f"k{i % 3}", i) for i in range(half, end)]])


@pytest.fixture
def store(tmp_path):
    with open_store(f"sqlite:///{tmp_path}/state.db", "orders") as s:
        yield s


def run_batch(sink: DeltaSink, store: Any, epoch: int, b: PlannedBatch, rdd: LocalRDD) -> Any:
    store.log_batch(epoch, b)
    writes = sink.write_batch(store, epoch, b, rdd)
    return store.commit(epoch, b, writes)


def table_ns(uri: str) -> List[int]:
    return sorted(deltalake.DeltaTable(uri).to_pyarrow_table().column("n").to_pylist())


def data_files(uri: str) -> List[str]:
    return sorted(os.path.relpath(os.path.join(d, f), uri) for d, _, fs in os.walk(uri) for f in fs
                  if f.endswith(".parquet"))


def test_batches_land_once_with_their_transaction_and_positions(tmp_path, store):
    uri = str(tmp_path / "table")
    sink = DeltaSink(uri, schema=SCHEMA)
    epoch = store.start_epoch()
    run_batch(sink, store, epoch, batch(0, 0, 10), rows(0, 10))
    run_batch(sink, store, epoch, batch(1, 10, 16), rows(10, 16))
    table = deltalake.DeltaTable(uri)
    assert table_ns(uri) == list(range(16))
    assert table.transaction_version("orders") == 1
    last = last_committed_batch(uri, "orders")
    assert last is not None and last["batch_id"] == 1 and last["rows"] == 6
    assert last["positions"] == [{"partition": "events/0", "start": 10, "end": 16}]
    record = store.get_value("__delta__", sink.record_key("orders"))
    assert record["state"] == "committed" and record["batch"] == 1 and record["rows"] == 6
    assert record["version"] == last["version"] == table.version() == 1
    assert unreferenced_files(uri) == []


def test_a_replay_after_the_table_commit_writes_nothing(tmp_path, store):
    uri = str(tmp_path / "table")
    sink = DeltaSink(uri, schema=SCHEMA)
    epoch = store.start_epoch()
    b = batch(0, 0, 10)
    store.log_batch(epoch, b)
    sink.write_batch(store, epoch, b, rows(0, 10))  # the driver dies before the store commit
    files = data_files(uri)
    epoch2 = store.start_epoch()
    writes = sink.write_batch(store, epoch2, b, rows(0, 10))
    store.commit(epoch2, b, writes)
    assert table_ns(uri) == list(range(10)) and data_files(uri) == files
    assert store.get_value("__delta__", sink.record_key("orders"))["version"] is None


def test_a_crash_before_the_table_commit_leaves_only_unreferenced_files(tmp_path, store, monkeypatch):
    uri = str(tmp_path / "table")
    sink = DeltaSink(uri, schema=SCHEMA)
    epoch = store.start_epoch()
    run_batch(sink, store, epoch, batch(0, 0, 4), rows(0, 4))
    b = batch(1, 4, 10)
    store.log_batch(epoch, b)

    def crash(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt("the driver dies")

    monkeypatch.setattr(sink.target, "commit", crash)
    with pytest.raises(KeyboardInterrupt):
        sink.write_batch(store, epoch, b, rows(4, 10))
    monkeypatch.undo()
    orphans = unreferenced_files(uri)
    assert len(orphans) == 2 and table_ns(uri) == list(range(4))
    assert store.get_value("__delta__", sink.record_key("orders"))["state"] == "pending"
    epoch2 = store.start_epoch()
    store.commit(epoch2, b, sink.write_batch(store, epoch2, b, rows(4, 10)))
    assert table_ns(uri) == list(range(10))
    assert [f.path for f in unreferenced_files(uri)] == [f.path for f in orphans]


def test_a_fenced_driver_stops_before_the_table(tmp_path, store):
    uri = str(tmp_path / "table")
    sink = DeltaSink(uri, schema=SCHEMA)
    old = store.start_epoch()
    b = batch(0, 0, 10)
    store.log_batch(old, b)
    store.start_epoch()
    with pytest.raises(FencedError):
        sink.write_batch(store, old, b, rows(0, 10))
    assert not deltalake.DeltaTable.is_deltatable(uri)


def test_a_concurrent_commit_of_the_same_batch_counts_once(tmp_path, store):
    uri = str(tmp_path / "table")
    sink = DeltaSink(uri, schema=SCHEMA)
    epoch = store.start_epoch()
    run_batch(sink, store, epoch, batch(0, 0, 2), rows(0, 2))
    b = batch(1, 2, 10)
    store.log_batch(epoch, b)
    stale = sink.target.load()  # an older driver read the table before the batch was committed
    sink.write_batch(store, epoch, b, rows(2, 10))
    sink.target.latest = lambda: stale  # type: ignore[method-assign]  # the older driver's snapshot
    writes = sink.write_batch(store, epoch, b, rows(2, 10))  # loses the conflict, then finds the batch
    assert stale.version() == 0  # the attempt committed against the snapshot from before batch 1
    store.commit(epoch, b, writes)
    assert table_ns(uri) == list(range(10))


def test_a_table_of_another_application_is_not_taken_for_a_replay(tmp_path):
    uri = str(tmp_path / "table")
    with open_store(f"sqlite:///{tmp_path}/one.db", "orders") as one:
        run_batch(DeltaSink(uri, schema=SCHEMA), one, one.start_epoch(), batch(0, 0, 3), rows(0, 3))
    with open_store(f"sqlite:///{tmp_path}/two.db", "orders") as two:
        epoch = two.start_epoch()
        b = batch(0, 0, 3)
        two.log_batch(epoch, b)
        with pytest.raises(ConfigurationError, match="another application writes under the same transaction id"):
            DeltaSink(uri).write_batch(two, epoch, b, rows(0, 3))
    assert table_ns(uri) == [0, 1, 2]


def test_the_schema_is_checked_against_the_table_before_anything_is_written(tmp_path, store):
    uri = str(tmp_path / "table")
    run_batch(DeltaSink(uri, schema=SCHEMA), store, store.start_epoch(), batch(0, 0, 2), rows(0, 2))
    before = data_files(uri)
    bad = pa.schema([("key", pa.string()), ("n", pa.string())])
    with pytest.raises(ConfigurationError, match=r"column 'n' has type string but the table's column has type int64"):
        DeltaSink(uri, schema=bad).check()
    with pytest.raises(ConfigurationError, match=r"lacks the table's column\(s\) n \(int64\)"):
        DeltaSink(uri, schema=pa.schema([("key", pa.string())])).check()
    with pytest.raises(ConfigurationError, match="partitioned by"):
        DeltaSink(uri, partition_by=["key"]).check()
    with pytest.raises(ConfigurationError, match="does not exist; pass schema="):
        DeltaSink(str(tmp_path / "none")).check()
    assert data_files(uri) == before and not (tmp_path / "none").exists()


def test_a_row_that_does_not_fit_names_the_column_and_writes_no_file(tmp_path, store):
    uri = str(tmp_path / "table")
    sink = DeltaSink(uri, schema=SCHEMA)
    epoch = store.start_epoch()
    b = batch(0, 0, 2)
    store.log_batch(epoch, b)
    with pytest.raises(RowRejectedError, match=r"column 'n' got a value of type str .* type int64"):
        sink.write_batch(store, epoch, b, LocalRDD([[{"key": "a", "n": "x"}]]))
    with pytest.raises(RowRejectedError, match="3 values does not fit the table's 2 columns"):
        sink.write_batch(store, epoch, b, LocalRDD([[("a", 1, 2)]]))
    assert not (tmp_path / "table").exists() or data_files(uri) == []


def test_a_partitioned_table_gets_one_file_per_partition_value(tmp_path, store):
    uri = str(tmp_path / "table")
    sink = DeltaSink(uri, schema=SCHEMA, partition_by=["key"])
    epoch = store.start_epoch()
    run_batch(sink, store, epoch, batch(0, 0, 9), LocalRDD([[{"key": k, "n": i} for i, k in
                                                              enumerate(["a b", "a/b", None] * 3)]]))
    table = deltalake.DeltaTable(uri)
    assert table.metadata().partition_columns == ["key"]
    got = sorted(zip(*[table.to_pyarrow_table().column(c).to_pylist() for c in ("key", "n")], strict=True),
                 key=lambda kv: kv[1])
    assert got == [(k, i) for i, k in enumerate(["a b", "a/b", None] * 3)]
    assert len(data_files(uri)) == 3 and unreferenced_files(uri) == []


def test_bad_settings_are_refused_at_construction():
    with pytest.raises(ConfigurationError, match="table_uri"):
        DeltaSink("")
    with pytest.raises(ConfigurationError, match="partition column 'nope'"):
        DeltaSink("/tmp/x", schema=SCHEMA, partition_by=["nope"])
    with pytest.raises(ConfigurationError, match="schema must be a pyarrow.Schema"):
        DeltaSink("/tmp/x", schema={"n": "int"})  # type: ignore[arg-type]
    assert issubclass(RowRejectedError, SinkError) and not RowRejectedError.retriable
    assert Writes  # the store's writes type is what write_batch returns


def test_a_lost_concurrent_commit_is_a_table_conflict_error(tmp_path, store):
    from dstream_exactly_once.errors import TableConflictError

    uri = str(tmp_path / "table")
    sink = DeltaSink(uri, schema=SCHEMA)
    run_batch(sink, store, store.start_epoch(), batch(0, 0, 2), rows(0, 2))
    stale = sink.target.load()
    sink.target.commit(sink.target.load(), [], SCHEMA, [], "orders", 1, {"dstreamExactlyOnce": "{}"})
    with pytest.raises(TableConflictError, match="lost to a concurrent commit") as info:
        sink.target.commit(stale, [], SCHEMA, [], "orders", 1, {"dstreamExactlyOnce": "{}"})
    assert info.value.retriable and "batch 1" in str(info.value)


# ---------------------------------------------------------------- merge by key (upsert)
def keyed(pairs: List[tuple]) -> LocalRDD:
    """Two tasks' (key, n) rows, in batch order: the first half of ``pairs`` in task 0."""
    half = len(pairs) // 2
    return LocalRDD([[{"key": k, "n": n} for k, n in pairs[:half]], [(k, n) for k, n in pairs[half:]]])


def table_rows(uri: str) -> dict:
    t = deltalake.DeltaTable(uri).to_pyarrow_table()
    keys, ns = t.column("key").to_pylist(), t.column("n").to_pylist()
    assert len(set(keys)) == len(keys), keys  # one row per key
    return dict(zip(keys, ns, strict=True))


def test_merge_mode_upserts_each_key_once_keeping_its_last_row_of_the_batch(tmp_path, store):
    uri = str(tmp_path / "table")
    sink = DeltaSink(uri, schema=SCHEMA, merge_keys=["key"])
    epoch = store.start_epoch()
    run_batch(sink, store, epoch, batch(0, 0, 4), keyed([("a", 1), ("b", 2), ("a", 3), ("c", 4)]))
    assert table_rows(uri) == {"a": 3, "b": 2, "c": 4}  # the batch's last row of "a"
    run_batch(sink, store, epoch, batch(1, 4, 7), keyed([("b", 20), ("d", 5), ("b", 21)]))
    assert table_rows(uri) == {"a": 3, "b": 21, "c": 4, "d": 5}
    table = deltalake.DeltaTable(uri)
    assert table.transaction_version("orders") == 1
    record = store.get_value("__delta__", sink.record_key("orders"))
    assert record["state"] == "committed" and record["version"] == table.version() and record["rows"] == 2


def test_merge_mode_replay_after_the_table_commit_changes_nothing(tmp_path, store):
    uri = str(tmp_path / "table")
    sink = DeltaSink(uri, schema=SCHEMA, merge_keys=["key"])
    epoch = store.start_epoch()
    run_batch(sink, store, epoch, batch(0, 0, 2), keyed([("a", 1), ("b", 2)]))
    b = batch(1, 2, 4)
    store.log_batch(epoch, b)
    sink.write_batch(store, epoch, b, keyed([("a", 10), ("c", 3)]))  # the driver dies before the store commit
    version = deltalake.DeltaTable(uri).version()
    epoch2 = store.start_epoch()
    store.commit(epoch2, b, sink.write_batch(store, epoch2, b, keyed([("a", 99), ("c", 99)])))
    assert table_rows(uri) == {"a": 10, "b": 2, "c": 3} and deltalake.DeltaTable(uri).version() == version


def test_merge_keys_are_checked_before_anything_is_written(tmp_path, store):
    uri = str(tmp_path / "table")
    with pytest.raises(ConfigurationError, match=r"merge_keys \['id'\] are not columns.*key, n"):
        DeltaSink(uri, schema=SCHEMA, merge_keys=["id"])
    with pytest.raises(ConfigurationError, match="merge_keys must be a list of column names"):
        DeltaSink(uri, schema=SCHEMA, merge_keys="key")
    with pytest.raises(ConfigurationError, match="name a column twice"):
        DeltaSink(uri, schema=SCHEMA, merge_keys=["key", "key"])
    assert not os.path.exists(uri)


# ---------------------------------------------------------------- where the stream stands, from the table alone
def two_partitions(batch_id: int, ends: tuple, starts: tuple) -> PlannedBatch:
    ranges = tuple(OffsetRange("events", p, s, e) for p, (s, e) in enumerate(zip(starts, ends, strict=True)))
    return PlannedBatch(batch_id, 1_700_000_000_000 + batch_id, ranges)


def test_a_new_application_starts_from_the_positions_in_the_table(tmp_path, store):
    from dstream_exactly_once import TopicAndPartition
    from dstream_exactly_once.sinks.delta import table_offsets, table_positions

    uri = str(tmp_path / "table")
    sink = DeltaSink(uri, schema=SCHEMA)
    epoch = store.start_epoch()
    run_batch(sink, store, epoch, two_partitions(0, (3, 2), (0, 0)), rows(0, 5))
    run_batch(sink, store, epoch, two_partitions(1, (5, 7), (3, 2)), rows(5, 12))
    assert table_offsets(uri, "orders") == store.load_offsets() == {TopicAndPartition("events", 0): 5,
                                                                      TopicAndPartition("events", 1): 7}
    b = two_partitions(2, (6, 9), (5, 7))  # the table gets batch 2; the store is lost before its commit
    store.log_batch(epoch, b)
    sink.write_batch(store, epoch, b, rows(12, 15))
    assert table_positions(uri) == {"events/0": 6, "events/1": 9}  # the table is ahead of the lost store
    offsets = table_offsets(uri, "orders")
    with open_store(f"sqlite:///{tmp_path}/new.db", "orders-2") as new:  # a new application from them
        first = PlannedBatch(0, 1_700_000_000_100, tuple(OffsetRange(tp.topic, tp.partition, o, o + 1)
                                                         for tp, o in sorted(offsets.items())))
        run_batch(DeltaSink(uri, schema=SCHEMA), new, new.start_epoch(), first, rows(15, 17))
        assert new.load_offsets() == {TopicAndPartition("events", 0): 7, TopicAndPartition("events", 1): 10}
    assert table_ns(uri) == list(range(17))  # nothing lost, nothing twice
    assert table_offsets(uri, "orders-2") == {TopicAndPartition("events", 0): 7, TopicAndPartition("events", 1): 10}


def test_positions_are_refused_when_the_table_has_none(tmp_path, store):
    import json

    from dstream_exactly_once.sinks.delta import table_offsets, table_positions

    uri = str(tmp_path / "table")
    sink = DeltaSink(uri, schema=SCHEMA)
    run_batch(sink, store, store.start_epoch(), batch(0, 0, 2), rows(0, 2))
    with pytest.raises(ConfigurationError, match="no batch of application transaction 'other'"):
        table_offsets(uri, "other")

    def commit(app: str, positions: list) -> None:
        meta = {"app_id": app, "batch_id": 0, "rows": 0, "positions": positions}
        sink.target.commit(sink.target.load(), [], SCHEMA, [], app, 0, {"dstreamExactlyOnce": json.dumps(meta)})

    commit("query", [])  # a deo-delta query's commit: its positions are in Spark's checkpoint
    with pytest.raises(ConfigurationError, match="records no input positions"):
        table_positions(uri, "query")
    commit("files", [{"partition": "/var/log/app.log", "start": 0, "end": 10}])
    assert table_positions(uri, "files") == {"/var/log/app.log": 10}
    with pytest.raises(ConfigurationError, match="'/var/log/app.log' of the sink's newest batch is not a Kafka"):
        table_offsets(uri, "files")


def test_only_columns_whose_values_repeat_are_dictionary_encoded(tmp_path):
    import pyarrow.parquet as pq

    from dstream_exactly_once.sinks.delta._files import write_files

    data = pa.table({"id": pa.array(range(5000), pa.int64()), "key": [f"k{i % 10}" for i in range(5000)]})
    (add,) = write_files(str(tmp_path), data, [], 0)
    meta = pq.ParquetFile(str(tmp_path / add.path)).metadata.row_group(0)
    encodings = {meta.column(i).path_in_schema: set(meta.column(i).encodings) for i in range(meta.num_columns)}
    assert any("DICTIONARY" in e for e in encodings["key"]) and not any("DICTIONARY" in e for e in encodings["id"])
    assert pq.read_table(str(tmp_path / add.path)).equals(data)
