"""Dense whole-batch commits (every partition moves) on every backend, against real servers.

A flat whole-batch commit stores its positions as one entry of the position log instead of a row
(hash field) per partition (``stores/_position_log.py``); every writer outside the flat sequence
folds the log into the rows first. These tests check the positions and offsets a reader sees,
exactly, after flat commits followed by each such writer (a per-range commit, ``mark_committed``,
an operator's reset and skip, a commit dropping positions), after retention purges the offset log,
when a new instance or a new epoch takes over, and across the fold the log's length triggers; and
that offset-log entries of the per-range encoding (layout versions 1 and 2) still read.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any, Dict, List, Sequence

import pytest

from dstream_exactly_once import skip_batch
from dstream_exactly_once.core._ranges import Position, SourceRange, encode_range
from dstream_exactly_once.errors import OffsetConflictError, StoreError
from dstream_exactly_once.kafka._offsets import OffsetRange, TopicAndPartition
from dstream_exactly_once.stores import (
    SCHEMA_VERSION,
    CommitOutcome,
    PlannedBatch,
    TransactionalStore,
    Writes,
    open_store,
)
from dstream_exactly_once.stores._position_log import FOLD_AT

from ..conftest import raw_redis_client
from .fixtures import ContractFixtures
from .seq_range import SeqRange

APPLIED, REPLAYED = CommitOutcome.APPLIED, CommitOutcome.REPLAYED
P = 40  # partitions, every one with data in every batch


def dense(batch_id: int, partitions: int = P, topic: str = "d") -> PlannedBatch:
    """Batch ``batch_id``: partition p reads ``[10 * batch_id + p, 10 * (batch_id + 1) + p)``."""
    return PlannedBatch(batch_id, 1_000 * (batch_id + 1),
                        tuple(OffsetRange(topic, p, 10 * batch_id + p, 10 * (batch_id + 1) + p)
                              for p in range(partitions)))


def after(batch_id: int, partitions: int = P, topic: str = "d") -> Dict[str, Position]:
    """The positions once batches up to ``batch_id`` are committed."""
    return {f"{topic}/{p}": Position(10 * (batch_id + 1) + p) for p in range(partitions)}


def offsets(positions: Dict[str, Position]) -> Dict[TopicAndPartition, int]:
    out = {}
    for key, pos in positions.items():
        topic, _, part = key.rpartition("/")
        out[TopicAndPartition(topic, int(part))] = pos.offset
    return out


def commit_all(store: TransactionalStore, epoch: int, batches: Sequence[PlannedBatch], *,
               in_commit: bool = True) -> None:
    for b in batches:
        if not in_commit:
            store.log_batch(epoch, b)
        assert store.commit(epoch, b, Writes().incr("n", "batches"), log_entry=in_commit) is APPLIED


class DenseContract(ContractFixtures):
    """The position log of flat commits, as every backend must keep it."""

    def log_len(self, url: str, app_id: str) -> int:
        """Entries in the app's position log."""
        raise NotImplementedError

    def row_count(self, url: str, app_id: str) -> int:
        """Position rows (hash fields) of the app."""
        raise NotImplementedError

    def put_old_entry(self, url: str, app_id: str, batch: PlannedBatch) -> None:
        """Log ``batch`` with the per-range encoding of layout versions 1 and 2, as they wrote it."""
        raise NotImplementedError

    def downgrade(self, url: str, app_id: str) -> None:
        """Make the (folded) store one of layout version 2."""
        raise NotImplementedError

    def assert_positions(self, store: TransactionalStore, expected: Dict[str, Position]) -> None:
        assert store.load_positions() == expected
        kafka = {k: v for k, v in expected.items() if not k.startswith("seq:")}
        assert store.load_offsets() == offsets(kafka)

    def test_flat_commits_keep_their_positions_in_the_log_not_in_rows(
            self, store: TransactionalStore, epoch: int, store_url: str) -> None:
        commit_all(store, epoch, [dense(0)])  # the epoch's first commit: the per-range rule, rows
        assert self.row_count(store_url, store.app_id) == P and self.log_len(store_url, store.app_id) == 0
        commit_all(store, epoch, [dense(b) for b in range(1, 6)], in_commit=False)
        # each entry sets every stored position: it replaces the one before
        assert self.log_len(store_url, store.app_id) == 1 and self.row_count(store_url, store.app_id) == P
        self.assert_positions(store, after(5))
        assert store.get_value("n", "batches") == 6 and store.last_committed_batch_id() == 5
        assert store.commit(epoch, dense(5), Writes().incr("n", "batches")) is REPLAYED
        with pytest.raises(OffsetConflictError, match="does not follow batch 5"):
            store.commit(epoch, dense(7), Writes().incr("n", "batches"))
        self.assert_positions(store, after(5))
        assert store.get_value("n", "batches") == 6

    def test_new_partitions_and_documents_in_the_log(self, store: TransactionalStore, epoch: int,
                                                     store_url: str) -> None:
        def seq(batch_id: int, *ranges: SourceRange) -> PlannedBatch:
            return PlannedBatch(batch_id, batch_id + 1, tuple(ranges))

        commit_all(store, epoch, [seq(0, SeqRange("a", 0, 5, note="n0"), SeqRange("b", 0, 2))])
        commit_all(store, epoch, [
            seq(1, SeqRange("a", 5, 9), SeqRange("b", 2, 4, note="b1"), SeqRange("c", 7, 7, note="c-new")),
            seq(2, SeqRange("a", 9, 9, note="ignored"), SeqRange("b", 4, 6, note="b2"), SeqRange("c", 7, 9)),
            seq(3, SeqRange("d", 3, 3, note="d-new"), SeqRange("c", 9, 9, note="ignored")),
        ])
        assert self.log_len(store_url, store.app_id) == 3
        expected = {"seq:a": Position(9), "seq:b": Position(6, {"note": "b2", "hi": 6}), "seq:c": Position(9),
                    "seq:d": Position(3, {"note": "d-new", "hi": 3})}
        self.assert_positions(store, expected)
        store.reset_positions(epoch, {"seq:a": 9})  # folds first: the same positions in rows
        assert self.log_len(store_url, store.app_id) == 0
        self.assert_positions(store, expected)

    def test_a_per_range_commit_then_mark_committed_after_flat_commits(
            self, store: TransactionalStore, epoch: int, store_url: str) -> None:
        commit_all(store, epoch, [dense(b) for b in range(4)])
        b4 = dense(4)
        for r in b4.ranges:
            assert store.commit(epoch, b4, Writes().incr("n", r.position_key), ranges=[r],
                                complete_batch=False) is APPLIED
        assert self.log_len(store_url, store.app_id) == 0
        self.assert_positions(store, after(4))
        assert store.mark_committed(epoch, b4) is APPLIED
        commit_all(store, epoch, [dense(5), dense(6)])  # per-range rule first (no marker), then flat
        assert self.log_len(store_url, store.app_id) == 1
        self.assert_positions(store, after(6))

    def test_mark_committed_folds_the_log(self, store: TransactionalStore, epoch: int, store_url: str) -> None:
        commit_all(store, epoch, [dense(b) for b in range(3)])
        b3 = dense(3)
        store.log_batch(epoch, b3)
        with pytest.raises(OffsetConflictError, match="cannot be marked committed"):
            store.mark_committed(epoch, b3)  # its ranges were never committed: refused after the fold
        self.assert_positions(store, after(2))
        assert store.last_committed_batch_id() == 2

    def test_operator_reset_and_skip_after_flat_commits(self, store: TransactionalStore, epoch: int,
                                                        store_url: str) -> None:
        commit_all(store, epoch, [dense(b) for b in range(4)])
        store.log_batch(epoch, dense(4))
        plan = skip_batch(store, store.app_id, 4, execute=True, force=True)
        assert plan.outcomes == {4: "skipped"}
        self.assert_positions(store, after(4))
        assert self.log_len(store_url, store.app_id) == 0
        assert store.get_value("n", "batches") == 4
        new = store.start_epoch()
        store.reset_positions(new, {"d/0": 1_000})
        expected = after(4)
        expected["d/0"] = Position(1_000)
        self.assert_positions(store, expected)

    def test_retention_purge_keeps_the_positions(self, store: TransactionalStore, epoch: int,
                                                 store_url: str) -> None:
        commit_all(store, epoch, [dense(b) for b in range(8)])
        assert store.purge_logs(epoch, 2) == 6
        assert store.get_batch(5) is None and store.get_batch(7) == dense(7)
        self.assert_positions(store, after(7))
        commit_all(store, epoch, [dense(8)])
        self.assert_positions(store, after(8))

    def test_a_new_instance_and_a_new_epoch_take_over(self, store: TransactionalStore, epoch: int,
                                                      store_url: str, app_id: str) -> None:
        commit_all(store, epoch, [dense(b) for b in range(4)])
        with open_store(store_url, app_id) as same_epoch:  # another instance of the epoch's driver
            self.assert_positions(same_epoch, after(3))
            commit_all(same_epoch, epoch, [dense(4), dense(5)])
            self.assert_positions(same_epoch, after(5))
        self.assert_positions(store, after(5))
        with open_store(store_url, app_id) as restarted:
            new = restarted.start_epoch()
            assert restarted.commit(new, dense(5), Writes().incr("n", "batches")) is REPLAYED
            with pytest.raises(OffsetConflictError, match="position conflict"):
                restarted.commit(new, dense(7), Writes().incr("n", "batches"))
            commit_all(restarted, new, [dense(6), dense(7)])
            self.assert_positions(restarted, after(7))
        assert store.get_value("n", "batches") == 8

    def test_the_log_is_folded_when_it_holds_fold_at_entries(self, store: TransactionalStore, epoch: int,
                                                             store_url: str) -> None:
        """Batches moving half of the partitions (by turns) do not supersede the entries before them."""
        positions = [0] * P
        last, most = FOLD_AT + 3, 0
        for b in range(last + 1):
            ranges = []
            for p in range(P):
                end = positions[p] + (p + 1 if (p + b) % 2 == 0 else 0)
                ranges.append(OffsetRange("d", p, positions[p], end))
                positions[p] = end
            commit_all(store, epoch, [PlannedBatch(b, b + 1, tuple(ranges))])
            most = max(most, self.log_len(store_url, store.app_id))
            if b in (FOLD_AT, FOLD_AT + 1, last):
                self.assert_positions(store, {f"d/{p}": Position(positions[p]) for p in range(P)})
        assert most == FOLD_AT and self.log_len(store_url, store.app_id) < FOLD_AT
        assert store.get_value("n", "batches") == last + 1

    def test_an_instance_that_does_not_know_the_stored_keys_appends(
            self, store: TransactionalStore, epoch: int, store_url: str, app_id: str) -> None:
        commit_all(store, epoch, [dense(0), dense(1, partitions=P + 5)])  # 5 partitions new in batch 1
        with open_store(store_url, app_id) as other:  # same epoch, another instance: no memo of the keys
            commit_all(other, epoch, [dense(2, partitions=P + 5)])
            self.assert_positions(other, after(2, partitions=P + 5))
            commit_all(other, epoch, [dense(3, partitions=P + 5), dense(4, partitions=P + 5)])
            assert self.log_len(store_url, app_id) <= 2  # known again from its own commits: replaced
        self.assert_positions(store, after(4, partitions=P + 5))

    def test_a_flat_commit_that_drops_positions(self, store: TransactionalStore, epoch: int,
                                                store_url: str) -> None:
        commit_all(store, epoch, [dense(0, topic="gone"), PlannedBatch(1, 2, (OffsetRange("d", 0, 0, 4),))])
        commit_all(store, epoch, [PlannedBatch(2, 3, (OffsetRange("d", 0, 4, 6),))])
        assert self.log_len(store_url, store.app_id) == 2
        w = Writes().drop_positions([f"gone/{p}" for p in range(P)])
        assert store.commit(epoch, PlannedBatch(3, 4, (OffsetRange("d", 0, 6, 9),)), w) is APPLIED
        assert self.log_len(store_url, store.app_id) == 0
        self.assert_positions(store, {"d/0": Position(9)})

    def test_entries_of_the_per_range_encoding_still_read(self, store: TransactionalStore, epoch: int,
                                                         store_url: str, app_id: str) -> None:
        old = dense(0, partitions=3)
        self.put_old_entry(store_url, app_id, old)
        assert store.get_batch(0) == old and store.pending_batches() == [old]
        store.log_batch(epoch, old)  # the identical entry, encoded otherwise: fine
        assert store.commit(epoch, old, Writes(), log_entry=True) is APPLIED
        commit_all(store, epoch, [dense(1, partitions=3)])
        assert store.get_batch(0) == old and store.get_batch(1) == dense(1, partitions=3)
        self.assert_positions(store, after(1, partitions=3))

    def test_a_layout_2_store_is_read_then_upgraded(self, store: TransactionalStore, epoch: int,
                                                    store_url: str, app_id: str) -> None:
        commit_all(store, epoch, [dense(0)])
        store.close()
        self.downgrade(store_url, app_id)
        self.put_old_entry(store_url, app_id, dense(1))
        with open_store(store_url, app_id) as old:
            self.assert_positions(old, after(0))
            assert old.pending_batches() == [dense(1)]
            new = old.start_epoch()  # the first write upgrades
            commit_all(old, new, [dense(1), dense(2)])
            self.assert_positions(old, after(2))
        assert self.layout(store_url, app_id) == SCHEMA_VERSION

    def layout(self, url: str, app_id: str) -> int:
        raise NotImplementedError


