"""The source-agnostic core without Spark: the error boundary, range kinds, and the committer's
launch order (validate the source against the store's state before taking an epoch)."""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Iterable, List, Mapping, Optional, Sequence

import pytest

from dstream_exactly_once import ConfigurationError, FencedError, OffsetRange, OutputError, Writes, open_store
from dstream_exactly_once.core._ranges import Position, SourceRange, check_ranges, decode_range, encode_range
from dstream_exactly_once.core._source import BatchSource, RangeReader
from dstream_exactly_once.engine._boundary import user_code
from dstream_exactly_once.engine._committer import BatchCommitter
from dstream_exactly_once.stores._base import CommitOutcome, PlannedBatch


class _Reader(RangeReader):
    def read(self, r: SourceRange) -> Iterable[Any]:
        return range(r.start, r.end)


class CountingSource(BatchSource):
    """A source over one partition "numbers/0" whose log end moves when the test says so."""

    kind = OffsetRange.kind

    def __init__(self, *, valid: bool = True) -> None:
        self.valid = valid
        self.log_end = 0
        self.next = 0
        self.started: List[Mapping[str, Position]] = []

    def describe(self) -> str:
        return "numbers"

    def start(self, positions: Mapping[str, Position]) -> None:
        if not self.valid:
            raise ConfigurationError("topic 'numbrs' does not exist")
        self.started.append(dict(positions))
        self.next = positions["numbers/0"].offset if "numbers/0" in positions else 0

    def advance(self, ranges: Sequence[SourceRange]) -> None:
        for r in ranges:
            self.next = r.end

    def plan(self, time: datetime) -> List[SourceRange]:
        r = OffsetRange("numbers", 0, self.next, self.log_end)
        self.next = self.log_end
        return [r]

    def reader(self) -> RangeReader:
        return _Reader()


def _digest(path: Path) -> Optional[str]:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None


T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def test_user_code_boundary_wraps_user_exceptions_once_and_names_the_batch():
    batch = PlannedBatch(7, 0, (OffsetRange("t", 0, 0, 5),))
    named = r"batch 7 .*topic: 't', partition: 0, range: \[0 -> 5\].*ValueError: boom"
    with pytest.raises(OutputError, match=named) as info:
        with user_code(batch):
            raise ValueError("boom")
    assert isinstance(info.value.__cause__, ValueError)
    assert info.value.batch == 7
    assert "dstream-eo batches skip --store URL --app ID --batch 7 --execute" in str(info.value)


def test_user_code_boundary_lets_library_errors_and_system_exit_pass_unchanged():
    batch = PlannedBatch(1, 0, (OffsetRange("t", 0, 0, 5),))
    fenced = FencedError("newer driver")
    with pytest.raises(FencedError) as info:
        with user_code(batch):
            raise fenced
    assert info.value is fenced
    with pytest.raises(SystemExit):
        with user_code(batch):
            raise SystemExit(3)
    with pytest.raises(KeyboardInterrupt):
        with user_code(batch):
            raise KeyboardInterrupt


def test_range_kinds_round_trip_and_kafka_keeps_the_version_1_encoding():
    r = OffsetRange("events", 3, 10, 20)
    assert encode_range(r) == ["events", 3, 10, 20]  # offset logs of the previous release decode unchanged
    assert decode_range(["events", 3, 10, 20]) == r
    assert (r.position_key, r.start, r.end) == ("events/3", 10, 20)
    assert OffsetRange.parse_position_key("events/3").partition == 3
    assert OffsetRange.parse_position_key("file:abc") is None
    with pytest.raises(ConfigurationError, match="unknown range kind 'nope'"):
        decode_range({"kind": "nope"})


def test_two_ranges_of_one_partition_are_refused_naming_both():
    a, b = OffsetRange("t", 0, 0, 10), OffsetRange("t", 0, 5, 15)
    with pytest.raises(ConfigurationError, match=r"overlapping ranges of t/0: t-0 \[0 -> 10\) and t-0 \[5 -> 15\)"):
        check_ranges([a, b], "offsetRanges", one_per_partition=False)
    assert check_ranges([a, OffsetRange("t", 0, 10, 15)], "offsetRanges", one_per_partition=False)
    with pytest.raises(ConfigurationError, match=r"two ranges of t/0: t-0 \[0 -> 10\) and t-0 \[5 -> 15\)"):
        check_ranges([a, b], "offsetRanges")


