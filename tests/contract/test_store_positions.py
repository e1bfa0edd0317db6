"""Positions through the source-agnostic API, on every backend (real servers), with non-Kafka ranges.

The store knows ranges only as ``(position_key, start, end)`` plus an optional document
(:class:`~dstream_exactly_once.core._ranges.SourceRange`): these tests commit, replay, reset and log
batches of :class:`~dstream_exactly_once.files._ranges.FileRange` and of ``SeqRange``, a range kind
that exists only in the tests (``seq_range.py``) and is registered the way a source registers its
own. They read positions back with ``load_positions`` (``load_offsets``, the Kafka view, leaves them
out).
"""

from __future__ import annotations

from typing import Any, Dict

import pytest

from dstream_exactly_once.core._ranges import Position, SourceRange
from dstream_exactly_once.errors import ConfigurationError, FencedError, OffsetConflictError
from dstream_exactly_once.files._ranges import FileRange
from dstream_exactly_once.kafka._offsets import OffsetRange, TopicAndPartition
from dstream_exactly_once.stores import (
    CommitOutcome,
    PlannedBatch,
    PostgresStore,
    RedisStore,
    SQLiteStore,
    TransactionalStore,
    Writes,
    open_store,
)

from .fixtures import ContractFixtures
from .seq_range import SeqRange

APPLIED, REPLAYED = CommitOutcome.APPLIED, CommitOutcome.REPLAYED


def seq_batch(batch_id: int, *ranges: SourceRange) -> PlannedBatch:
    return PlannedBatch(batch_id, 1_000 * (batch_id + 1), tuple(ranges))


def file_range(file_id: str, start: int, end: int, **kw: Any) -> FileRange:
    return FileRange(file_id=file_id, path=f"/logs/{file_id}.log", from_byte=start, until_byte=end,
                     fingerprint="ab" * 16, sample_length=64, dev=2049, inode=77, seen_size=end, **kw)


A0, B0 = SeqRange("a", 0, 10, note="first"), SeqRange("b", 0, 4)
SEQ0 = seq_batch(0, A0, B0)
SEQ1 = seq_batch(1, SeqRange("a", 10, 15, note="second"), SeqRange("b", 4, 4))


def state(store: TransactionalStore) -> Dict[str, Any]:
    """What a refused call must leave untouched."""
    return {"positions": store.load_positions(), "values": store.get_values("n"),
            "committed": store.last_committed_batch_id(), "logged": store.last_logged_batch_id()}