def _sqlite_path(url: str) -> str:
    return url[len("sqlite:///"):]


def _old_ranges(batch: PlannedBatch) -> str:
    return json.dumps([encode_range(r) for r in batch.ranges])


class TestSQLiteDense(DenseContract):
    @pytest.fixture
    def store_url(self, tmp_path: Any) -> str:
        return f"sqlite:///{tmp_path}/dense.db"

    def _one(self, url: str, sql: str, params: Sequence[Any]) -> Any:
        with sqlite3.connect(_sqlite_path(url)) as conn:
            return conn.execute(sql, tuple(params)).fetchone()[0]

    def log_len(self, url: str, app_id: str) -> int:
        return int(self._one(url, "SELECT COUNT(*) FROM deo_pos_log WHERE app = ?", (app_id,)))

    def row_count(self, url: str, app_id: str) -> int:
        return int(self._one(url, "SELECT COUNT(*) FROM deo_positions WHERE app = ?", (app_id,)))

    def layout(self, url: str, app_id: str) -> int:
        return int(self._one(url, "SELECT schema_version FROM deo_meta WHERE app = ?", (app_id,)))

    def put_old_entry(self, url: str, app_id: str, batch: PlannedBatch) -> None:
        with sqlite3.connect(_sqlite_path(url)) as conn:
            conn.execute("INSERT INTO deo_batches (app, batch_id, batch_time_ms, ranges) VALUES (?, ?, ?, ?)",
                         (app_id, batch.batch_id, batch.batch_time_ms, _old_ranges(batch)))

    def downgrade(self, url: str, app_id: str) -> None:
        assert self.log_len(url, app_id) == 0
        with sqlite3.connect(_sqlite_path(url)) as conn:
            conn.execute("DROP TABLE deo_pos_log")
            conn.execute("UPDATE deo_meta SET schema_version = 2")