def test_a_launch_whose_source_is_invalid_writes_nothing_and_fences_nobody(tmp_path):
    url = f"sqlite:///{tmp_path}/state.db"
    live = BatchCommitter(open_store(url, "app"), CountingSource())
    assert live.epoch == 1
    before = _digest(tmp_path / "state.db")
    with pytest.raises(ConfigurationError, match="numbrs"):
        BatchCommitter(open_store(url, "app"), CountingSource(valid=False))
    with pytest.raises(ConfigurationError, match="retain_batches must be an int >= 1, got 0"):
        BatchCommitter(open_store(url, "app"), CountingSource(), retain_batches=0)
    assert _digest(tmp_path / "state.db") == before
    assert open_store(url, "app").current_epoch() == 1
    # the live driver still commits
    live.source.log_end = 5  # type: ignore[attr-defined]
    batch = live.next_batch(T0)
    assert batch is not None
    assert live.store.commit(live.epoch, batch, Writes().incr("n", "sum", 10)) is CommitOutcome.APPLIED


def test_a_new_driver_replays_the_uncommitted_batch_and_plans_after_it(tmp_path):
    url = f"sqlite:///{tmp_path}/state.db"
    first = BatchCommitter(open_store(url, "app"), CountingSource())
    first.source.log_end = 4  # type: ignore[attr-defined]
    b0 = first.next_batch(T0)
    assert b0 is not None
    first.store.commit(first.epoch, b0, Writes().incr("n", "sum", 6))
    first.source.log_end = 9  # type: ignore[attr-defined]
    b1 = first.next_batch(T0 + timedelta(seconds=1))  # logged, never committed: the driver dies here
    assert b1 is not None and b1.ranges == (OffsetRange("numbers", 0, 4, 9),)

    source = CountingSource()
    source.log_end = 12
    second = BatchCommitter(open_store(url, "app"), source)
    assert second.epoch == 2 and source.started[-1] == {"numbers/0": Position(4)}
    assert second.next_batch(T0 + timedelta(seconds=2)) == b1  # replayed with its id and ranges
    nxt = second.next_batch(T0 + timedelta(seconds=3))
    assert nxt is not None and nxt.batch_id == 2 and nxt.ranges == (OffsetRange("numbers", 0, 9, 12),)
    with pytest.raises(FencedError):
        first.store.commit(first.epoch, b1, Writes().incr("n", "sum", 1))


def test_an_idle_fenced_driver_learns_it_at_its_next_batch(tmp_path):
    url = f"sqlite:///{tmp_path}/state.db"
    zombie = BatchCommitter(open_store(url, "app"), CountingSource())
    BatchCommitter(open_store(url, "app"), CountingSource())
    with pytest.raises(FencedError, match="epoch 1 is fenced"):
        zombie.next_batch(T0)  # nothing new to read, but the epoch is checked
    assert zombie.failed is not None


def test_a_store_of_another_source_is_refused_before_the_epoch(tmp_path):
    url = f"sqlite:///{tmp_path}/state.db"
    store = open_store(url, "app")
    store.commit(store.start_epoch(), PlannedBatch(0, 0, (OffsetRange("numbers", 0, 0, 3),)), Writes())
    store.log_batch(1, PlannedBatch(1, 0, (OffsetRange("numbers", 0, 3, 5),)))
    other = CountingSource()
    other.kind = "file"
    with pytest.raises(ConfigurationError, match="uncommitted batch 1 of another source"):
        BatchCommitter(open_store(url, "app"), other)
    assert open_store(url, "app").current_epoch() == 1


