"""DorisSink end to end over HTTP (protocol double) with an in-test fake of the transactional store.

The fake keeps only what the sink relies on from the store contract (``stores/_base.py``): one
all-or-nothing commit with epoch check and offset compare-and-set, ``has_label`` and ``get_value``.
Every crash point of the two-phase protocol is exercised; the table must end with each partition's
rows exactly once.
"""

from __future__ import annotations

import json
import uuid
from typing import Any, Dict, Iterator, List, Optional, Set, Tuple

import pytest

from dstream_exactly_once.errors import FencedError, OffsetConflictError, SinkError, StoreUnavailableError
from dstream_exactly_once.kafka._offsets import OffsetRange
from dstream_exactly_once.sinks.doris import DorisSink, DorisStreamLoadClient, TxnOutcome
from dstream_exactly_once.stores._base import CommitOutcome, PlannedBatch, Writes
from dstream_exactly_once.testing._doris_double import DorisProtocolDouble

DB, TABLE = "dw", "events"


class FakeStore:
    """A tiny in-memory stand-in for ``TransactionalStore`` (NOT a backend; tests only)."""

    def __init__(self, app_id: str) -> None:
        self.app_id = app_id
        self.epoch = 1
        self.offsets: Dict[Tuple[str, int], int] = {}
        self.labels: Set[str] = set()
        self.values: Dict[Tuple[str, str], Any] = {}
        self.counters: Dict[Tuple[str, str], float] = {}
        self.fail_next_commit: Optional[BaseException] = None  # raised before anything is written
        self.fail_after_apply: Optional[BaseException] = None  # written, but the caller sees an error
        self.commits = 0

    def start_epoch(self) -> int:
        self.epoch += 1
        return self.epoch

    def has_label(self, label: str) -> bool:
        return label in self.labels

    def get_value(self, namespace: str, key: str) -> Any:
        return self.values.get((namespace, key))

    def commit(self, epoch: int, batch: PlannedBatch, writes: Writes, *,
               ranges: Optional[List[OffsetRange]] = None, complete_batch: bool = True) -> CommitOutcome:
        if self.fail_next_commit is not None:
            exc, self.fail_next_commit = self.fail_next_commit, None
            raise exc
        if epoch != self.epoch:
            raise FencedError(f"epoch {epoch} is older than {self.epoch}")
        todo = [r for r in (batch.ranges if ranges is None else ranges) if r.fromOffset < r.untilOffset]
        stored = {r: self.offsets.get((r.topic, r.partition)) for r in todo}
        if todo and all(stored[r] == r.untilOffset for r in todo):
            return CommitOutcome.REPLAYED
        for r in todo:
            if stored[r] not in (None, r.fromOffset):
                raise OffsetConflictError(f"{r.topic}/{r.partition}: stored {stored[r]}, range from {r.fromOffset}")
        for (ns, key), amount in writes.increments.items():
            self.counters[(ns, key)] = self.counters.get((ns, key), 0) + amount
        for (ns, key), text in writes.puts.items():
            self.values[(ns, key)] = json.loads(text)
        self.labels.update(writes.labels)
        for r in todo:
            self.offsets[(r.topic, r.partition)] = r.untilOffset
        self.commits += 1
        if self.fail_after_apply is not None:
            exc, self.fail_after_apply = self.fail_after_apply, None
            raise exc
        return CommitOutcome.APPLIED


@pytest.fixture
def doris() -> Iterator[DorisProtocolDouble]:
    with DorisProtocolDouble(user="etl", password="pw") as double:
        yield double


@pytest.fixture
def store() -> FakeStore:
    return FakeStore("app-" + uuid.uuid4().hex[:8])


def make_sink(doris: DorisProtocolDouble, **kwargs: Any) -> DorisSink:
    client = DorisStreamLoadClient(doris.fe_url, DB, TABLE, user="etl", password="pw", column_separator=",",
                                   backoff_s=0.01, max_backoff_s=0.02, max_retries=2, poll_interval_s=0.02,
                                   request_timeout_s=10)
    return DorisSink(client, **kwargs)


