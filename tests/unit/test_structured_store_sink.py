"""The deo-store sink's Spark-free part: options, the row shape, merging, and the commit on SQLite."""

from __future__ import annotations

import os
import pickle

import pytest

from dstream_exactly_once.errors import ConfigurationError, FencedError, OffsetConflictError
from dstream_exactly_once.stores import open_store
from dstream_exactly_once.stores._writes import CommitOutcome, Writes
from dstream_exactly_once.structured._sink_runs import QueryRun, run_of_messages
from dstream_exactly_once.structured._store_sink import (
    SINK_POSITION_KEY,
    StoreSinkOptions,
    check_complete_writes,
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
    with pytest.raises(ConfigurationError, match=r"'epoch' \('1'\) is no longer used: the epoch is taken by the "
                                                 r"query's first commit"):
        StoreSinkOptions.parse({"store": url, "app": "a", "epoch": "1"})
    with pytest.raises(ConfigurationError, match=r"unknown deo sink option\(s\) \['stor'\]; allowed"):
        StoreSinkOptions.parse({"stor": url, "app": "a"})
    with pytest.raises(ConfigurationError, match="'writes_function' must be 'package.module:function'"):
        StoreSinkOptions.parse({"store": url, "app": "a", "writes_function": "mod"})
    with pytest.raises(ConfigurationError, match=r"'new_checkpoint' must be one of \['refuse', 'continue'\], "
                                                 r"got 'maybe'"):
        StoreSinkOptions.parse({"store": url, "app": "a", "new_checkpoint": "maybe"})
    with pytest.raises(ConfigurationError, match="'store' must be a sqlite://"):
        StoreSinkOptions.parse({"store": "mysql://u:hunter2@h/db", "app": "a"})
    with pytest.raises(ConfigurationError) as info:
        StoreSinkOptions.parse({"store": "mysql://u:hunter2@h/db", "app": "a"})
    assert "hunter2" not in str(info.value)
    with pytest.raises(ConfigurationError, match="cannot be imported"):
        store_sink_options(url, "a", writes_function="no_such_module_x:f")
    assert not os.path.exists(tmp_path / "s.db")


def test_app_id_is_the_name_and_app_its_alias(tmp_path):
    url = f"sqlite:///{tmp_path}/s.db"
    assert StoreSinkOptions.parse({"store": url, "app_id": "a"}).app == "a"
    assert StoreSinkOptions.parse({"store": url, "app": "a"}).app == "a"
    assert StoreSinkOptions.parse({"store": url, "APP_ID": "a", "app": "a"}).app == "a"
    with pytest.raises(ConfigurationError, match=r"options 'app_id' 'a' and its alias 'app' 'b' differ"):
        StoreSinkOptions.parse({"store": url, "app_id": "a", "app": "b"})
    with pytest.raises(ConfigurationError, match=r"option 'app_id' is required \(alias 'app'\)"):
        StoreSinkOptions.parse({"store": url})
    assert store_sink_options(url, app="a") == store_sink_options(url, "a")
    assert store_sink_options(url, "a")["app_id"] == "a" and "app" not in store_sink_options(url, "a")
    assert not os.path.exists(tmp_path / "s.db")  # building options opens nothing


def test_password_option_is_merged_and_never_shown():
    opts = StoreSinkOptions.parse({"store": "postgresql://deo@127.0.0.1:5/db", "store.password": "s3cr#t",
                                   "app": "a"})
    assert opts.store == "postgresql://deo:s3cr%23t@127.0.0.1:5/db"
    assert "s3cr" not in repr(opts)


def test_complete_mode_takes_put_rows_only():
    w = rows_to_writes(rows(("n", "a", "put", 3)), complete=True)
    assert w.puts == {("n", "a"): "3"}
    for op in ("incr", "row"):
        with pytest.raises(ConfigurationError, match=rf"op '{op}' in output mode 'complete' is refused.*would add it "
                                                     rf"again at every batch.*'put' only.*nothing was written"):
            rows_to_writes(rows(("n", "a", "put", 3), ("n", "b", op, 1)), complete=True)
    check_complete_writes(Writes().put("n", "k", 1), "t")
    with pytest.raises(ConfigurationError, match=r"writes_function 'm:f': op 'incr' in output mode 'complete'"):
        check_complete_writes(Writes().incr("n", "k", 1), "writes_function 'm:f'")


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
    first, second, other = QueryRun("q1", "r1"), QueryRun("q1", "r2"), QueryRun("q2", "r3")
    part = Writes().incr("n", "k", 5)
    assert commit_batch(opts, [part, part], 0, first) is CommitOutcome.APPLIED
    assert commit_batch(opts, [part], 0, first) is CommitOutcome.REPLAYED  # Spark replays batch 0 after a crash
    assert commit_batch(opts, [part], 1, first) is CommitOutcome.APPLIED
    with open_store(url, "q") as s:
        assert s.get_value("n", "k") == 15
        assert s.load_positions()[SINK_POSITION_KEY].offset == 2
    assert commit_batch(opts, [part], 2, second) is CommitOutcome.APPLIED  # the query started again
    with pytest.raises(FencedError):
        commit_batch(opts, [part], 3, first)  # the zombie of the first start
    with pytest.raises(OffsetConflictError, match="batch 0 comes from query q2, a new checkpoint.*nothing was written"):
        commit_batch(opts, [part], 0, other)
    with open_store(url, "q") as s:
        assert s.get_value("n", "k") == 20


def test_one_committed_batch_does_not_pass_a_new_checkpoint_off_as_a_replay(tmp_path):
    url = f"sqlite:///{tmp_path}/s.db"
    opts = StoreSinkOptions.parse(store_sink_options(url, "q"))
    assert commit_batch(opts, [Writes().incr("n", "k", 1)], 0, QueryRun("q1", "r1")) is CommitOutcome.APPLIED
    with pytest.raises(OffsetConflictError, match="batch 0 comes from query q2"):
        commit_batch(opts, [Writes().incr("n", "k", 1)], 0, QueryRun("q2", "r2"))


def test_messages_of_two_runs_are_refused():
    with pytest.raises(ConfigurationError, match=r"commit messages name 2 query runs"):
        run_of_messages([QueryRun("q", "a"), QueryRun("q", "b")], "deo-store app x batch 3")
    assert run_of_messages([QueryRun("q", "a")] * 3, "w") == QueryRun("q", "a")


def test_task_run_outside_a_streaming_task_is_refused():
    from dstream_exactly_once.structured._sink_runs import task_run

    with pytest.raises(ConfigurationError, match=r"deo-store app x: Spark gave the task no streaming query id"):
        task_run("deo-store app x")
