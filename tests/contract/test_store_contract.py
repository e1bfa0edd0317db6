"""The :class:`TransactionalStore` contract, run against every backend on real servers.

:class:`StoreContract` holds the behaviour; each ``Test*`` subclass only says how to reach its
backend and how to tamper with its stored layout version.
"""

from __future__ import annotations

import os
import pickle
import sqlite3
from typing import Any, Dict

import pytest

from dstream_exactly_once.core._ranges import Position
from dstream_exactly_once.errors import (
    ConfigurationError,
    FencedError,
    OffsetConflictError,
    StoreError,
    StoreVersionError,
)
from dstream_exactly_once.kafka._offsets import OffsetRange, TopicAndPartition
from dstream_exactly_once.stores import (
    SCHEMA_VERSION,
    CommitOutcome,
    PlannedBatch,
    PostgresStore,
    RedisClusterStore,
    RedisStore,
    SQLiteStore,
    TransactionalStore,
    Writes,
    open_store,
)
from dstream_exactly_once.stores._writes import MAX_KEY_BYTES, RESERVED_NAMESPACE, incident_key

from ..conftest import raw_redis_client
from .fixtures import ContractFixtures
from .seq_range import SeqRange

APPLIED, REPLAYED = CommitOutcome.APPLIED, CommitOutcome.REPLAYED
P0, P1 = TopicAndPartition("t", 0), TopicAndPartition("t", 1)


def batch(batch_id: int, *ranges: OffsetRange, time_ms: int = 0) -> PlannedBatch:
    return PlannedBatch(batch_id, time_ms or 1_000 * (batch_id + 1), tuple(ranges))


R0 = OffsetRange("t", 0, 0, 10)
R1 = OffsetRange("t", 1, 0, 5)
B0 = batch(0, R0, R1)
B1 = batch(1, OffsetRange("t", 0, 10, 15), OffsetRange("t", 1, 5, 5))


def snapshot(store: TransactionalStore) -> Dict[str, Any]:
    """Everything a failed commit must leave untouched."""
    return {
        "offsets": store.load_offsets(),
        "counts": store.get_values("counts"),
        "docs": store.get_values("docs"),
        "rows": store.get_batch_rows("rows"),
        "label": store.has_label("L"),
        "committed": store.last_committed_batch_id(),
    }


def full_writes(tag: str = "a", n: int = 1) -> Writes:
    return (Writes().incr("counts", "n", n).put("docs", "k", {"tag": tag})
            .put_batch_rows("rows", [{"tag": tag}]).add_label("L"))


