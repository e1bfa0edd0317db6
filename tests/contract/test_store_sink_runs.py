"""The Structured Streaming sinks' run identity on every store: a batch id of another checkpoint is never
taken for a replay, whatever the number of committed batches; the first commit of a start takes the
epoch; building options writes nothing; a store written before runs were recorded stays usable."""

from __future__ import annotations

import json
import os
from typing import Any, Dict

import pytest

from dstream_exactly_once.errors import FencedError, OffsetConflictError
from dstream_exactly_once.stores import open_store
from dstream_exactly_once.stores._writes import CommitOutcome, PlannedBatch, Writes
from dstream_exactly_once.structured._sink_runs import QueryRun
from dstream_exactly_once.structured._store_sink import (
    SINK_POSITION_KEY,
    SinkBatchRange,
    StoreSinkOptions,
    commit_batch,
    store_sink_options,
)

from ..conftest import raw_redis_client
from .fixtures import ContractFixtures

A = QueryRun("query-a", "run-a1")  # the query (checkpoint) that commits first
A2 = QueryRun("query-a", "run-a2")  # the same checkpoint, started again
B = QueryRun("query-b", "run-b1")  # a new checkpoint on the same application

COUNTS = (0, 1, 2, 5)  # committed batches before the new checkpoint starts


def incr(n: int = 1) -> Writes:
    return Writes().incr("counts", "n", n)


def state(url: str, app: str) -> Dict[str, Any]:
    """What a refused commit must leave as it was, read through the store."""
    with open_store(url, app) as s:
        return {"positions": s.load_positions(), "epoch": s.current_epoch(), "committed": s.last_committed_batch_id(),
                "counts": s.get_values("counts")}