BATCH = PlannedBatch(7, 1_700_000_000_000, (OffsetRange("t", 0, 0, 3), OffsetRange("t", 1, 10, 12)))
ROWS = {0: [(0, "a"), (1, "b"), (2, "c")], 1: [(10, "x"), (11, "y")]}
EXPECTED = sorted(tuple(str(v) for v in row) for rows in ROWS.values() for row in rows)


def table(doris: DorisProtocolDouble) -> List[Tuple[Any, ...]]:
    return sorted(doris.rows(DB, TABLE))


def write_all(sink: DorisSink, store: FakeStore, epoch: Optional[int] = None) -> List[CommitOutcome]:
    return [sink.write_partition(store, store.epoch if epoch is None else epoch, BATCH, p, ROWS[p]).outcome
            for p in (0, 1)]


# ---------------------------------------------------------------- two-phase mode
def test_write_and_replay_exactly_once(doris: DorisProtocolDouble, store: FakeStore) -> None:
    sink = make_sink(doris)
    assert write_all(sink, store) == [CommitOutcome.APPLIED] * 2
    assert table(doris) == EXPECTED
    assert store.offsets == {("t", 0): 3, ("t", 1): 12}
    label0 = sink.label_for(store.app_id, 7, 0)
    assert store.has_label(label0) and store.get_value("__doris__", label0)["txn_id"] > 0
    assert label0.endswith("_events_7_0")
    loads = len(doris.requests_to("be", "stream_load"))
    assert write_all(sink, store) == [CommitOutcome.REPLAYED] * 2  # a replayed batch
    assert len(doris.requests_to("be", "stream_load")) == loads  # nothing re-sent
    assert table(doris) == EXPECTED


def test_crash_after_store_commit_before_doris_commit(doris: DorisProtocolDouble, store: FakeStore) -> None:
    sink = make_sink(doris)
    doris.fail_next(50, endpoint="2pc")  # every Doris commit fails: the decision is already made
    with pytest.raises(SinkError, match="offset store committed label") as info:
        sink.write_partition(store, store.epoch, BATCH, 0, ROWS[0])
    label0 = sink.label_for(store.app_id, 7, 0)
    assert label0 in str(info.value)
    assert store.has_label(label0) and table(doris) == []  # in doubt, decided "commit"
    assert doris.label_state(DB, label0) == "PRECOMMITTED"
    doris.reset_faults()
    # the task retry sees the store's record and commits; no second load
    assert sink.write_partition(store, store.epoch, BATCH, 0, ROWS[0]).outcome is CommitOutcome.REPLAYED
    assert table(doris) == sorted(tuple(str(v) for v in r) for r in ROWS[0])
    assert len(doris.requests_to("be", "stream_load")) == 1


def test_recover_commits_what_the_store_recorded(doris: DorisProtocolDouble, store: FakeStore) -> None:
    sink = make_sink(doris)
    doris.fail_next(50, endpoint="2pc")
    for p in (0, 1):
        with pytest.raises(SinkError):
            sink.write_partition(store, store.epoch, BATCH, p, ROWS[p])
    doris.reset_faults()
    store.start_epoch()  # the restarted driver
    outcomes = sink.recover(store, BATCH)
    assert set(outcomes.values()) == {TxnOutcome.COMMITTED}
    assert table(doris) == EXPECTED
    assert write_all(sink, store) == [CommitOutcome.REPLAYED] * 2
    assert table(doris) == EXPECTED


def test_crash_between_precommit_and_store_commit(doris: DorisProtocolDouble, store: FakeStore) -> None:
    sink = make_sink(doris)
    store.fail_next_commit = StoreUnavailableError("store down")
    with pytest.raises(StoreUnavailableError):
        sink.write_partition(store, store.epoch, BATCH, 0, ROWS[0])
    label0 = sink.label_for(store.app_id, 7, 0)
    assert doris.label_state(DB, label0) == "ABORTED"  # the writer aborted its own transaction
    assert not store.has_label(label0) and table(doris) == []
    assert write_all(sink, store) == [CommitOutcome.APPLIED] * 2  # the label is free again
    assert table(doris) == EXPECTED