class StoreContract(ContractFixtures):
    """The behaviour suite every :class:`TransactionalStore` backend must pass."""

    store_class: type

    def write_schema_version(self, url: str, app_id: str, version: int) -> None:
        raise NotImplementedError

    # ---------------------------------------------------------------- opening
    def test_open_store_picks_the_backend(self, store: TransactionalStore, app_id: str) -> None:
        assert type(store) is self.store_class
        assert store.app_id == app_id

    def test_schema_version_too_new_is_refused(self, store: TransactionalStore, store_url: str,
                                               app_id: str) -> None:
        store.start_epoch()  # the layout exists from the first write on
        store.close()
        self.write_schema_version(store_url, app_id, SCHEMA_VERSION + 98)
        with pytest.raises(StoreVersionError) as info:
            open_store(store_url, app_id)
        assert str(SCHEMA_VERSION + 98) in str(info.value) and str(SCHEMA_VERSION) in str(info.value)

    def test_close_is_idempotent_and_store_reconnects(self, store: TransactionalStore) -> None:
        e = store.start_epoch()
        store.close()
        store.close()
        assert store.current_epoch() == e

    # ---------------------------------------------------------------- epochs and fencing
    def test_start_epoch_increments(self, store: TransactionalStore, store_url: str, app_id: str) -> None:
        assert store.current_epoch() == 0
        assert store.start_epoch() == 1
        assert store.start_epoch() == 2
        with open_store(store_url, app_id) as other:
            assert other.current_epoch() == 2
            assert other.start_epoch() == 3
        assert store.current_epoch() == 3

    def test_older_epoch_is_fenced_and_writes_nothing(self, store: TransactionalStore) -> None:
        old = store.start_epoch()
        store.log_batch(old, B0)
        new = store.start_epoch()
        before = snapshot(store)
        with pytest.raises(FencedError, match=f"epoch {old}.*{new}"):
            store.commit(old, B0, full_writes())
        with pytest.raises(FencedError):
            store.commit(old, B0, Writes(), ranges=[R0], complete_batch=False)
        with pytest.raises(FencedError):
            store.log_batch(old, B1)
        with pytest.raises(FencedError):
            store.mark_committed(old, B0)
        assert snapshot(store) == before
        assert store.get_batch(1) is None
        assert store.commit(new, B0, full_writes()) is APPLIED

    def test_epoch_never_taken_is_fenced(self, store: TransactionalStore, epoch: int) -> None:
        with pytest.raises(FencedError, match="never taken"):
            store.commit(epoch + 5, B0, full_writes())
        with pytest.raises(ConfigurationError, match="start_epoch"):
            store.commit(0, B0, full_writes())
        assert store.load_offsets() == {}

    # ---------------------------------------------------------------- the commit
    def test_commit_applies_offsets_and_results(self, store: TransactionalStore, epoch: int) -> None:
        assert store.commit(epoch, B0, full_writes()) is APPLIED
        assert store.load_offsets() == {P0: 10, P1: 5}
        assert store.get_value("counts", "n") == 1
        assert store.get_value("docs", "k") == {"tag": "a"}
        assert store.get_value("docs", "missing") is None
        assert store.get_batch_rows("rows") == {0: [{"tag": "a"}]}
        assert store.has_label("L") and not store.has_label("other")
        assert store.is_committed(0) and store.last_committed_batch_id() == 0

    def test_replay_of_committed_batch_writes_nothing(self, store: TransactionalStore, epoch: int) -> None:
        store.commit(epoch, B0, full_writes("a", 7))
        before = snapshot(store)
        assert store.commit(epoch, B0, full_writes("b", 7)) is REPLAYED
        assert store.commit(epoch, B0, full_writes("b", 7), ranges=[R1], complete_batch=False) is REPLAYED
        assert snapshot(store) == before
        assert store.get_value("counts", "n") == 7

    def test_replay_after_later_batches_is_still_replay(self, store: TransactionalStore, epoch: int) -> None:
        store.commit(epoch, B0, full_writes())
        store.commit(epoch, B1, Writes().incr("counts", "n"))
        assert store.commit(epoch, B0, full_writes()) is REPLAYED
        assert store.get_value("counts", "n") == 2

    def test_offset_conflict_names_partition_and_offsets(self, store: TransactionalStore, epoch: int) -> None:
        store.commit(epoch, B0, full_writes())
        before = snapshot(store)
        stale = batch(1, OffsetRange("t", 0, 4, 12), OffsetRange("t", 1, 5, 9))
        restarted = store.start_epoch()  # the first commit of an epoch compares every range
        with pytest.raises(OffsetConflictError) as info:
            store.commit(restarted, stale, full_writes("b"))
        message = str(info.value)
        assert "t-0" in message and "10" in message and "4" in message and "12" in message
        assert snapshot(store) == before
        assert not store.is_committed(1)

    def test_mixed_applied_and_committed_ranges_conflict(self, store: TransactionalStore, epoch: int) -> None:
        store.commit(epoch, B0, Writes().incr("counts", "n"), ranges=[R0], complete_batch=False)
        before = snapshot(store)
        with pytest.raises(OffsetConflictError, match=r"t/0.*t/1|t/1.*t/0"):
            store.commit(epoch, B0, full_writes("b", 5))
        assert snapshot(store) == before

    # ---------------------------------------------------------------- the flat rule of whole-batch commits
    def test_flat_rule_applies_the_next_batch_of_the_epoch_without_comparing_positions(
            self, store: TransactionalStore, epoch: int) -> None:
        assert store.commit(epoch, B0, Writes().incr("counts", "n")) is APPLIED  # per range: first of the epoch
        # the next batch of the epoch is applied on the batch sequence alone: the committer of the epoch
        # planned it from the positions batch 0 left (this one does not start there, and still applies)
        odd = batch(1, OffsetRange("t", 0, 12, 20), OffsetRange("t", 1, 5, 5))
        assert store.commit(epoch, odd, Writes().incr("counts", "n")) is APPLIED
        assert store.load_offsets() == {P0: 20, P1: 5}
        assert store.commit(epoch, odd, Writes().incr("counts", "n")) is REPLAYED  # the commit log decides
        assert store.get_value("counts", "n") == 2 and store.last_committed_batch_id() == 1

    def test_flat_rule_refuses_a_gap_and_an_older_batch(self, store: TransactionalStore, epoch: int) -> None:
        store.commit(epoch, B0, Writes().incr("counts", "n"))
        store.commit(epoch, B1, Writes().incr("counts", "n"))
        before = snapshot(store)
        gap = batch(3, OffsetRange("t", 0, 15, 20))
        with pytest.raises(OffsetConflictError, match=rf"batch 3 does not follow batch 1.*epoch {epoch}.*nothing "
                                                      r"was written"):
            store.commit(epoch, gap, Writes().incr("counts", "n"))
        store.purge_logs(epoch, 1)  # batch 0 leaves the commit log: a replay of it is an older batch, refused
        with pytest.raises(OffsetConflictError, match=r"batch 0 does not follow batch 1"):
            store.commit(epoch, B0, Writes().incr("counts", "n"))
        assert snapshot(store) == before and not store.is_committed(3)

    def test_first_commit_of_an_epoch_compares_every_range(self, store: TransactionalStore, epoch: int) -> None:
        store.commit(epoch, B0, Writes().incr("counts", "n"))
        later = store.start_epoch()
        before = snapshot(store)
        with pytest.raises(OffsetConflictError, match=r"t-0.*stored offset 10"):
            store.commit(later, batch(1, OffsetRange("t", 0, 12, 20)), Writes().incr("counts", "n"))
        assert snapshot(store) == before
        assert store.commit(later, B1, Writes().incr("counts", "n")) is APPLIED
        assert store.load_offsets() == {P0: 15, P1: 5}

    def test_positions_moved_outside_the_batch_sequence_bring_back_the_per_range_rule(
            self, store: TransactionalStore, epoch: int) -> None:
        store.commit(epoch, B0, Writes().incr("counts", "n"))
        # an operator reset (same epoch here, to show the reset alone is enough): the next commit compares
        store.reset_positions(epoch, {"t/0": 3})
        with pytest.raises(OffsetConflictError, match=r"t-0.*stored offset 3"):
            store.commit(epoch, B1, Writes().incr("counts", "n"))
        assert store.commit(epoch, batch(1, OffsetRange("t", 0, 3, 15), OffsetRange("t", 1, 5, 5)),
                            Writes().incr("counts", "n")) is APPLIED
        # a per-partition commit of the next batch: its whole-batch commit finds one range done, one not
        b2 = batch(2, OffsetRange("t", 0, 15, 18), OffsetRange("t", 1, 5, 7))
        store.commit(epoch, b2, Writes().incr("counts", "n"), ranges=[b2.ranges[0]], complete_batch=False)
        with pytest.raises(OffsetConflictError, match=r"already at the range untilOffset"):
            store.commit(epoch, b2, Writes().incr("counts", "n"))
        store.commit(epoch, b2, Writes().incr("counts", "n"), ranges=[b2.ranges[1]], complete_batch=False)
        assert store.mark_committed(epoch, b2) is APPLIED
        # after mark_committed the next whole batch compares too
        with pytest.raises(OffsetConflictError, match=r"t-1.*stored offset 7"):
            store.commit(epoch, batch(3, OffsetRange("t", 1, 6, 9)), Writes().incr("counts", "n"))
        assert store.get_value("counts", "n") == 4 and store.load_offsets() == {P0: 18, P1: 7}

    def test_flat_commits_keep_empty_ranges_exact(self, store: TransactionalStore, epoch: int) -> None:
        store.commit(epoch, batch(0, OffsetRange("t", 0, 0, 5)), Writes())
        # flat commits: a partition new in the batch gets its empty range's position, a known one keeps its own
        store.commit(epoch, batch(1, OffsetRange("t", 0, 5, 5), OffsetRange("t", 1, 7, 7)), Writes())
        store.commit(epoch, batch(2, OffsetRange("t", 0, 5, 9), OffsetRange("t", 1, 7, 7),
                                  OffsetRange("t", 2, 4, 4)), Writes())
        store.commit(epoch, batch(3, OffsetRange("t", 0, 9, 9), OffsetRange("t", 1, 7, 8),
                                  OffsetRange("t", 2, 4, 4)), Writes())
        assert store.load_offsets() == {P0: 9, P1: 8, TopicAndPartition("t", 2): 4}
        # another instance (no memory of the earlier commits) commits flat as well
        with open_store(store.url, store.app_id) as other:
            other.commit(epoch, batch(4, OffsetRange("t", 3, 1, 1), OffsetRange("t", 0, 9, 11)), Writes())
        store.commit(epoch, batch(5, OffsetRange("t", 3, 1, 1), OffsetRange("t", 4, 2, 2)), Writes())
        assert store.load_offsets() == {P0: 11, P1: 8, TopicAndPartition("t", 2): 4, TopicAndPartition("t", 3): 1,
                                        TopicAndPartition("t", 4): 2}

    def test_a_reset_after_a_flat_commit_with_empty_ranges_is_seen_by_the_next_commit(
            self, store: TransactionalStore, epoch: int) -> None:
        store.commit(epoch, batch(0, OffsetRange("t", 0, 0, 10), OffsetRange("t", 1, 0, 0)), Writes())
        store.commit(epoch, batch(1, OffsetRange("t", 0, 10, 12), OffsetRange("t", 1, 0, 0)), Writes())
        store.reset_positions(epoch, {"t/1": 3})  # this instance's memory of the stored keys is now stale
        with pytest.raises(OffsetConflictError, match=r"t-0.*stored offset 12"):
            store.commit(epoch, batch(2, OffsetRange("t", 0, 10, 15), OffsetRange("t", 1, 3, 3)), Writes())
        assert store.commit(epoch, batch(2, OffsetRange("t", 0, 12, 15), OffsetRange("t", 1, 3, 3)),
                            Writes()) is APPLIED
        assert store.load_offsets() == {P0: 15, P1: 3}

    def test_flat_commit_marker_is_no_value(self, store: TransactionalStore, epoch: int) -> None:
        store.commit(epoch, B0, Writes())
        store.commit(epoch, B1, Writes())
        assert store.get_values(RESERVED_NAMESPACE) == {}

    def test_absent_offset_is_applied_from_any_start(self, store: TransactionalStore, epoch: int) -> None:
        b = batch(0, OffsetRange("t", 0, 42, 50))
        assert store.commit(epoch, b, Writes()) is APPLIED
        assert store.load_offsets() == {P0: 50}

    def test_empty_ranges(self, store: TransactionalStore, epoch: int) -> None:
        b = batch(0, OffsetRange("t", 0, 3, 3), OffsetRange("t", 1, 0, 0))
        assert store.commit(epoch, b, Writes().incr("counts", "n")) is APPLIED
        assert store.load_offsets() == {P0: 3, P1: 0}
        assert store.commit(epoch, b, Writes().incr("counts", "n")) is REPLAYED
        assert store.get_value("counts", "n") == 1
        # an empty range never moves an existing offset (backwards or forwards)
        store.commit(epoch, batch(1, OffsetRange("t", 0, 3, 9)), Writes())
        store.commit(epoch, batch(2, OffsetRange("t", 0, 5, 5)), Writes())
        assert store.load_offsets()[P0] == 9
        assert store.commit(epoch, batch(3), Writes().incr("counts", "n")) is APPLIED
        assert store.is_committed(3) and store.get_value("counts", "n") == 2

    def test_per_partition_commits_then_mark_committed(self, store: TransactionalStore, epoch: int) -> None:
        store.log_batch(epoch, B0)
        w0 = Writes().incr("counts", "n", 10).put_batch_rows("rows", ["p0-a", "p0-b"])
        w1 = Writes().incr("counts", "n", 5).put_batch_rows("rows", ["p1-a"])
        assert store.commit(epoch, B0, w1, ranges=[R1], complete_batch=False) is APPLIED
        assert store.commit(epoch, B0, w0, ranges=[R0], complete_batch=False) is APPLIED
        assert not store.is_committed(0)
        assert store.pending_batches() == [B0]
        # a retried partition task is a replay, not a second increment
        assert store.commit(epoch, B0, w0, ranges=[R0], complete_batch=False) is REPLAYED
        assert store.get_value("counts", "n") == 15
        assert store.get_batch_rows("rows") == {0: ["p0-a", "p0-b", "p1-a"]}
        assert store.mark_committed(epoch, B0) is APPLIED
        assert store.mark_committed(epoch, B0) is REPLAYED
        assert store.is_committed(0) and store.pending_batches() == []
        assert store.load_offsets() == {P0: 10, P1: 5}

    def test_mark_committed_with_uncommitted_range_conflicts(self, store: TransactionalStore, epoch: int) -> None:
        store.commit(epoch, B0, Writes(), ranges=[R0], complete_batch=False)
        with pytest.raises(OffsetConflictError, match=r"t-1.*none.*untilOffset 5"):
            store.mark_committed(epoch, B0)
        assert not store.is_committed(0)

    def test_dropped_positions_are_deleted_with_an_applied_commit_only(self, store: TransactionalStore,
                                                                       epoch: int) -> None:
        from dstream_exactly_once.files import FileRange

        a, b, c = (FileRange(n, f"/logs/{n}", 0, 10, fingerprint="f" + n, sample_length=10) for n in "abc")
        store.commit(epoch, batch(0, a, b, c), Writes())
        b1 = batch(1, FileRange("b", "/logs/b", 10, 20))
        store.commit(epoch, b1, Writes().incr("counts", "n"))
        before = store.load_positions()
        # a replay deletes nothing; a drop of the commit's own range is refused before anything is written
        assert store.commit(epoch, b1, Writes().drop_position("file:a")) is REPLAYED
        b2 = batch(2, FileRange("b", "/logs/b", 20, 30))
        with pytest.raises(ConfigurationError, match=r"batch 2 cannot drop the positions \['file:b'\]"):
            store.commit(epoch, b2, Writes().drop_position("file:b"))
        assert store.load_positions() == before and not store.is_committed(2)
        assert store.commit(epoch, b2, Writes().drop_position("file:a").incr("counts", "n")) is APPLIED
        positions = store.load_positions()
        assert sorted(positions) == ["file:b", "file:c"] and positions["file:b"].offset == 30
        assert positions["file:c"].meta["fingerprint"] == "fc" and store.get_value("counts", "n") == 2
        # per-partition commits: the batch's commit-log entry drops them
        b3 = batch(3, FileRange("b", "/logs/b", 30, 40))
        store.commit(epoch, b3, Writes(), ranges=list(b3.ranges), complete_batch=False)
        with pytest.raises(ConfigurationError, match=r"cannot drop the positions \['file:b'\]"):
            store.mark_committed(epoch, b3, drop_positions=["file:b"])
        assert store.mark_committed(epoch, b3, drop_positions=["file:c"]) is APPLIED
        assert sorted(store.load_positions()) == ["file:b"]
        store.commit(epoch, batch(4, a), Writes())  # a dropped key starts again from its range
        assert store.load_positions()["file:a"].meta["path"] == "/logs/a"

    def test_batch_rows_replaced_never_appended(self, store: TransactionalStore, epoch: int) -> None:
        store.commit(epoch, B0, Writes().put_batch_rows("rows", [1, 2]))
        store.commit(epoch, B0, Writes().put_batch_rows("rows", [3]))  # replay: kept once
        b = batch(1, OffsetRange("t", 0, 10, 10), OffsetRange("t", 1, 5, 6))
        # an empty range has no offset to compare: the retried partition replaces its rows
        store.commit(epoch, b, Writes().put_batch_rows("rows", ["first"]), ranges=[b.ranges[0]],
                     complete_batch=False)
        store.commit(epoch, b, Writes().put_batch_rows("rows", ["second"]), ranges=[b.ranges[0]],
                     complete_batch=False)
        store.commit(epoch, b, Writes().put_batch_rows("rows", ["other"]), ranges=[b.ranges[1]],
                     complete_batch=False)
        assert store.get_batch_rows("rows") == {0: [1, 2], 1: ["second", "other"]}
        assert store.get_batch_rows("nothing") == {}

    def test_labels(self, store: TransactionalStore, epoch: int) -> None:
        store.commit(epoch, B0, Writes().add_label("app/0/t-0").add_label("app/0/t-0").add_label("x"))
        assert store.has_label("app/0/t-0") and store.has_label("x")
        assert not store.has_label("app/1/t-0")

    def test_failed_increment_writes_nothing(self, store: TransactionalStore, epoch: int) -> None:
        store.commit(epoch, B0, Writes().put("counts", "doc", "text").incr("counts", "n", 2))
        before = snapshot(store)
        with pytest.raises(StoreError, match="counts/doc"):
            store.commit(epoch, B1, Writes().incr("counts", "n").incr("counts", "doc").add_label("L"))
        assert snapshot(store) == before
        assert store.load_offsets() == {P0: 10, P1: 5}

    # ---------------------------------------------------------------- values
    def test_int_and_float_increments(self, store: TransactionalStore, epoch: int) -> None:
        w = (Writes().incr("counts", "i", 2).incr("counts", "i", 3).incr("counts", "f", 0.25)
             .incr("counts", "big", 2**62).incr("counts", "neg", -4).incr("counts", "mix", 1))
        store.commit(epoch, B0, w)
        store.commit(epoch, B1, Writes().incr("counts", "i", 5).incr("counts", "f", 0.5).incr("counts", "mix", 0.5)
                     .incr("counts", "big", 1))
        values = store.get_values("counts")
        assert values == {"i": 10, "f": 0.75, "big": 2**62 + 1, "neg": -4, "mix": 1.5}
        assert type(values["i"]) is int and type(values["big"]) is int
        assert type(values["f"]) is float and type(values["mix"]) is float
        assert type(store.get_value("counts", "i")) is int

    def test_large_commits_apply_every_key_and_partition(self, store: TransactionalStore, epoch: int) -> None:
        # More keys, partitions and labels than one bulk statement / Lua command chunk holds, through
        # every value path: int increments (exact and beyond 2^53), float increments and puts.
        parts, n = 1_234, 2_345
        first = batch(0, *(SeqRange(f"big{p}", 0, 3, note=f"n{p}" if p % 2 else None) for p in range(parts)))
        w = Writes()
        for i in range(n):
            w.incr("counts", f"k{i}", i).incr("floats", f"f{i}", 0.5)
            w.put("docs", f"d{i}", {"i": i} if i % 2 else i)
            w.add_label(f"label-{i}")
        w.incr("huge", "h", 2**60)
        assert store.commit(epoch, first, w) is APPLIED
        second = batch(1, *(SeqRange(f"big{p}", 3, 7, note="m" if p % 3 else None) for p in range(parts)))
        assert store.commit(epoch, second, Writes().incr("counts", "k7", 3).incr("huge", "h", 5)
                            .put("docs", "d3", "x")) is APPLIED
        counts = store.get_values("counts")
        assert len(counts) == n and counts["k7"] == 10 and counts[f"k{n - 1}"] == n - 1
        assert store.get_values("floats") == {f"f{i}": 0.5 for i in range(n)}
        docs = store.get_values("docs")
        assert docs["d1"] == {"i": 1} and docs["d2"] == 2 and docs["d3"] == "x" and len(docs) == n
        assert store.get_value("huge", "h") == 2**60 + 5
        assert store.has_label("label-0") and store.has_label(f"label-{n - 1}")
        positions = store.load_positions()
        assert len(positions) == parts and {p.offset for p in positions.values()} == {7}
        assert positions["seq:big2"] == Position(7, {"note": "m", "hi": 7})  # a document written by the second
        assert positions["seq:big3"] == Position(7, None)  # the first's document dropped: the second has none
        assert sum(p.meta is not None for p in positions.values()) == sum(1 for p in range(parts) if p % 3)

    def test_purge_logs_keeps_the_newest_committed_and_every_uncommitted_batch(
            self, store: TransactionalStore, epoch: int) -> None:
        assert store.purge_logs(epoch, 3) == 0  # nothing committed yet
        batches = [batch(i, SeqRange("s", 10 * i, 10 * i + 10)) for i in range(12)]
        for b in batches:
            store.log_batch(epoch, b)
        for b in batches[:10]:
            store.commit(epoch, b, Writes().incr("counts", "n").put_batch_rows("rows", [b.batch_id])
                         .add_label(f"L{b.batch_id}"))
        assert store.purge_logs(epoch, 3) == 7  # batches 0..6 go; 7, 8, 9 (committed) and 10, 11 stay
        assert [store.get_batch(i) for i in range(7)] == [None] * 7
        assert [store.get_batch(i) for i in range(7, 12)] == batches[7:]
        assert not store.is_committed(6) and store.is_committed(7) and store.is_committed(9)
        assert store.last_committed_batch_id() == 9 and store.last_logged_batch_id() == 11
        assert store.pending_batches() == batches[10:]
        assert store.get_value("counts", "n") == 10 and len(store.get_batch_rows("rows")) == 10
        assert store.has_label("L0") and store.load_positions() == {"seq:s": Position(100, None)}
        assert store.purge_logs(epoch, 3) == 0  # idempotent
        assert store.purge_logs(epoch, 1) == 2
        assert store.get_batch(8) is None and store.get_batch(9) == batches[9]
        # a commit of a dropped batch is still refused by the offsets: nothing is written twice
        with pytest.raises(OffsetConflictError, match="batch 3"):
            store.commit(epoch, batches[3], Writes().incr("counts", "n"))
        assert store.get_value("counts", "n") == 10
        store.commit(epoch, batches[10], Writes())
        assert store.pending_batches() == batches[11:]

    def test_purge_logs_is_fenced_and_checks_its_arguments(self, store: TransactionalStore, epoch: int) -> None:
        store.commit(epoch, B0, Writes())
        for bad in (0, -1, True, 1.5, "3"):
            with pytest.raises(ConfigurationError, match="keep"):
                store.purge_logs(epoch, bad)  # type: ignore[arg-type]
        newer = store.start_epoch()
        with pytest.raises(FencedError):
            store.purge_logs(epoch, 1)
        assert store.purge_logs(newer, 1) == 0

    def test_awkward_keys_round_trip(self, store: TransactionalStore, epoch: int) -> None:
        keys = ['quote"d', "back\\slash", "new\nline", "ünïcødé ✓", "{braces}", "comma,semi;colon", "'single'"]
        w = Writes()
        for i, k in enumerate(keys):
            w.incr("counts", k, i + 1).put("docs", k, {"key": k})
        store.commit(epoch, B0, w.put_batch_rows("rows", [{"k": k} for k in keys]).add_label(keys[0]))
        assert store.get_values("counts") == {k: i + 1 for i, k in enumerate(keys)}
        assert store.get_values("docs") == {k: {"key": k} for k in keys}
        assert store.get_batch_rows("rows") == {0: [{"k": k} for k in keys]}
        assert store.has_label(keys[0])

    def test_increment_refused_where_a_document_is_stored_among_counters(self, store: TransactionalStore,
                                                                         epoch: int) -> None:
        w = Writes().put("counts", "doc", [1])
        for i in range(1_500):
            w.incr("counts", f"k{i}")
        store.commit(epoch, B0, w)
        before = snapshot(store)
        w2 = Writes()
        for i in range(1_500):
            w2.incr("counts", f"k{i}")
        with pytest.raises(StoreError, match="counts/doc"):
            store.commit(epoch, B1, w2.incr("counts", "doc"))
        assert snapshot(store) == before

    def test_offsets_of_several_topics(self, store: TransactionalStore, epoch: int) -> None:
        first = batch(0, OffsetRange("a", 0, 0, 4), OffsetRange("b", 0, 7, 7), OffsetRange("a", 1, 2, 2),
                      OffsetRange("b", 3, 0, 1), OffsetRange("c.d_e-f", 12, 5, 9))
        assert store.commit(epoch, first, Writes()) is APPLIED
        tp, odd = TopicAndPartition, "c.d_e-f"
        assert store.load_offsets() == {tp("a", 0): 4, tp("b", 0): 7, tp("a", 1): 2, tp("b", 3): 1, tp(odd, 12): 9}
        second = batch(1, OffsetRange("a", 0, 4, 6), OffsetRange("a", 1, 2, 3), OffsetRange("b", 0, 7, 7))
        assert store.commit(epoch, second, Writes()) is APPLIED
        assert store.commit(epoch, second, Writes().incr("counts", "n")) is REPLAYED
        assert store.load_offsets() == {tp("a", 0): 6, tp("b", 0): 7, tp("a", 1): 3, tp("b", 3): 1, tp(odd, 12): 9}

    def test_counters_of_interleaved_namespaces(self, store: TransactionalStore, epoch: int) -> None:
        w = Writes()
        for i in range(30):
            w.incr(f"ns{i % 3}", f"k{i % 7}", i).incr("floats", f"k{i % 4}", 0.5)
        store.commit(epoch, B0, w)
        store.commit(epoch, B1, Writes().incr("ns1", "k1", 100).incr("ns0", "new", -1))
        for n in range(3):
            expected: Dict[str, int] = {}
            for i in range(n, 30, 3):
                expected[f"k{i % 7}"] = expected.get(f"k{i % 7}", 0) + i
            if n == 1:
                expected["k1"] += 100
            if n == 0:
                expected["new"] = -1
            assert store.get_values(f"ns{n}") == expected
        assert store.get_values("floats") == {f"k{j}": 0.5 * len(range(j, 30, 4)) for j in range(4)}

    def test_put_then_increment(self, store: TransactionalStore, epoch: int) -> None:
        store.commit(epoch, B0, Writes().put("v", "a", 10).put("v", "b", 1.5).put("v", "c", [1, "x"])
                     .put("v", "d", 1).incr("v", "d", 2))
        assert store.get_values("v") == {"a": 10, "b": 1.5, "c": [1, "x"], "d": 3}
        store.commit(epoch, B1, Writes().incr("v", "a", 1).incr("v", "b", 1).put("v", "c", None))
        assert store.get_values("v") == {"a": 11, "b": 2.5, "c": None, "d": 3}
        assert type(store.get_value("v", "a")) is int

    def test_incident_records_commit_with_the_batch(self, store: TransactionalStore, epoch: int) -> None:
        from dstream_exactly_once.stores._writes import RESERVED_NAMESPACE, incident_key
        doc = {"ranges": [{"key": "t/0", "start": 0, "end": 10}], "lost": 10}
        store.commit(epoch, B0, Writes().incr("counts", "n").record_incident("loss", 0, doc, "t/0"))
        key = incident_key("loss", 0, "t/0")
        assert store.get_values(RESERVED_NAMESPACE)[key] == doc
        # a replay of the committed batch writes nothing, so the record stays as it was
        assert store.commit(epoch, B0, Writes().record_incident("loss", 0, {"other": 1}, "t/0")) is REPLAYED
        assert store.get_values(RESERVED_NAMESPACE)[key] == doc
        with pytest.raises(ValueError, match="incident kind"):
            Writes().record_incident("oops", 1, {})

    def test_bad_values_rejected_before_anything_is_written(self, store: TransactionalStore, epoch: int) -> None:
        before = snapshot(store)
        for bad in (lambda w: w.put("docs", "k", object()), lambda w: w.put("docs", "k", float("nan")),
                    lambda w: w.incr("counts", "n", "1"), lambda w: w.incr("counts", "n", float("inf")),
                    lambda w: w.incr("counts", "n", True), lambda w: w.put_batch_rows("rows", [{1, 2}]),
                    lambda w: w.put("docs", 7, 1), lambda w: w.add_label(None)):
            with pytest.raises(ConfigurationError):
                bad(Writes())
        with pytest.raises(ConfigurationError, match="64-bit"):
            store.commit(epoch, B0, Writes().incr("counts", "n", 2**70))
        with pytest.raises(ConfigurationError, match="not one of batch 0"):
            store.commit(epoch, B0, Writes().incr("counts", "n"), ranges=[OffsetRange("t", 0, 0, 11)])
        with pytest.raises(ConfigurationError, match="Writes"):
            store.commit(epoch, B0, {"counts": 1})  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError, match="non-number"):
            store.commit(epoch, B0, Writes().put("counts", "n", "x").incr("counts", "n"))
        assert snapshot(store) == before

    # ---------------------------------------------------------------- offset log
    def test_log_batch_is_idempotent_and_refuses_a_different_entry(self, store: TransactionalStore,
                                                                    epoch: int) -> None:
        store.log_batch(epoch, B0)
        store.log_batch(epoch, B0)
        assert store.get_batch(0) == B0
        with pytest.raises(OffsetConflictError, match="batch 0"):
            store.log_batch(epoch, batch(0, OffsetRange("t", 0, 0, 11)))
        with pytest.raises(OffsetConflictError):
            store.log_batch(epoch, PlannedBatch(0, 99, B0.ranges))
        assert store.get_batch(0) == B0

    def test_commit_with_log_entry_logs_the_batch_in_the_same_transaction(self, store: TransactionalStore,
                                                                          epoch: int) -> None:
        """``log_entry=True``: one transaction writes the offset-log entry, results and positions."""
        assert store.commit(epoch, B0, full_writes(), log_entry=True) is APPLIED
        assert store.get_batch(0) == B0 and store.is_committed(0) and store.last_logged_batch_id() == 0
        assert store.pending_batches() == []
        assert store.commit(epoch, B0, full_writes(), log_entry=True) is REPLAYED  # a retry after a lost reply
        assert store.get_value("counts", "n") == 1
        store.log_batch(epoch, B1)  # an entry logged ahead (by the other mode) and identical: fine
        assert store.commit(epoch, B1, Writes().incr("counts", "n"), log_entry=True) is APPLIED
        assert store.get_batch(1) == B1 and store.get_value("counts", "n") == 2

    def test_commit_with_log_entry_refuses_another_entry_and_writes_nothing(self, store: TransactionalStore,
                                                                            epoch: int) -> None:
        store.commit(epoch, B0, Writes().incr("counts", "n"), log_entry=True)
        other = batch(1, OffsetRange("t", 0, 10, 12))
        store.log_batch(epoch, other)
        before = snapshot(store)
        with pytest.raises(OffsetConflictError, match="batch 1 is already in the offset log"):
            store.commit(epoch, B1, full_writes("b"), log_entry=True)
        assert snapshot(store) == before and store.get_batch(1) == other
        with pytest.raises(FencedError):
            store.commit(epoch + 1, B1, full_writes("b"), log_entry=True)
        with pytest.raises(ConfigurationError, match="log_entry"):
            store.commit(epoch, B1, Writes(), ranges=[B1.ranges[0]], complete_batch=False, log_entry=True)
        with pytest.raises(ConfigurationError, match="log_entry"):
            store.commit(epoch, B1, Writes(), log_entry=1)  # type: ignore[arg-type]
        assert snapshot(store) == before and store.get_batch(1) == other

    def test_pending_batches_in_order(self, store: TransactionalStore, epoch: int) -> None:
        assert store.pending_batches() == [] and store.last_logged_batch_id() is None
        b2 = batch(2, OffsetRange("t", 0, 15, 20))
        for b in (B0, B1, b2):
            store.log_batch(epoch, b)
        store.commit(epoch, B0, Writes())
        assert store.pending_batches() == [B1, b2]
        assert store.last_logged_batch_id() == 2 and store.last_committed_batch_id() == 0
        assert store.get_batch(1) == B1 and store.get_batch(9) is None
        assert not store.is_committed(1)

    def test_load_offsets(self, store: TransactionalStore, epoch: int) -> None:
        assert store.load_offsets() == {}
        store.commit(epoch, batch(0, OffsetRange("a.b-c_d", 3, 7, 9), OffsetRange("t/x", 0, 1, 2)), Writes())
        assert store.load_offsets() == {TopicAndPartition("a.b-c_d", 3): 9, TopicAndPartition("t/x", 0): 2}

    # ---------------------------------------------------------------- processes and applications
    def test_pickle_round_trip_then_commit(self, store: TransactionalStore, epoch: int) -> None:
        store.commit(epoch, B0, Writes().incr("counts", "n"))
        clone = pickle.loads(pickle.dumps(store))
        assert type(clone) is type(store) and repr(clone) == repr(store)
        assert clone.commit(epoch, B1, Writes().incr("counts", "n")) is APPLIED
        assert store.get_value("counts", "n") == 2
        clone.close()

    def test_apps_are_isolated(self, store: TransactionalStore, store_url: str, epoch: int) -> None:
        store.commit(epoch, B0, full_writes())
        with open_store(store_url, store.app_id + "-other") as other:
            assert other.current_epoch() == 0 and other.load_offsets() == {}
            assert other.get_values("counts") == {} and not other.has_label("L")
            assert other.get_batch_rows("rows") == {} and other.last_committed_batch_id() is None
            e = other.start_epoch()
            assert other.commit(e, B0, full_writes("o", 3)) is APPLIED
            assert other.get_value("counts", "n") == 3
        assert store.get_value("counts", "n") == 1 and store.current_epoch() == epoch

    @pytest.mark.parametrize("start, step", [(9 * 10**18, 3 * 10**17), (-9 * 10**18, -3 * 10**17),
                                             (10**18, 2**63 - 1), (0.5, 1.7e308)])
    @pytest.mark.parametrize("with_put", [False, True])
    def test_increment_leaving_the_64_bit_range_writes_nothing(self, store: TransactionalStore, epoch: int,
                                                               start: float, step: float, with_put: bool) -> None:
        # One contract for every store: numbers are 64-bit integers / finite doubles, as in Redis
        # (SQLite would silently turn the sum into an inexact REAL, PostgreSQL NUMERIC would grow).
        first = Writes().incr("counts", "near", start).incr("counts", "n", 1)
        if isinstance(start, float):
            first.incr("counts", "near", 1.6e308)
        store.commit(epoch, B0, first)
        before = snapshot(store)
        w = Writes()
        for i in range(30):  # increments before the failing key are not left behind
            w.incr("counts", f"k{i}")
        if with_put:  # the path where puts and increments of one commit are folded together
            w.put("counts", "p", 7)
        with pytest.raises(StoreError, match="counts/near.*64-bit range"):
            store.commit(epoch, B1, w.incr("counts", "n", 2).incr("counts", "near", step))
        assert snapshot(store) == before
        assert not store.is_committed(1) and store.get_value("counts", "p") is None


    def test_names_at_the_size_limit_are_kept(self, store: TransactionalStore, epoch: int) -> None:
        ns, key, label = "n" * MAX_KEY_BYTES, "é" * (MAX_KEY_BYTES // 2), "L" * MAX_KEY_BYTES
        store.commit(epoch, B0, Writes().incr(ns, key, 2).put(ns, "d", {"x": 1}).put_batch_rows(ns, [1])
                     .add_label(label))
        assert store.get_values(ns) == {key: 2, "d": {"x": 1}} and store.get_batch_rows(ns) == {0: [1]}
        assert store.has_label(label)
        with pytest.raises(ConfigurationError, match=f"at most {MAX_KEY_BYTES} bytes"):
            Writes().incr(ns + "n", key)

    def test_user_writes_cannot_spoof_the_reserved_namespace(self, store: TransactionalStore, epoch: int) -> None:
        store.log_batch(epoch, B0)
        before = snapshot(store), store.get_values(RESERVED_NAMESPACE)
        for call in (lambda w: w.put(RESERVED_NAMESPACE, "heartbeat", {"epoch": epoch + 5}),
                     lambda w: w.incr(RESERVED_NAMESPACE, "k"), lambda w: w.put_batch_rows(RESERVED_NAMESPACE, [1])):
            with pytest.raises(ConfigurationError, match="reserved"):
                call(full_writes())
        assert (snapshot(store), store.get_values(RESERVED_NAMESPACE)) == before
        store.commit(epoch, B0, full_writes().record_incident("skip", 0, {"by": "operator"}))
        assert store.get_values(RESERVED_NAMESPACE) == {incident_key("skip", 0): {"by": "operator"}}


def user_rows(store: TransactionalStore, sql: str) -> list:
    """Rows of ``sql`` run as written (no placeholder rewriting) on the store's read connection."""
    with store._read() as (cur, _):  # type: ignore[attr-defined]
        cur._cur.execute(sql)
        return [tuple(r) for r in cur._cur.fetchall()]


class SQLContract:
    """Your own SQL inside the commit transaction (``Writes.execute``), SQL stores only."""

    def test_user_sql_commits_with_offsets_and_not_on_replay(self, store: TransactionalStore, epoch: int) -> None:
        table = "user_" + store.app_id.replace("-", "_")
        store.commit(epoch, batch(9, OffsetRange("u", 0, 0, 0)),  # a setup commit outside the batch sequence
                     Writes().execute(f"CREATE TABLE IF NOT EXISTS {table} (k TEXT PRIMARY KEY, n INTEGER)"),
                     complete_batch=False)
        store.log_batch(epoch, B0)
        w = Writes().execute(f"INSERT INTO {table} (k, n) VALUES (?, ?)", ("a", 7))
        assert store.commit(epoch, B0, w) is APPLIED
        assert store.commit(epoch, B0, w) is REPLAYED  # a replay does not run the statement again
        assert store.load_offsets()[P0] == 10
        with store._read() as (cur, _):  # type: ignore[attr-defined]
            assert cur.all(f"SELECT k, n FROM {table}") == [("a", 7)]

    def test_failing_user_sql_rolls_everything_back(self, store: TransactionalStore, epoch: int) -> None:
        store.log_batch(epoch, B0)
        before = snapshot(store)
        with pytest.raises(StoreError) as info:
            store.commit(epoch, B0, full_writes().execute("INSERT INTO no_such_table VALUES (1)"))
        assert snapshot(store) == before
        message = str(info.value)
        assert "no_such_table" in message and f"Batch 0 (ranges {R0}, {R1})" in message
        assert "dstream-eo batches skip --store " in message
        assert f"--app {store.app_id} --batch 0" in message and "deo-test-pw" not in message

    def test_counters_bound_row_by_row_give_the_same_results(self, store: TransactionalStore, epoch: int) -> None:
        # The path taken where the JSON-object statement cannot be used (an SQLite without JSON).
        store.json_pairs = ""  # type: ignore[attr-defined]
        store.commit(epoch, B0, Writes().incr("counts", "a", 2).incr("counts", "b", 1).put("counts", "doc", [1]))
        store.commit(epoch, B1, Writes().incr("counts", "a", 3).incr("other", "c", 4))
        assert store.get_values("counts") == {"a": 5, "b": 1, "doc": [1]}
        assert store.get_values("other") == {"c": 4}
        assert store.load_offsets() == {P0: 15, P1: 5}
        assert store.commit(epoch, B1, Writes().incr("counts", "a")) is REPLAYED
        epoch = store.start_epoch()  # the first commit of an epoch compares every range
        with pytest.raises(OffsetConflictError):
            store.commit(epoch, batch(2, OffsetRange("t", 0, 16, 17)), Writes().incr("counts", "a"))
        before = snapshot(store)
        with pytest.raises(StoreError, match="counts/doc"):
            store.commit(epoch, batch(2, OffsetRange("t", 0, 15, 17)),
                         Writes().incr("counts", "a").incr("counts", "doc"))
        assert snapshot(store) == before

    @pytest.mark.parametrize("limit, step", [(2**63 - 1, 1), (-(2**63), -1)])
    def test_counters_reach_the_64_bit_limits_exactly(self, store: TransactionalStore, epoch: int,
                                                      limit: int, step: int) -> None:
        # The SQL range check is exact (Redis checks in doubles, a little short of the limits).
        store.commit(epoch, B0, Writes().incr("counts", "n", limit - 5 * step))
        store.commit(epoch, B1, Writes().incr("counts", "n", 5 * step))
        assert store.get_value("counts", "n") == limit and type(store.get_value("counts", "n")) is int
        before = snapshot(store)
        with pytest.raises(StoreError, match="counts/n .it would leave the 64-bit range"):
            store.commit(epoch, batch(2, OffsetRange("t", 0, 15, 16)), Writes().incr("counts", "n", step))
        assert snapshot(store) == before

    @pytest.mark.parametrize("statement", ["COMMIT", "ROLLBACK", "END", "RELEASE SAVEPOINT deo_user_sql"])
    def test_sql_that_ends_the_transaction_fails_the_commit_and_writes_nothing(
            self, store: TransactionalStore, epoch: int, statement: str) -> None:
        # Writes.execute refuses these when the Writes is built; the store's own check is the second
        # line, for statements that reach it anyway (appended to ``statements`` directly here).
        store.log_batch(epoch, B0)
        before = snapshot(store)
        w = full_writes()
        w.statements.append((statement, ()))
        with pytest.raises(StoreError, match="ended the store's transaction|in the SQL of Writes.execute") as info:
            store.commit(epoch, B0, w)
        assert snapshot(store) == before
        assert "dstream-eo batches skip" in str(info.value) and "--batch 0" in str(info.value)
        assert store.commit(epoch, B0, full_writes()) is APPLIED  # the connection is usable again
        assert store.get_value("counts", "n") == 1 and store.load_offsets()[P0] == 10

    def test_transaction_control_is_refused_before_anything_is_written(self, store: TransactionalStore,
                                                                        epoch: int) -> None:
        store.log_batch(epoch, B0)
        before = snapshot(store)
        for statement in ("COMMIT", "/* c */ rollback", "SELECT 1; COMMIT", "SAVEPOINT x", "start transaction"):
            with pytest.raises(ConfigurationError, match="Writes.execute"):
                store.commit(epoch, B0, full_writes().execute(statement))
        assert snapshot(store) == before

    def test_percent_and_question_marks_in_literals_reach_the_database_unchanged(
            self, store: TransactionalStore, epoch: int) -> None:
        table = "lit_" + store.app_id.replace("-", "_").replace(".", "_").replace(":", "_")
        store.commit(epoch, batch(9, OffsetRange("u", 0, 0, 0)), Writes().execute(
            f'CREATE TABLE IF NOT EXISTS {table} (k TEXT PRIMARY KEY, "odd?%col" TEXT, n INTEGER)'),
            complete_batch=False)  # a setup commit outside the batch sequence
        w = (Writes()
             .execute(f"INSERT INTO {table} (k, \"odd?%col\", n) VALUES ('a%', 'what? 100%', ?)", (1,))
             .execute(f"INSERT INTO {table} (k, n) VALUES (?, ?) -- a comment with ? and %", ("ab?", 2))
             .execute(f"/* ? % */ INSERT INTO {table} (k, n) VALUES ('b''?%', ?)", (3,))
             .execute(f"UPDATE {table} SET n = n + 10 WHERE k LIKE 'a%' AND n < ?", (5,)))
        assert store.commit(epoch, B0, w) is APPLIED
        rows = user_rows(store, f'SELECT k, "odd?%col", n FROM {table} ORDER BY k')
        assert rows == [("a%", "what? 100%", 11), ("ab?", None, 12), ("b'?%", None, 3)]

    def test_bad_statement_arguments(self) -> None:
        with pytest.raises(ConfigurationError, match="non-empty str"):
            Writes().execute("  ")
        with pytest.raises(ConfigurationError, match="sequence"):
            Writes().execute("SELECT 1", "abc")


class TestSQLiteStore(SQLContract, StoreContract):
    store_class = SQLiteStore

    @pytest.fixture
    def store_url(self, tmp_path: Any) -> str:
        return f"sqlite:///{tmp_path}/sub/dir/store.db?create_dirs=true"  # the first write creates sub/dir

    def write_schema_version(self, url: str, app_id: str, version: int) -> None:
        with sqlite3.connect(url[len("sqlite:///"):].partition("?")[0]) as conn:
            conn.execute("UPDATE deo_meta SET schema_version = ? WHERE app = ?", (version, app_id))

    def test_relative_path_is_resolved_for_executors(self, tmp_path: Any, monkeypatch: Any, app_id: str) -> None:
        monkeypatch.chdir(tmp_path)
        store = open_store("sqlite:///rel/x.db?timeout=2&create_dirs=true", app_id)
        assert store.url == f"sqlite:///{tmp_path}/rel/x.db?timeout=2&create_dirs=true"
        assert not (tmp_path / "rel").exists()  # opening writes nothing; the first write creates the file
        store.start_epoch()
        assert (tmp_path / "rel" / "x.db").exists()
        assert pickle.loads(pickle.dumps(store)).url == store.url

    def test_keys_with_nul_characters_are_counted(self, store: TransactionalStore, epoch: int) -> None:
        store.commit(epoch, B0, Writes().incr("counts", "a\x00b", 2).incr("counts", "a", 1))
        store.commit(epoch, B1, Writes().incr("counts", "a\x00b", 3))
        assert store.get_values("counts") == {"a": 1, "a\x00b": 5}

    @pytest.mark.parametrize("url", ["sqlite://", "sqlite:///", "sqlite:///:memory:", "sqlite:///x.db?bogus=1",
                                     "sqlite:///x.db?timeout=-1"])
    def test_bad_urls(self, url: str, app_id: str) -> None:
        with pytest.raises(ConfigurationError):
            open_store(url, app_id)


    def test_a_literal_question_mark_operator_is_refused_before_anything_is_written(
            self, store: TransactionalStore, epoch: int) -> None:
        store.log_batch(epoch, B0)
        before = snapshot(store)
        with pytest.raises(ConfigurationError, match="PostgreSQL"):
            store.commit(epoch, B0, full_writes().execute("SELECT '{}' ?? 'k'"))
        assert snapshot(store) == before


    def test_a_refused_statement_does_not_create_a_fresh_database_file(self, store: TransactionalStore) -> None:
        path = store.path  # type: ignore[attr-defined]
        with pytest.raises(ConfigurationError, match="PostgreSQL"):
            store.commit(1, B0, full_writes().execute("SELECT '{}' ?? 'k'"))
        assert not os.path.exists(path)


class TestPostgresStore(SQLContract, StoreContract):
    store_class = PostgresStore

    @pytest.fixture
    def store_url(self, postgres_url: str) -> str:
        return postgres_url

    def write_schema_version(self, url: str, app_id: str, version: int) -> None:
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("UPDATE deo_meta SET schema_version = %s WHERE app = %s", (version, app_id))

    def test_tables_rewritten_by_every_commit_leave_room_for_hot_updates(self, store: TransactionalStore,
                                                                         epoch: int, store_url: str) -> None:
        import psycopg

        store.commit(epoch, B0, Writes().incr("counts", "n"))
        with psycopg.connect(store_url, autocommit=True) as conn:
            options = dict(conn.execute("SELECT relname, reloptions FROM pg_class WHERE relname IN "
                                        "('deo_values', 'deo_positions', 'deo_batches')").fetchall())
        assert options == {"deo_values": ["fillfactor=50"], "deo_positions": ["fillfactor=50"], "deo_batches": None}

    def test_jsonb_operators_work_in_user_sql(self, store: TransactionalStore, epoch: int) -> None:
        table = "js_" + store.app_id.replace("-", "_").replace(".", "_").replace(":", "_")
        store.commit(epoch, batch(9, OffsetRange("u", 0, 0, 0)), Writes().execute(
            f"CREATE TABLE IF NOT EXISTS {table} (id INTEGER PRIMARY KEY, doc JSONB, hits TEXT DEFAULT '')"),
            complete_batch=False)  # a setup commit outside the batch sequence
        w = (Writes()
             .execute(f"INSERT INTO {table} (id, doc) VALUES (1, ?::jsonb), (2, ?::jsonb)",
                      ('{"a": 1, "b": "x%"}', '{"c": 2}'))
             .execute(f"UPDATE {table} SET hits = hits || 'q' WHERE doc ?? ?", ("a",))
             .execute(f"UPDATE {table} SET hits = hits || 'any' WHERE doc ??| array['c', 'z']")
             .execute(f"UPDATE {table} SET hits = hits || 'all' WHERE doc ??& array[?, ?]", ("a", "b"))
             .execute(f"UPDATE {table} SET hits = hits || 'has' WHERE doc @> ?::jsonb", ('{"b": "x%"}',)))
        assert store.commit(epoch, B0, w) is APPLIED
        assert user_rows(store, f"SELECT id, hits FROM {table} ORDER BY id") == [(1, "qallhas"), (2, "any")]

    @pytest.mark.parametrize("build", [
        lambda w: w.incr("counts", "a\x00b"), lambda w: w.put("do\x00cs", "k", 1), lambda w: w.add_label("L\x00"),
        lambda w: w.put_batch_rows("ro\x00ws", [1]), lambda w: w.execute("SELECT CAST(? AS TEXT)", ("a\x00",))])
    def test_nul_characters_in_names_are_refused_before_anything_is_written(
            self, store: TransactionalStore, epoch: int, build) -> None:
        store.log_batch(epoch, B0)
        before = snapshot(store)
        with pytest.raises(ConfigurationError, match="NUL character"):
            store.commit(epoch, B0, build(full_writes()))
        assert snapshot(store) == before
        store.commit(epoch, B0, full_writes().put("docs", "nul", "a\x00b"))  # inside JSON values it is kept
        assert store.get_value("docs", "nul") == "a\x00b"

    def test_repr_hides_password(self, store: TransactionalStore) -> None:
        assert "deo-test-pw" not in repr(store) and ":***@" in repr(store)


class TestRedisStore(StoreContract):
    """On a single Redis server and on a Redis Cluster (``any_redis_url``)."""

    store_class: type = RedisStore

    @pytest.fixture
    def store_url(self, any_redis_url: str) -> str:
        self.store_class = RedisClusterStore if any_redis_url.startswith("redis+cluster") else RedisStore
        return any_redis_url

    def write_schema_version(self, url: str, app_id: str, version: int) -> None:
        raw_redis_client(url).set("{deo:" + app_id + "}:schema", version)

    def test_user_sql_is_refused_before_anything_is_written(self, store: TransactionalStore, epoch: int) -> None:
        store.log_batch(epoch, B0)
        before = snapshot(store)
        with pytest.raises(ConfigurationError, match="Redis store cannot"):
            store.commit(epoch, B0, full_writes().execute("SELECT 1"))
        assert snapshot(store) == before

    def test_overflow_bound_is_made_from_the_values_kept_and_refuses_like_the_exact_check(
            self, store: TransactionalStore, epoch: int, store_url: str) -> None:
        """The per-namespace bound ``vb`` lets small increments skip the per-key pre-read; a namespace
        written before the bound existed gets one from its values (HVALS), and int puts raise it."""
        client = raw_redis_client(store_url, decode_responses=True)
        prefix = "{deo:" + store.app_id + "}:"
        store.commit(epoch, B0, Writes().incr("counts", "a", 5).incr("counts", "b", -7))
        assert float(client.get(prefix + "vb:counts")) >= 7
        # an older library's namespace: a big value and no bound key
        client.hset(prefix + "vi:old", mapping={"big": str(2**63 - 10), "small": "1"})
        before = snapshot(store)
        with pytest.raises(StoreError, match="old/big: it would leave the 64-bit range"):
            store.commit(epoch, B1, Writes().incr("old", "small", 1).incr("old", "big", 20))
        assert snapshot(store) == before and client.hget(prefix + "vi:old", "small") == "1"
        assert client.get(prefix + "vb:old") is None  # nothing written, the bound neither
        store.commit(epoch, B1, Writes().incr("old", "small", 1))  # from HVALS: stays exact near the limit
        assert float(client.get(prefix + "vb:old")) >= 2**63 - 10
        b2 = batch(2, OffsetRange("t", 0, 15, 17))
        with pytest.raises(StoreError, match="old/big"):
            store.commit(epoch, b2, Writes().incr("old", "big", 20))
        # an int put raises the bound of a namespace that has one, in the same commit as increments too
        store.commit(epoch, b2, Writes().put("counts", "huge", 2**63 - 3).incr("counts", "a", 1))
        assert float(client.get(prefix + "vb:counts")) >= 2**63 - 3
        before = snapshot(store)
        with pytest.raises(StoreError, match="counts/huge"):
            store.commit(epoch, batch(3, OffsetRange("t", 0, 17, 18)), Writes().incr("counts", "huge", 5))
        assert snapshot(store) == before
        assert store.get_value("counts", "a") == 6 and store.get_value("old", "small") == 2

    def test_all_keys_share_the_app_hash_tag(self, store: TransactionalStore, epoch: int, store_url: str) -> None:
        from redis.crc import key_slot

        store.log_batch(epoch, B0)
        store.commit(epoch, B0, full_writes().incr("counts", "f", 0.5))
        client = raw_redis_client(store_url, decode_responses=True)
        keys = set(client.scan_iter(match="{deo:" + store.app_id + "}:*"))
        prefix = "{deo:" + store.app_id + "}:"
        assert {prefix + k for k in ("schema", "epoch", "offsets", "batches", "commits", "labels", "flat", "vi:counts",
                                     "vf:counts", "vb:counts", "vj:docs", "rows:rows")} == keys
        assert len({key_slot(k.encode()) for k in keys}) == 1
        assert client.zrange(prefix + "batches", 0, -1) == [B0.to_json()]


def test_writes_copy_is_independent_and_complete():
    w = full_writes().execute("SELECT ?", (1,))
    c = w.copy()
    assert c == w and c is not w
    c.incr("counts", "n").add_label("M").execute("SELECT 2")
    c.batch_rows["rows"].append("x")
    assert w == full_writes().execute("SELECT ?", (1,))