class SinkRunsContract(ContractFixtures):
    """Run identity of the sinks' batch marker, on every backend."""

    def opts(self, url: str, app: str, **kw: str) -> StoreSinkOptions:
        return StoreSinkOptions.parse(store_sink_options(url, app, **kw))

    def raw(self, url: str, app: str) -> Any:
        """The backend's bytes or keys where it has a cheap raw form (``None``: compared through reads)."""
        return None

    def commit_n(self, opts: StoreSinkOptions, n: int, run: QueryRun = A) -> None:
        for b in range(n):
            assert commit_batch(opts, [incr()], b, run) is CommitOutcome.APPLIED

    @pytest.mark.parametrize("n", COUNTS)
    def test_new_checkpoint_is_refused_whatever_the_number_of_batches(self, store_url: str, app_id: str,
                                                                      n: int) -> None:
        opts = self.opts(store_url, app_id)
        self.commit_n(opts, n)
        if n == 0:
            assert commit_batch(opts, [incr()], 0, B) is CommitOutcome.APPLIED  # nothing stored: a first run
            return
        before, raw = state(store_url, app_id), self.raw(store_url, app_id)
        with pytest.raises(OffsetConflictError, match=rf"batch 0 comes from query query-b, a new checkpoint, but the "
                                                      rf"application's batches up to {n - 1} were committed by query "
                                                      rf"query-a.*new_checkpoint=continue.*nothing was written"):
            commit_batch(opts, [incr(100)], 0, B)
        assert state(store_url, app_id) == before and self.raw(store_url, app_id) == raw  # not even an epoch
        assert state(store_url, app_id)["counts"] == {"n": n}

    @pytest.mark.parametrize("n", COUNTS)
    def test_new_checkpoint_continues_with_the_option(self, store_url: str, app_id: str, n: int) -> None:
        self.commit_n(self.opts(store_url, app_id), n)
        cont = self.opts(store_url, app_id, new_checkpoint="continue")
        assert commit_batch(cont, [incr(10)], 0, B) is CommitOutcome.APPLIED
        assert commit_batch(cont, [incr(10)], 0, B) is CommitOutcome.REPLAYED  # its own replay
        assert commit_batch(cont, [incr(10)], 1, B) is CommitOutcome.APPLIED
        with open_store(store_url, app_id) as s:
            assert s.get_value("counts", "n") == n + 20
            assert s.load_positions()[SINK_POSITION_KEY].offset == n + 2  # the application's batches go on
            assert s.last_committed_batch_id() == n + 1
        if n:
            with pytest.raises(OffsetConflictError, match="comes from query query-a"):
                commit_batch(cont, [incr()], n, A2)  # the old checkpoint started again

    @pytest.mark.parametrize("n", COUNTS[1:])
    def test_restart_replays_then_goes_on_and_fences_the_run_before(self, store_url: str, app_id: str,
                                                                   n: int) -> None:
        opts = self.opts(store_url, app_id)
        self.commit_n(opts, n)
        epoch = state(store_url, app_id)["epoch"]
        assert commit_batch(opts, [incr(100)], n - 1, A2) is CommitOutcome.REPLAYED  # Spark runs the last batch again
        assert state(store_url, app_id)["epoch"] == epoch  # a replay writes nothing, no epoch either
        assert commit_batch(opts, [incr()], n, A2) is CommitOutcome.APPLIED
        assert state(store_url, app_id)["epoch"] == epoch + 1  # the first commit of the start took one
        with pytest.raises(FencedError, match="run run-a1 of query query-a was replaced"):
            commit_batch(opts, [incr()], n + 1, A)  # the zombie of the first start
        assert commit_batch(opts, [incr()], n + 1, A2) is CommitOutcome.APPLIED
        assert state(store_url, app_id)["counts"] == {"n": n + 2}

    def test_run_is_stored_beside_the_batch_marker(self, store_url: str, app_id: str) -> None:
        self.commit_n(self.opts(store_url, app_id), 2)
        with open_store(store_url, app_id) as s:
            stored = s.load_positions()[SINK_POSITION_KEY]
            assert stored.offset == 2
            assert stored.meta == {"query": "query-a", "run": "run-a1", "epoch": s.current_epoch(), "base": 0,
                                   "fenced": []}

    @pytest.mark.parametrize("n", COUNTS[1:])
    def test_store_written_before_runs_were_recorded(self, store_url: str, app_id: str, n: int) -> None:
        with open_store(store_url, app_id) as s:  # what an earlier release left: the marker without a run
            epoch = s.start_epoch()
            for b in range(n):
                s.commit(epoch, PlannedBatch(b, 0, (SinkBatchRange(b),)), incr())
            assert s.load_positions()[SINK_POSITION_KEY].meta is None
        opts = self.opts(store_url, app_id)
        assert commit_batch(opts, [incr(100)], n - 1, A) is CommitOutcome.REPLAYED  # the batch-id rule of then
        with pytest.raises(OffsetConflictError, match=f"does not follow the stored next batch id {n}"):
            commit_batch(opts, [incr(100)], n + 1, A)
        assert commit_batch(opts, [incr()], n, A) is CommitOutcome.APPLIED  # records the run
        with pytest.raises(OffsetConflictError, match="comes from query query-b"):
            commit_batch(opts, [incr(100)], 0, B)
        assert state(store_url, app_id)["counts"] == {"n": n + 1}

    def test_building_options_writes_nothing_and_fences_no_running_query(self, store_url: str, app_id: str) -> None:
        fresh = app_id + "-fresh"
        raw_fresh = self.raw(store_url, fresh)
        options = store_sink_options(store_url, fresh, new_checkpoint="continue")
        assert "epoch" not in options and options["app_id"] == fresh
        assert self.raw(store_url, fresh) == raw_fresh
        opts = self.opts(store_url, app_id)
        self.commit_n(opts, 2)
        before, raw = state(store_url, app_id), self.raw(store_url, app_id)
        store_sink_options(store_url, app_id)  # another query start being prepared
        assert state(store_url, app_id) == before and self.raw(store_url, app_id) == raw
        assert commit_batch(opts, [incr()], 2, A) is CommitOutcome.APPLIED  # the running query is not fenced


class TestSQLiteSinkRuns(SinkRunsContract):
    @pytest.fixture
    def store_url(self, tmp_path: Any) -> str:
        return f"sqlite:///{tmp_path}/runs.db"

    def raw(self, url: str, app: str) -> Any:
        path = url[len("sqlite:///"):]
        if not os.path.exists(path):
            return None
        with open(path, "rb") as f:
            return f.read()

    def test_building_options_creates_no_file(self, tmp_path: Any) -> None:
        store_sink_options(f"sqlite:///{tmp_path}/never.db", "q")
        assert not os.path.exists(tmp_path / "never.db")


class TestPostgresSinkRuns(SinkRunsContract):
    @pytest.fixture
    def store_url(self, postgres_url: str) -> str:
        return postgres_url


class TestRedisSinkRuns(SinkRunsContract):
    """On a single Redis server and on a Redis Cluster."""

    @pytest.fixture
    def store_url(self, any_redis_url: str) -> str:
        return any_redis_url

    def raw(self, url: str, app: str) -> Any:
        client = raw_redis_client(url)
        keys = sorted(client.scan_iter(match="{deo:" + app + "}:*"))
        return {k: client.dump(k) for k in keys}


def test_the_run_document_is_json_of_the_decision() -> None:
    doc = json.loads(SinkBatchRange(3, '{"query":"q","run":"r"}').run_doc)
    assert SinkBatchRange(3, json.dumps(doc)) == SinkBatchRange(3)  # the document does not change the range
    assert SinkBatchRange(3).position_meta() is None