class TestPostgresDense(DenseContract):
    @pytest.fixture
    def store_url(self, postgres_url: str) -> str:
        return postgres_url

    def _run(self, url: str, sql: str, params: Sequence[Any] = ()) -> List[Any]:
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            cur = conn.execute(sql, tuple(params))
            return list(cur.fetchall()) if cur.description else []

    def log_len(self, url: str, app_id: str) -> int:
        return int(self._run(url, "SELECT COUNT(*) FROM deo_pos_log WHERE app = %s", (app_id,))[0][0])

    def row_count(self, url: str, app_id: str) -> int:
        return int(self._run(url, "SELECT COUNT(*) FROM deo_positions WHERE app = %s", (app_id,))[0][0])

    def layout(self, url: str, app_id: str) -> int:
        return int(self._run(url, "SELECT schema_version FROM deo_meta WHERE app = %s", (app_id,))[0][0])

    def put_old_entry(self, url: str, app_id: str, batch: PlannedBatch) -> None:
        self._run(url, "INSERT INTO deo_batches (app, batch_id, batch_time_ms, ranges) VALUES (%s, %s, %s, %s)",
                  (app_id, batch.batch_id, batch.batch_time_ms, _old_ranges(batch)))

    def downgrade(self, url: str, app_id: str) -> None:
        assert self.log_len(url, app_id) == 0
        self._run(url, "DROP TABLE deo_pos_log")
        self._run(url, "UPDATE deo_meta SET schema_version = 2")


