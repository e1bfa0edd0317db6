"""Riding out a store blip (issue 17): the retry policy, and retried store calls after a lost reply.

A "lost reply" is simulated by a store that applies the operation and then raises
:class:`StoreUnavailableError` once, as a connection dropped before the answer arrived would.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Dict, List

import pytest

from dstream_exactly_once import (
    ConfigurationError,
    FencedError,
    OffsetRange,
    RetryPolicy,
    StoreUnavailableError,
    Writes,
)
from dstream_exactly_once.core._retry import DEFAULT_RETRY, check_retry_policy
from dstream_exactly_once.engine._committer import BatchCommitter
from dstream_exactly_once.stores._base import CommitOutcome, PlannedBatch
from dstream_exactly_once.stores.sql._sqlite import SQLiteStore

from .test_core import CountingSource

T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
FAST = RetryPolicy(max_attempts=5, max_seconds=5.0, base_delay=0.0, max_delay=0.0)


class LostReplyStore(SQLiteStore):
    """A SQLite store whose named operations succeed and then lose their reply (raise) once each;
    ``down`` makes every operation fail before doing anything."""

    def __init__(self, url: str, app_id: str) -> None:
        super().__init__(url, app_id)
        self.lose: Dict[str, int] = {}
        self.calls: Dict[str, int] = {}
        self.down = False

    def _op(self, name: str, fn: Callable[[], Any]) -> Any:
        self.calls[name] = self.calls.get(name, 0) + 1
        if self.down:
            raise StoreUnavailableError(f"store down during {name}")
        result = fn()
        if self.lose.get(name, 0) > 0:
            self.lose[name] -= 1
            raise StoreUnavailableError(f"connection lost after {name}")
        return result

    def start_epoch(self) -> int:
        return self._op("start_epoch", super().start_epoch)

    def current_epoch(self) -> int:
        return self._op("current_epoch", super().current_epoch)

    def log_batch(self, epoch: int, batch: PlannedBatch) -> None:
        self._op("log_batch", lambda: super(LostReplyStore, self).log_batch(epoch, batch))

    def commit(self, epoch: int, batch: PlannedBatch, writes: Any = None, **kw: Any) -> CommitOutcome:
        return self._op("commit", lambda: super(LostReplyStore, self).commit(epoch, batch, writes, **kw))

    def mark_committed(self, epoch: int, batch: PlannedBatch) -> CommitOutcome:
        return self._op("mark_committed", lambda: super(LostReplyStore, self).mark_committed(epoch, batch))


def _store(tmp_path: Any) -> LostReplyStore:
    store = LostReplyStore(f"sqlite:///{tmp_path}/state.db", "app")
    store.connect()
    return store


# ------------------------------------------------------------------ the policy
def test_a_retriable_error_is_retried_until_the_call_succeeds():
    failures = [StoreUnavailableError("down"), StoreUnavailableError("down")]
    pauses: List[float] = []

    def op() -> str:
        if failures:
            raise failures.pop()
        return "ok"

    policy = RetryPolicy(max_attempts=10, max_seconds=60, base_delay=1.0, max_delay=3.0)
    assert policy.call(op, "op", sleep=pauses.append) == "ok"
    assert len(pauses) == 2
    assert 0.5 <= pauses[0] <= 1.0 and 1.0 <= pauses[1] <= 2.0  # exponential, jittered downwards


def test_the_last_error_is_raised_when_the_attempts_are_spent():
    calls = []

    def op() -> None:
        calls.append(1)
        raise StoreUnavailableError(f"down {len(calls)}")

    with pytest.raises(StoreUnavailableError, match="down 3"):
        RetryPolicy(max_attempts=3, base_delay=0).call(op, "op", sleep=lambda s: None)
    assert len(calls) == 3


def test_no_attempt_starts_after_the_time_budget():
    now = [0.0]
    calls = []

    def op() -> None:
        calls.append(now[0])
        raise StoreUnavailableError("down")

    def sleep(seconds: float) -> None:
        now[0] += seconds

    policy = RetryPolicy(max_attempts=1000, max_seconds=10, base_delay=1.0, max_delay=4.0)
    with pytest.raises(StoreUnavailableError):
        policy.call(op, "op", sleep=sleep, clock=lambda: now[0])
    assert calls[-1] <= 10.0 and now[0] == pytest.approx(10.0)
    assert 4 <= len(calls) <= 10


def test_errors_that_are_not_retriable_are_raised_at_once():
    calls = []

    def op() -> None:
        calls.append(1)
        raise FencedError("epoch 1 is fenced")

    with pytest.raises(FencedError):
        DEFAULT_RETRY.call(op, "op", sleep=lambda s: pytest.fail("slept"))
    assert calls == [1]


def test_bad_policies_are_refused_naming_the_field_and_value():
    with pytest.raises(ConfigurationError, match="max_attempts must be an int >= 1, got 0"):
        RetryPolicy(max_attempts=0)
    with pytest.raises(ConfigurationError, match="max_seconds must be a number of seconds >= 0, got -1"):
        RetryPolicy(max_seconds=-1)
    with pytest.raises(ConfigurationError, match="store_retry must be a RetryPolicy"):
        check_retry_policy(60)
    assert check_retry_policy(None) is DEFAULT_RETRY and DEFAULT_RETRY.max_seconds == 60


# ------------------------------------------------------------------ lost replies
def test_a_full_batch_commit_whose_reply_was_lost_is_replayed_not_doubled(tmp_path):
    store = _store(tmp_path)
    epoch = store.start_epoch()
    batch = PlannedBatch(0, 0, (OffsetRange("numbers", 0, 0, 5),))
    store.lose["commit"] = 1
    outcome = FAST.call(lambda: store.commit(epoch, batch, Writes().incr("n", "sum", 10)), "commit",
                        sleep=lambda s: None)
    assert outcome is CommitOutcome.REPLAYED and store.calls["commit"] == 2
    assert store.get_value("n", "sum") == 10
    assert store.is_committed(0)


def test_a_partition_commit_whose_reply_was_lost_is_replayed_not_doubled(tmp_path):
    store = _store(tmp_path)
    epoch = store.start_epoch()
    r0, r1 = OffsetRange("numbers", 0, 0, 5), OffsetRange("numbers", 1, 0, 3)
    batch = PlannedBatch(0, 0, (r0, r1))
    store.lose["commit"] = 1
    outcome = FAST.call(lambda: store.commit(epoch, batch, Writes().incr("n", "sum", 10), ranges=[r0],
                                             complete_batch=False), "commit", sleep=lambda s: None)
    assert outcome is CommitOutcome.REPLAYED and store.calls["commit"] == 2
    assert store.commit(epoch, batch, Writes().incr("n", "sum", 3), ranges=[r1],
                        complete_batch=False) is CommitOutcome.APPLIED
    store.lose["mark_committed"] = 1
    FAST.call(lambda: store.mark_committed(epoch, batch), "mark_committed", sleep=lambda s: None)
    assert store.get_value("n", "sum") == 13 and store.is_committed(0)


def test_the_committer_retries_a_lost_log_batch_and_start_epoch_reply(tmp_path):
    store = _store(tmp_path)
    store.lose.update(start_epoch=1, log_batch=1)
    committer = BatchCommitter(store, CountingSource(), retry=FAST)
    # the lost start_epoch reply cost one epoch: the retry took epoch 2, which fences nobody else
    assert committer.epoch == 2 and store.current_epoch() == 2
    committer.source.log_end = 5  # type: ignore[attr-defined]
    batch = committer.next_batch(T0)
    assert batch is not None and store.calls["log_batch"] == 2
    assert store.pending_batches() == [batch]
    assert store.commit(committer.epoch, batch, Writes().incr("n", "sum", 10)) is CommitOutcome.APPLIED


def test_an_outage_longer_than_the_budget_stops_with_the_typed_error(tmp_path):
    store = _store(tmp_path)
    committer = BatchCommitter(store, CountingSource(),
                               retry=RetryPolicy(max_attempts=3, base_delay=0.01, max_delay=0.01))
    store.calls.clear()
    store.down = True
    with pytest.raises(StoreUnavailableError, match="store down during current_epoch"):
        committer.next_batch(T0 + timedelta(seconds=1))  # idle: the epoch check is the store call
    assert store.calls["current_epoch"] == 3