class ManyPartitionsSource(CountingSource):
    """Partitions "wide/0" .. "wide/<n-1>"; ``data`` says which of them get 10 records in the next batch."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n, self.data = n, set()  # type: ignore[var-annotated]
        self.pos = {p: 0 for p in range(n)}

    def start(self, positions: Mapping[str, Position]) -> None:
        for key, pos in positions.items():
            self.pos[int(key.split("/")[1])] = pos.offset

    def advance(self, ranges: Sequence[SourceRange]) -> None:
        for r in ranges:
            self.pos[r.partition] = r.end  # type: ignore[attr-defined]

    def plan(self, time: datetime) -> List[SourceRange]:
        out: List[SourceRange] = []
        for p in range(self.n):
            end = self.pos[p] + (10 if p in self.data else 0)
            out.append(OffsetRange("wide", p, self.pos[p], end))
            self.pos[p] = end
        return out


def test_the_offset_log_keeps_ranges_with_data_and_first_positions_and_replays_exactly(tmp_path):
    url = f"sqlite:///{tmp_path}/state.db"
    source = ManyPartitionsSource(6)
    first = BatchCommitter(open_store(url, "app"), source)
    first.compact_log = True  # as commit_each_batch / foreach_batch set it
    source.data = {0}
    b0 = first.next_batch(T0 + timedelta(seconds=1))
    assert b0 is not None and len(b0.ranges) == 6  # offsetRanges() sees every partition
    # the log holds the range with data and the empty ranges of partitions without a position yet
    assert first.store.get_batch(0) == first.stored_form(b0) == b0
    first.store.commit(first.epoch, first.stored_form(b0), Writes().incr("n", "rows", 10))
    first.committed_batch(CommitOutcome.APPLIED, b0)
    source.data = {3}
    b1 = first.next_batch(T0 + timedelta(seconds=2))
    assert b1 is not None and len(b1.ranges) == 6
    logged = first.store.get_batch(1)
    assert logged == first.stored_form(b1) and logged is not None
    assert logged.ranges == (OffsetRange("wide", 3, 0, 10),)  # the other five are where the store has them
    first.store.commit(first.epoch, first.stored_form(b1), Writes().incr("n", "rows", 10))
    first.committed_batch(CommitOutcome.APPLIED, b1)
    source.data = {1, 5}
    b2 = first.next_batch(T0 + timedelta(seconds=3))  # logged, never committed: the driver dies here
    assert b2 is not None

    again = ManyPartitionsSource(6)
    second = BatchCommitter(open_store(url, "app"), again)
    second.compact_log = True
    replay = second.next_batch(T0 + timedelta(seconds=4))
    assert replay is not None and replay.batch_id == 2
    assert replay.ranges == (OffsetRange("wide", 1, 0, 10), OffsetRange("wide", 5, 0, 10))
    assert second.store.commit(second.epoch, second.stored_form(replay), Writes()) is CommitOutcome.APPLIED
    again.data = {2}
    b3 = second.next_batch(T0 + timedelta(seconds=5))
    assert b3 is not None and b3.batch_id == 3
    assert {r.position_key: (r.start, r.end) for r in b3.ranges} == {
        "wide/0": (10, 10), "wide/1": (10, 10), "wide/2": (0, 10), "wide/3": (10, 10), "wide/4": (0, 0),
        "wide/5": (10, 10)}
    second.store.commit(second.epoch, second.stored_form(b3), Writes())
    assert {k: p.offset for k, p in second.store.load_positions().items()} == {
        f"wide/{p}": end for p, end in enumerate([10, 10, 10, 10, 0, 10])}


def test_stored_form_leaves_out_only_empty_ranges_of_known_partitions():
    b = PlannedBatch(4, 1_000, (OffsetRange("t", 0, 5, 9), OffsetRange("t", 1, 3, 3), OffsetRange("t", 2, 0, 0)))
    assert b.stored_form(set()) is b
    assert b.stored_form({"t/0", "t/1"}).ranges == (OffsetRange("t", 0, 5, 9), OffsetRange("t", 2, 0, 0))
    assert b.stored_form({"t/0", "t/1", "t/2"}) == PlannedBatch(4, 1_000, (OffsetRange("t", 0, 5, 9),))


def test_without_compact_log_every_range_is_logged(tmp_path):
    source = ManyPartitionsSource(3)
    committer = BatchCommitter(open_store(f"sqlite:///{tmp_path}/state.db", "app"), source)
    source.data = {1}
    committer.next_batch(T0 + timedelta(seconds=6))
    # per-partition outputs: a replay must keep each range's partition
    b1 = committer.next_batch(T0 + timedelta(seconds=7))
    assert b1 is None or committer.store.get_batch(b1.batch_id) == b1
    source.data = {2}
    b = committer.next_batch(T0 + timedelta(seconds=8))
    assert b is not None and committer.store.get_batch(b.batch_id) == b and len(b.ranges) == 3


def _at(seconds: int) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_batches_planned_ahead_of_their_commits_chain_and_replay_in_order(tmp_path):
    """Spark generates (plans and logs) batch n+1 while batch n still runs: each plan starts where the
    previous plan ended, and a restart replays every uncommitted batch in id order."""
    url = f"sqlite:///{tmp_path}/state.db"
    first = BatchCommitter(open_store(url, "app"), CountingSource())
    planned = []
    for t, end in ((1, 3), (2, 7), (3, 10)):
        first.source.log_end = end  # type: ignore[attr-defined]
        b = first.next_batch(_at(t))
        assert b is not None
        planned.append(b)
    assert [(b.batch_id, b.ranges[0].start, b.ranges[0].end) for b in planned] == [(0, 0, 3), (1, 3, 7), (2, 7, 10)]
    assert first.next_batch(_at(2)) is planned[1]  # asked again for a generated time: the same batch
    assert first.batch_at(_at(2)) is planned[1]
    assert first.store.commit(first.epoch, planned[0], Writes().incr("n", "sum", 3)) is CommitOutcome.APPLIED
    assert [b.batch_id for b in first.store.pending_batches()] == [1, 2]

    source = CountingSource()
    source.log_end = 12
    second = BatchCommitter(open_store(url, "app"), source)
    assert source.started[-1] == {"numbers/0": Position(3)}
    assert [second.next_batch(_at(t)) for t in (4, 5)] == planned[1:]
    nxt = second.next_batch(_at(6))
    assert nxt is not None and (nxt.batch_id, nxt.ranges) == (3, (OffsetRange("numbers", 0, 10, 12),))


def test_a_failed_batch_stops_the_batches_planned_after_it(tmp_path):
    c = BatchCommitter(open_store(f"sqlite:///{tmp_path}/state.db", "app"), CountingSource())
    c.source.log_end = 4  # type: ignore[attr-defined]
    assert c.next_batch(_at(1)) is not None
    c.source.log_end = 8  # type: ignore[attr-defined]
    assert c.next_batch(_at(2)) is not None  # planned while batch 0 runs
    c.fail(OutputError("batch 0 failed"))
    with pytest.raises(Exception, match="stopped committing after an earlier failure: batch 0 failed"):
        c.batch_at(_at(2))
    c.source.log_end = 12  # type: ignore[attr-defined]
    assert c.next_batch(_at(3)) is None and c.source.next == 8  # type: ignore[attr-defined]


def test_an_older_batch_time_no_longer_remembered_is_never_planned_again(tmp_path):
    c = BatchCommitter(open_store(f"sqlite:///{tmp_path}/state.db", "app"), CountingSource())
    c.source.log_end = 4  # type: ignore[attr-defined]
    assert c.next_batch(_at(5)) is not None
    c.source.log_end = 9  # type: ignore[attr-defined]
    with pytest.raises(Exception, match="was planned but is no longer remembered"):
        c.next_batch(_at(1))
    assert c.failed is not None and c.source.next == 4  # type: ignore[attr-defined]


class RetiringSource(CountingSource):
    """Partitions "numbers/0" and "numbers/1"; partition 1 is retired until the test brings it back."""

    def __init__(self) -> None:
        super().__init__()
        self.retired = ["numbers/1"]
        self.read_again = False
        self.forgotten: List[str] = []

    def plan(self, time: datetime) -> List[SourceRange]:
        ranges = super().plan(time)
        return ranges + ([OffsetRange("numbers", 1, 7, 9)] if self.read_again else [])

    def retired_positions(self) -> List[str]:
        return list(self.retired)

    def forget_positions(self, keys: Any) -> None:
        self.forgotten.extend(keys)


def test_a_dropped_position_a_newer_plan_reads_is_not_forgotten_by_the_source(tmp_path):
    """The commit of batch 0 drops the stored position of a retired partition; batch 1, planned while
    batch 0 ran, reads that partition again: the source keeps following it."""
    source = RetiringSource()
    c = BatchCommitter(open_store(f"sqlite:///{tmp_path}/state.db", "app"), source, retain_batches=1)
    source.log_end = 4
    b0 = c.next_batch(_at(1))
    assert b0 is not None and c.position_drops(b0) == ["numbers/1"]
    source.retired, source.read_again, source.log_end = [], True, 6  # the partition came back
    b1 = c.next_batch(_at(2))
    assert b1 is not None and "numbers/1" in {r.position_key for r in b1.ranges}
    c.committed_batch(CommitOutcome.APPLIED, b0, ["numbers/1"])
    assert source.forgotten == []
    source.retired, source.read_again = ["numbers/1"], False
    c.source.log_end = 8
    b2 = c.next_batch(_at(3))
    assert b2 is not None and c.position_drops(b2) == ["numbers/1"]  # batch 1 is out of the retained window
    c.committed_batch(CommitOutcome.APPLIED, b2, ["numbers/1"])
    assert source.forgotten == ["numbers/1"]


def test_with_catch_up_a_batch_generated_behind_an_uncommitted_one_plans_nothing_and_the_next_takes_the_backlog(
        tmp_path):
    url = f"sqlite:///{tmp_path}/state.db"
    c = BatchCommitter(open_store(url, "app"), CountingSource(), catch_up=True)
    c.source.log_end = 4  # type: ignore[attr-defined]
    first = c.next_batch(_at(1))
    assert first is not None and first.ranges[0].end == 4
    for t, end in ((2, 6), (3, 9)):  # batch 0 still runs: nothing new is planned or logged
        c.source.log_end = end  # type: ignore[attr-defined]
        assert c.next_batch(_at(t)) is None
    assert c.deferred == 2 and c.source.next == 4  # type: ignore[attr-defined]
    assert [b.batch_id for b in c.store.pending_batches()] == [0]
    c.committed_batch(c.store.commit(c.epoch, first, Writes()), first)
    c.source.log_end = 11  # type: ignore[attr-defined]
    backlog = c.next_batch(_at(4))
    assert backlog is not None and (backlog.batch_id, backlog.ranges) == (1, (OffsetRange("numbers", 0, 4, 11),))
    assert c.next_batch(_at(4)) is backlog  # asked again: the same batch


def test_with_catch_up_replayed_batches_still_replay_one_after_the_other(tmp_path):
    url = f"sqlite:///{tmp_path}/state.db"
    first = BatchCommitter(open_store(url, "app"), CountingSource())
    for t, end in ((1, 3), (2, 7)):
        first.source.log_end = end  # type: ignore[attr-defined]
        assert first.next_batch(_at(t)) is not None
    source = CountingSource()
    source.log_end = 12
    second = BatchCommitter(open_store(url, "app"), source, catch_up=True)
    replay = second.next_batch(_at(3))
    assert replay is not None and replay.batch_id == 0
    assert second.next_batch(_at(4)) is None  # batch 0 (replayed) is not committed yet
    second.committed_batch(second.store.commit(second.epoch, replay, Writes()), replay)
    again = second.next_batch(_at(5))
    assert again is not None and (again.batch_id, again.ranges[0].end) == (1, 7)  # the logged ranges, unchanged
    second.committed_batch(second.store.commit(second.epoch, again, Writes()), again)
    new = second.next_batch(_at(6))
    assert new is not None and (new.batch_id, new.ranges) == (2, (OffsetRange("numbers", 0, 7, 12),))


def test_without_catch_up_a_growing_queue_is_warned_about_once(tmp_path, caplog):
    c = BatchCommitter(open_store(f"sqlite:///{tmp_path}/state.db", "app"), CountingSource())
    with caplog.at_level("WARNING", logger="dstream_exactly_once.engine._committer"):
        for t in range(1, 30):
            c.source.log_end = t  # type: ignore[attr-defined]
            assert c.next_batch(_at(t)) is not None
    warned = [r.getMessage() for r in caplog.records if "planned and not committed" in r.getMessage()]
    assert len(warned) == 1 and warned[0].startswith("20 batches")
    assert "spark.streaming.exactlyOnce.catchUp" in warned[0]