class TestRedisDense(DenseContract):
    """On a single Redis server and on a Redis Cluster (``any_redis_url``)."""

    @pytest.fixture
    def store_url(self, any_redis_url: str) -> str:
        return any_redis_url

    def _key(self, app_id: str, name: str) -> str:
        return "{deo:" + app_id + "}:" + name

    def log_len(self, url: str, app_id: str) -> int:
        return int(raw_redis_client(url).hlen(self._key(app_id, "plog")))

    def row_count(self, url: str, app_id: str) -> int:
        return int(raw_redis_client(url).hlen(self._key(app_id, "offsets")))

    def layout(self, url: str, app_id: str) -> int:
        return int(raw_redis_client(url).get(self._key(app_id, "schema")))

    def put_old_entry(self, url: str, app_id: str, batch: PlannedBatch) -> None:
        entry = json.dumps({"batch_id": batch.batch_id, "batch_time_ms": batch.batch_time_ms,
                            "ranges": [encode_range(r) for r in batch.ranges]}, separators=(",", ":"))
        raw_redis_client(url).zadd(self._key(app_id, "batches"), {entry: batch.batch_id})

    def downgrade(self, url: str, app_id: str) -> None:
        assert self.log_len(url, app_id) == 0
        raw_redis_client(url).set(self._key(app_id, "schema"), 2)

    def test_a_commit_waiting_for_folds_gives_up_after_a_bound_writing_nothing(
            self, store: TransactionalStore, store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
        """A commit that finds the position log full folds it and runs again; if the log is full every
        time (another writer refilling it), it stops after a bounded number of folds with a clear
        error instead of retrying forever, and writes nothing."""
        epoch = store.start_epoch()
        commit_all(store, epoch, [dense(0), dense(1)])  # the second commit is flat: one log entry
        assert self.log_len(store_url, store.app_id) == 1
        folds: List[int] = []
        monkeypatch.setattr(store, "_fold", lambda: folds.append(1))  # the log never empties
        epoch = store.start_epoch()  # the first commit of an epoch compares rows: it needs the fold
        with pytest.raises(StoreError, match="kept filling while the commit of batch 2"):
            store.commit(epoch, dense(2), Writes().incr("n", "batches"), log_entry=True)
        assert len(folds) == 10
        assert store.get_value("n", "batches") == 2 and store.get_batch(2) is None
        assert store.load_positions() == after(1)
