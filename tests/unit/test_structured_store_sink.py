"""The deo-store sink's Spark-free part: options, the row shape, merging, and the commit on SQLite."""

from __future__ import annotations

import os
import pickle

import pytest

from dstream_exactly_once.errors import ConfigurationError, FencedError, OffsetConflictError
from dstream_exactly_once.stores import open_store
from dstream_exactly_once.stores.writes import CommitOutcome, Writes
from dstream_exactly_once.structured.store_sink import (
    SINK_POSITION_KEY,
    StoreSinkOptions,
    check_message_size,
    check_row_schema,
    commit_batch,
    merge_writes,
    rows_to_writes,
    store_sink_options,
)


def rows(*items):
    return iter([dict(zip(("namespace", "key", "op", "value"), i, strict=True)) for i in items])


def test_rows_to_writes_row_shape():
    w = rows_to_writes(rows(("n", "a", "incr", 2), ("n", "a", "incr", None), ("n", "b", "put", {"x": 1}),
                            ("r", "", "row", {"v": 1}), ("r", "", "row", {"v": 2})))
    assert dict(w.increments.items()) == {("n", "a"): 3}
    assert w.puts == {("n", "b"): '{"x":1}'}
    assert w.batch_rows == {"r": ['{"v":1}', '{"v":2}']}


def test_rows_to_writes_refuses_unknown_op():
    with pytest.raises(ConfigurationError, match=r"column 'op'.*\['incr', 'put', 'row'\].*'delete'"):
        rows_to_writes(rows(("n", "a", "delete", 1)))


def test_merge_writes_in_order():
    a = Writes().incr("n", "k", 1).put("n", "p", 1).put_batch_rows("r", [1])
    b = Writes().incr("n", "k", 2).put("n", "p", 2).put_batch_rows("r", [2])
    m = merge_writes([a, b])
    assert dict(m.increments.items()) == {("n", "k"): 3}
    assert m.puts[("n", "p")] == "2" and m.batch_rows == {"r": ["1", "2"]}
    assert dict(a.increments.items()) == {("n", "k"): 1}  # the parts are left alone


def test_options_refused_with_key_value_and_allowed(tmp_path):
    url = f"sqlite:///{tmp_path}/s.db"
    with pytest.raises(ConfigurationError, match="'epoch' is required.*store_sink_options"):
        StoreSinkOptions.parse({"store": url, "app": "a"})
    with pytest.raises(ConfigurationError, match=r"'epoch' must be an int >= 1, got '0'"):
        StoreSinkOptions.parse({"store": url, "app": "a", "epoch": "0"})
    with pytest.raises(ConfigurationError, match=r"unknown deo sink option\(s\) \['stor'\]; allowed"):
        StoreSinkOptions.parse({"stor": url, "app": "a", "epoch": "1"})
    with pytest.raises(ConfigurationError, match="'writes_function' must be 'package.module:function'"):
        StoreSinkOptions.parse({"store": url, "app": "a", "epoch": "1", "writes_function": "mod"})
    with pytest.raises(ConfigurationError, match="'store' must be a sqlite://"):
        StoreSinkOptions.parse({"store": "mysql://u:hunter2@h/db", "app": "a", "epoch": "1"})
    with pytest.raises(ConfigurationError) as info:
        StoreSinkOptions.parse({"store": "mysql://u:hunter2@h/db", "app": "a", "epoch": "1"})
    assert "hunter2" not in str(info.value)
    # a refused query start creates no store and takes no epoch
    with pytest.raises(ConfigurationError, match="cannot be imported"):
        store_sink_options(url, "a", writes_function="no_such_module_x:f")
    assert not os.path.exists(tmp_path / "s.db")


def test_password_option_is_merged_and_never_shown():
    opts = StoreSinkOptions.parse({"store": "postgresql://deo@127.0.0.1:5/db", "store.password": "s3cr#t",
                                   "app": "a", "epoch": "3"})
    assert opts.store == "postgresql://deo:s3cr%23t@127.0.0.1:5/db"
    assert "s3cr" not in repr(opts)


def test_schema_needs_row_columns():
    with pytest.raises(ConfigurationError, match=r"missing \['op'\]"):
        check_row_schema(["namespace", "key", "value"])


def test_message_size_bound():
    w = Writes().put("n", "k", "x" * 5000)
    assert pickle.loads(check_message_size(w, 10_000, "t")) == w
    with pytest.raises(ConfigurationError,
                       match=r"partition 3: its writes pickle to \d+ bytes.*max_message_bytes=1024"):
        check_message_size(w, 1024, "batch 7 partition 3")


def test_commit_replay_fence_and_new_checkpoint(tmp_path):
    url = f"sqlite:///{tmp_path}/s.db"
    opts = StoreSinkOptions.parse(store_sink_options(url, "q"))
    part = Writes().incr("n", "k", 5)
    assert commit_batch(opts, [part, part], 0) is CommitOutcome.APPLIED
    assert commit_batch(opts, [part], 0) is CommitOutcome.REPLAYED  # Spark replays batch 0 after a crash
    assert commit_batch(opts, [part], 1) is CommitOutcome.APPLIED
    with open_store(url, "q") as s:
        assert s.get_value("n", "k") == 15
        assert s.load_positions()[SINK_POSITION_KEY].offset == 2
    newer = StoreSinkOptions.parse(store_sink_options(url, "q"))  # a new query start
    with pytest.raises(FencedError):
        commit_batch(opts, [part], 2)  # the zombie query
    with pytest.raises(OffsetConflictError,
                       match="batch 0 does not follow the stored next batch id 2.*nothing was written"):
        commit_batch(newer, [part], 0)  # a new checkpoint against the same application
    assert commit_batch(newer, [part], 2) is CommitOutcome.APPLIED
    with open_store(url, "q") as s:
        assert s.get_value("n", "k") == 20