def test_fenced_writer_aborts_its_transaction(doris: DorisProtocolDouble, store: FakeStore) -> None:
    sink = make_sink(doris)
    old_epoch = store.epoch
    store.start_epoch()
    with pytest.raises(FencedError):
        sink.write_partition(store, old_epoch, BATCH, 0, ROWS[0])
    assert doris.label_state(DB, sink.label_for(store.app_id, 7, 0)) == "ABORTED"
    assert write_all(sink, store) == [CommitOutcome.APPLIED] * 2
    assert table(doris) == EXPECTED


def test_offset_conflict_writes_nothing(doris: DorisProtocolDouble, store: FakeStore) -> None:
    sink = make_sink(doris)
    store.offsets[("t", 0)] = 1  # neither fromOffset nor untilOffset
    with pytest.raises(OffsetConflictError):
        sink.write_partition(store, store.epoch, BATCH, 0, ROWS[0])
    assert table(doris) == [] and store.labels == set()


def test_ambiguous_store_failure_that_did_commit(doris: DorisProtocolDouble, store: FakeStore) -> None:
    sink = make_sink(doris)
    store.fail_after_apply = StoreUnavailableError("connection lost during COMMIT")
    result = sink.write_partition(store, store.epoch, BATCH, 0, ROWS[0])
    assert result.outcome is CommitOutcome.APPLIED and result.loaded_rows == 3
    assert table(doris) == sorted(tuple(str(v) for v in r) for r in ROWS[0])


def test_killed_writer_leaves_a_precommit_that_recover_aborts(doris: DorisProtocolDouble, store: FakeStore) -> None:
    sink = make_sink(doris)
    label0 = sink.label_for(store.app_id, 7, 0)
    # A writer pre-committed partition 0 and died before its store commit.
    sink.client.precommit(label0, [(0, "stale")])
    # Without recovery the label is in doubt: the replay refuses to guess.
    with pytest.raises(SinkError, match="in doubt"):
        sink.write_partition(store, store.epoch, BATCH, 0, ROWS[0])
    store.start_epoch()  # restart: the dead writer is fenced now
    assert sink.recover(store, BATCH) == {label0: TxnOutcome.ABORTED,
                                          sink.label_for(store.app_id, 7, 1): TxnOutcome.ALREADY_ABORTED}
    assert write_all(sink, store) == [CommitOutcome.APPLIED] * 2
    assert table(doris) == EXPECTED


def test_recover_reports_data_lost_to_the_precommit_timeout(doris: DorisProtocolDouble, store: FakeStore) -> None:
    sink = make_sink(doris)
    doris.fail_next(50, endpoint="2pc")
    with pytest.raises(SinkError):
        sink.write_partition(store, store.epoch, BATCH, 0, ROWS[0])
    doris.reset_faults()
    doris.expire_precommitted()  # the job stayed down longer than Doris's pre-commit timeout
    store.start_epoch()
    with pytest.raises(SinkError, match="rows lost") as info:
        sink.recover(store, BATCH)
    assert sink.label_for(store.app_id, 7, 0) in str(info.value)


def test_connection_dropped_after_precommit(doris: DorisProtocolDouble, store: FakeStore) -> None:
    sink = make_sink(doris)
    doris.drop_next_after_apply()  # pre-committed, but the writer never heard the txn id
    with pytest.raises(SinkError, match="in doubt"):
        sink.write_partition(store, store.epoch, BATCH, 0, ROWS[0])
    store.start_epoch()
    sink.recover(store, BATCH)
    assert write_all(sink, store) == [CommitOutcome.APPLIED] * 2
    assert table(doris) == EXPECTED