class PositionsContract(ContractFixtures):
    """Positions of any range kind, as every :class:`TransactionalStore` backend must keep them."""

    store_class: type

    def test_commit_stores_end_and_document_per_position_key(self, store: TransactionalStore, epoch: int) -> None:
        assert type(store) is self.store_class
        assert store.load_positions() == {}
        assert store.commit(epoch, SEQ0, Writes().incr("n", "rows", 14)) is APPLIED
        assert store.load_positions() == {"seq:a": Position(10, {"note": "first", "hi": 10}),
                                          "seq:b": Position(4, None)}
        assert store.load_offsets() == {}  # the Kafka view: no Kafka keys here
        assert store.commit(epoch, SEQ1, Writes().incr("n", "rows", 5)) is APPLIED
        assert store.load_positions() == {"seq:a": Position(15, {"note": "second", "hi": 15}),
                                          "seq:b": Position(4, None)}
        assert store.get_value("n", "rows") == 19 and store.last_committed_batch_id() == 1

    def test_replay_is_detected_and_writes_nothing(self, store: TransactionalStore, epoch: int) -> None:
        store.commit(epoch, SEQ0, Writes().incr("n", "rows", 14))
        before = state(store)
        assert store.commit(epoch, SEQ0, Writes().incr("n", "rows", 14)) is REPLAYED
        assert store.commit(epoch, SEQ0, Writes().incr("n", "rows", 1), ranges=[A0], complete_batch=False) is REPLAYED
        assert state(store) == before

    def test_conflict_names_the_position_key_and_positions_and_writes_nothing(
            self, store: TransactionalStore, epoch: int) -> None:
        store.commit(epoch, SEQ0, Writes().incr("n", "rows", 14))
        before = state(store)
        stale = seq_batch(1, SeqRange("a", 7, 12))
        epoch = store.start_epoch()  # the first commit of an epoch compares every range
        with pytest.raises(OffsetConflictError) as info:
            store.commit(epoch, stale, Writes().incr("n", "rows", 5))
        message = str(info.value)
        assert "seq:a" in message and "10" in message and "7" in message and "12" in message, message
        assert state(store) == before

    def test_a_fenced_epoch_moves_no_position(self, store: TransactionalStore, epoch: int) -> None:
        store.start_epoch()
        with pytest.raises(FencedError):
            store.commit(epoch, SEQ0, Writes().incr("n", "rows", 14))
        assert store.load_positions() == {} and store.get_values("n") == {}

    def test_per_partition_commits_then_mark_committed(self, store: TransactionalStore, epoch: int) -> None:
        store.log_batch(epoch, SEQ0)
        assert store.commit(epoch, SEQ0, Writes().incr("n", "rows", 4), ranges=[B0], complete_batch=False) is APPLIED
        assert store.load_positions() == {"seq:b": Position(4, None)}
        with pytest.raises(OffsetConflictError, match="seq:a"):
            store.mark_committed(epoch, SEQ0)  # seq:a is not committed yet
        assert store.commit(epoch, SEQ0, Writes().incr("n", "rows", 10), ranges=[A0], complete_batch=False) is APPLIED
        assert store.pending_batches() == [SEQ0]
        assert store.mark_committed(epoch, SEQ0) is APPLIED
        assert store.is_committed(0) and store.pending_batches() == []
        assert store.load_positions()["seq:a"] == Position(10, {"note": "first", "hi": 10})

    def test_offset_log_round_trips_the_range_kind(self, store: TransactionalStore, store_url: str,
                                                   app_id: str, epoch: int) -> None:
        store.log_batch(epoch, SEQ0)
        store.log_batch(epoch, SEQ1)
        with open_store(store_url, app_id) as other:  # a fresh connection decodes through the registry
            assert other.get_batch(0) == SEQ0 and other.get_batch(1) == SEQ1
            assert all(type(r) is SeqRange for r in other.get_batch(1).ranges)  # type: ignore[union-attr]
            assert other.pending_batches() == [SEQ0, SEQ1]

    def test_file_ranges_commit_with_their_identity_document(self, store: TransactionalStore, epoch: int) -> None:
        first = file_range("f1", 0, 120, tail="cd" * 16, tail_length=32)
        b = seq_batch(0, first, file_range("f2", 0, 0))
        assert store.commit(epoch, b, Writes().incr("n", "lines", 3), log_entry=True) is APPLIED
        positions = store.load_positions()
        assert positions == {"file:f1": Position(120, first.position_meta()),
                             "file:f2": Position(0, file_range("f2", 0, 0).position_meta())}
        assert positions["file:f1"].meta["path"] == "/logs/f1.log"  # type: ignore[index]
        assert store.get_batch(0) == b and store.load_offsets() == {}
        after = file_range("f1", 120, 300, tail="ef" * 16, tail_length=32, supersedes=None)
        assert store.commit(epoch, seq_batch(1, after), Writes().incr("n", "lines", 2)) is APPLIED
        assert store.load_positions()["file:f1"] == Position(300, after.position_meta())
        epoch = store.start_epoch()  # the first commit of an epoch compares every range
        with pytest.raises(OffsetConflictError, match="file:f1"):
            store.commit(epoch, seq_batch(2, file_range("f1", 100, 400)), Writes())

    def test_reset_positions_sets_and_clears_documents(self, store: TransactionalStore, epoch: int) -> None:
        store.commit(epoch, SEQ0, Writes().incr("n", "rows", 14))
        store.reset_positions(epoch, {"seq:a": 3, "seq:c": 9}, documents={"seq:c": {"note": "set by hand"}})
        assert store.load_positions() == {"seq:a": Position(3, None), "seq:b": Position(4, None),
                                          "seq:c": Position(9, {"note": "set by hand"})}
        assert store.get_value("n", "rows") == 14 and store.is_committed(0)  # results and logs stay
        # the next batch is planned from the reset position
        assert store.commit(epoch, seq_batch(1, SeqRange("a", 3, 8)), Writes()) is APPLIED
        assert store.load_positions()["seq:a"] == Position(8, None)

    def test_bad_reset_is_refused_before_anything_is_written(self, store: TransactionalStore, epoch: int) -> None:
        store.commit(epoch, SEQ0, Writes().incr("n", "rows", 14))
        before = state(store)
        with pytest.raises(ConfigurationError, match=r"'seq:a'.*-1"):
            store.reset_positions(epoch, {"seq:b": 1, "seq:a": -1})
        with pytest.raises(ConfigurationError, match=r"'seq:z'"):
            store.reset_positions(epoch, {"seq:a": 1}, documents={"seq:z": {}})
        assert state(store) == before

    def test_kafka_and_other_keys_side_by_side(self, store: TransactionalStore, epoch: int) -> None:
        """``load_offsets`` (the Kafka convenience view) takes the Kafka keys only; ``load_positions`` all."""
        store.commit(epoch, seq_batch(0, OffsetRange("t", 0, 0, 5)), Writes())
        store.commit(epoch, seq_batch(1, SeqRange("a", 0, 2)), Writes())
        assert store.load_offsets() == {TopicAndPartition("t", 0): 5}
        assert store.load_positions() == {"t/0": Position(5, None), "seq:a": Position(2, None)}


class TestSQLitePositions(PositionsContract):
    store_class = SQLiteStore

    @pytest.fixture
    def store_url(self, tmp_path: Any) -> str:
        return f"sqlite:///{tmp_path}/positions.db"


class TestPostgresPositions(PositionsContract):
    store_class = PostgresStore

    @pytest.fixture
    def store_url(self, postgres_url: str) -> str:
        return postgres_url


class TestRedisPositions(PositionsContract):
    store_class = RedisStore

    @pytest.fixture
    def store_url(self, redis_url: str) -> str:
        return redis_url