def test_empty_partition_records_offsets_without_a_load(doris: DorisProtocolDouble, store: FakeStore) -> None:
    sink = make_sink(doris)
    result = sink.write_partition(store, store.epoch, BATCH, 1, [])
    assert result.outcome is CommitOutcome.APPLIED and result.txn_id is None
    assert doris.requests == [] and store.offsets == {("t", 1): 12}
    assert sink.write_partition(store, store.epoch, BATCH, 1, []).outcome is CommitOutcome.REPLAYED
    store.start_epoch()
    assert sink.recover(store, BATCH, partition_ids=[1]) == {}


def test_extra_writes_commit_in_the_same_transaction(doris: DorisProtocolDouble, store: FakeStore) -> None:
    sink = make_sink(doris)
    extra = Writes().incr("stats", "rows", 3)
    sink.write_partition(store, store.epoch, BATCH, 0, ROWS[0], writes=extra)
    sink.write_partition(store, store.epoch, BATCH, 0, ROWS[0], writes=extra)  # replay
    assert store.counters == {("stats", "rows"): 3}
    assert extra.labels == []  # the caller's Writes is not modified


def test_partition_without_a_range_is_refused(doris: DorisProtocolDouble, store: FakeStore) -> None:
    from dstream_exactly_once.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="partition id 2"):
        make_sink(doris).write_partition(store, store.epoch, BATCH, 2, ROWS[0])


# ---------------------------------------------------------------- labels-only and label-less modes
def test_labels_only_mode_survives_lost_answers_and_store_failures(doris: DorisProtocolDouble,
                                                                  store: FakeStore) -> None:
    sink = make_sink(doris, two_phase_commit=False)
    doris.drop_next_after_apply()
    assert sink.write_partition(store, store.epoch, BATCH, 0, ROWS[0]).doris_replayed
    store.fail_next_commit = StoreUnavailableError("down")
    with pytest.raises(StoreUnavailableError):
        sink.write_partition(store, store.epoch, BATCH, 1, ROWS[1])
    result = sink.write_partition(store, store.epoch, BATCH, 1, ROWS[1])  # replay within the label memory
    assert result.outcome is CommitOutcome.APPLIED and result.doris_replayed
    assert table(doris) == EXPECTED
    assert sink.recover(store, BATCH) == {}


def test_labels_only_mode_duplicates_after_doris_forgets_the_label(doris: DorisProtocolDouble,
                                                                  store: FakeStore) -> None:
    """The documented limit: a replay older than Doris's label memory loads again."""
    sink = make_sink(doris, two_phase_commit=False)
    store.fail_next_commit = StoreUnavailableError("down")
    with pytest.raises(StoreUnavailableError):
        sink.write_partition(store, store.epoch, BATCH, 1, ROWS[1])
    doris.forget_labels()
    sink.write_partition(store, store.epoch, BATCH, 1, ROWS[1])
    assert len(doris.rows(DB, TABLE)) == 2 * len(ROWS[1])


def test_two_phase_mode_has_no_such_window(doris: DorisProtocolDouble, store: FakeStore) -> None:
    sink = make_sink(doris)
    store.fail_next_commit = StoreUnavailableError("down")
    with pytest.raises(StoreUnavailableError):
        sink.write_partition(store, store.epoch, BATCH, 1, ROWS[1])
    doris.forget_labels()
    sink.write_partition(store, store.epoch, BATCH, 1, ROWS[1])
    assert len(doris.rows(DB, TABLE)) == len(ROWS[1])


def test_without_labels_delivery_is_at_least_once(doris: DorisProtocolDouble, store: FakeStore) -> None:
    sink = make_sink(doris, two_phase_commit=False, use_labels=False)
    store.fail_next_commit = StoreUnavailableError("down")
    with pytest.raises(StoreUnavailableError):
        sink.write_partition(store, store.epoch, BATCH, 1, ROWS[1])
    assert sink.write_partition(store, store.epoch, BATCH, 1, ROWS[1]).label is None
    assert len(doris.rows(DB, TABLE)) == 2 * len(ROWS[1])  # duplicated, as documented
