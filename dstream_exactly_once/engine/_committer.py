"""The driver side of exactly-once output, for any source: epoch, offset log, replays, commits.

Driver lifecycle:

1. read the store (read-only): committed positions and the offset log's uncommitted batches;
2. the source resumes after those positions and validates everything against the live source
   (topics, offsets inside the log, paths) — a launch that fails here has written nothing and
   fenced nobody;
3. only then — when the stream starts (:meth:`BatchCommitter.start`, called by the StreamingContext's
   ``start()`` once the stream's output calls were checked too) — a new **epoch** (fencing token) is
   taken; older drivers can no longer commit. If the store moved meanwhile (an old driver's last
   commit), the source resumes again from the fresh state;
4. batches in the **offset log** without a **commit log** entry are replayed first, in order,
   with their original ids and ranges; only then are new batches planned;
5. every new batch is written to the offset log *before* it runs (:attr:`BatchCommitter.log_ahead`;
   with ``commit_each_batch(..., offset_log="in_commit")`` the entry is written by the commit
   transaction instead, and a batch cut short by a crash is planned afresh);
6. the output commits results + new positions (+ commit-log entry) in one transaction with a
   compare-and-set on the positions; a replayed, already-committed batch is skipped.

Batches are planned (step 4's replays and step 5) when Spark *generates* them, on its JobGenerator
thread, as Spark's own direct Kafka stream plans its ranges; their output jobs run later, one after
the other (``spark.streaming.concurrentJobs`` = 1). So batch ``n + 1`` may be planned — and logged
ahead — while batch ``n`` still runs: each plan starts from the source's in-memory planned
positions (where the previous planned batch ends, not where the last commit ended), the offset log
may hold several uncommitted batches (a restart replays them all, in id order), and once a batch
fails (:meth:`BatchCommitter.fail`) the batches planned after it never commit
(:meth:`BatchCommitter.batch_at` raises) and no new ones are planned.

When batches take longer than the batch interval, that queue grows: each new batch still plans only
its own interval's records. With :attr:`BatchCommitter.catch_up` (``spark.streaming.exactlyOnce.catchUp``)
a batch generated while one this driver planned is still uncommitted plans nothing (it is empty, like
a batch with no new records), and the first batch generated after the queue emptied plans everything
up to the source's latest positions (within its rate limits): batches grow to the time they take, and
a stream that fell behind drains in a few large batches. Without it the stream warns once when 20
batches are queued.

No write-ahead log, no receivers and no Spark checkpoint: the store is the single source of truth.
This module knows sources only through :class:`~dstream_exactly_once.core._source.BatchSource`.
"""

from __future__ import annotations

import logging
import threading
import time as _time
from collections import OrderedDict, deque
from datetime import datetime
from typing import Callable, Deque, Dict, List, Optional, Sequence, Set, Tuple, TypeVar, Union

from .._checks import is_int
from ..core._driver_ref import DriverOnly
from ..core._fencing import check_epoch
from ..core._loss import loss_error
from ..core._progress import ProgressTracker
from ..core._ranges import Position
from ..core._retry import RetryPolicy, check_retry_policy
from ..core._source import BatchSource
from ..errors import ConfigurationError, DataLossError, DStreamExactlyOnceError, FencedError, StoreError
from ..stores._base import CommitOutcome, PlannedBatch, TransactionalStore
from ..stores._opening import store_or_open
from ._heartbeat import Heartbeat

log = logging.getLogger(__name__)

__all__ = ["BatchCommitter", "check_retain_batches"]

_REMEMBERED_TIMES = 1024
#: planned batches not committed yet at which a stream without catch-up warns (once) that it falls behind
_QUEUE_WARNING = 20

T = TypeVar("T")


def _close_failed_launch(opened: Optional[TransactionalStore], close_source: Optional[Callable[[], None]]) -> None:
    """What a committer that failed to launch closes: the store it opened from a URL (never one the
    caller passed opened) and, when given, the source."""
    if opened is not None:
        _quietly(opened.close, "closing the store of a failed launch")
    if close_source is not None:
        _quietly(close_source, "closing the source of a failed launch")


def _quietly(close: Callable[[], None], what: str) -> None:
    """``close()``; its own error is logged, never raised over the launch's error."""
    try:
        close()
    except Exception:  # noqa: BLE001 - the launch's error is the one the caller needs
        log.warning("%s failed", what, exc_info=True)


def check_retain_batches(retain_batches: object) -> int:
    if not is_int(retain_batches) or retain_batches < 1:
        raise ConfigurationError(f"retain_batches must be an int >= 1, got {retain_batches!r} (how many committed "
                                 f"batches the offset and commit logs keep)")
    return retain_batches


class BatchCommitter(DriverOnly):
    """Driver-side state of one exactly-once stream: epoch, offset log, replays, counters.

    Construction performs steps 1–2 of the module docstring (read-only: it validates the source
    against the store's state, so a failed construction writes nothing); :meth:`start` performs
    steps 3–4 (the epoch is the first write).
    """

    #: Old offset-log / commit-log entries are dropped every this many batch ids.
    PURGE_EVERY = 10

    def __init__(self, store: Union[str, TransactionalStore], source: BatchSource, *, app_id: Optional[str] = None,
                 retain_batches: int = 100, retry: Optional[RetryPolicy] = None, start: bool = True,
                 catch_up: bool = False, check: Optional[Callable[[TransactionalStore], None]] = None,
                 close_source: Optional[Callable[[], None]] = None) -> None:
        """Steps 1–2 (read-only); with ``start`` (the default) also step 3, :meth:`start`. A stream
        factory passes ``start=False`` and the stream calls :meth:`start` when its StreamingContext
        starts, once its output calls were validated too. ``catch_up``: see the module's docstring
        (``spark.streaming.exactlyOnce.catchUp``).

        ``store`` is a store URL (opened here for ``app_id``; read-only until the epoch) or an opened
        store. ``check(store)`` reads the opened store and may refuse the launch. When construction
        fails (with ``start``, :meth:`start` too), a store opened here from a URL is closed (one passed
        opened stays open: it is the caller's), ``close_source`` is called, and the error is raised
        unchanged. Nothing is written before :meth:`start` takes the epoch.
        """
        opened: Optional[TransactionalStore] = None
        # the driver state, set before anything can fail (repr() of a failed launch reads it)
        self._epoch: Optional[int] = None
        self.next_batch_id = 0
        self.last_committed_id: Optional[int] = None
        self._pending: Deque[PlannedBatch] = deque()
        self.replay_ids: Set[int] = set()
        self._by_time: OrderedDict[datetime, Optional[PlannedBatch]] = OrderedDict()
        self._lock = threading.RLock()
        self.failed: Optional[BaseException] = None
        #: write each new batch to the offset log before it runs (False: its commit logs it)
        self.log_ahead = True
        #: log (and commit) each new batch in its stored form (:meth:`stored_form`): only for streams
        #: whose outputs all commit whole batches. Per-partition outputs keep every range in the log, so a
        #: replay gives each range the Spark partition it had (sink labels are made from partition ids).
        self.compact_log = False
        self.purged = 0
        self.committed = 0
        self.replayed = 0
        self.skipped_empty = 0
        #: plan no new records while a batch this driver planned or replayed is still uncommitted: the
        #: batch Spark generates then is empty, and the first one generated after the queue emptied
        #: takes the backlog (``spark.streaming.exactlyOnce.catchUp``); ``deferred`` counts those
        self.catch_up = catch_up
        self.deferred = 0
        #: ids of the batches this driver planned or replayed that have not committed yet
        self._uncommitted: Set[int] = set()
        self._queue_warned = False
        try:
            if not isinstance(source, BatchSource):
                raise ConfigurationError(f"source must be a BatchSource, got {source!r}")
            self.retain_batches = check_retain_batches(retain_batches)
            self.retry = check_retry_policy(retry)
            self.source = source
            self.store = store_or_open(store, app_id)
            opened = self.store if isinstance(store, str) else None
            if check is not None:
                check(self.store)
            #: progress records (``core/_progress.py``) and the driver's heartbeat (``engine/_heartbeat.py``)
            self.progress = ProgressTracker(self.store.app_id, source.describe(),
                                            data_loss_skips=source.data_loss_skips,
                                            source_counters=source.event_counters, data_loss_unit=source.data_loss_unit)
            self.heartbeat = Heartbeat(self.store, 0, 0.0)  # its epoch is set by start(); it writes nothing before
            self._state = self._resume()  # read-only; raises before anything is written
            if start:
                self.start()
        except BaseException:
            _close_failed_launch(opened, close_source)
            raise
        self._register()

    @property
    def started(self) -> bool:
        """Whether :meth:`start` took this driver's epoch."""
        return self._epoch is not None

    @property
    def epoch(self) -> int:
        """The epoch (fencing token) this driver holds, taken by :meth:`start`."""
        if self._epoch is None:
            raise DStreamExactlyOnceError(
                f"the stream of app {self.store.app_id!r} has not taken its epoch yet: it is taken when the "
                f"StreamingContext starts (ssc.start()), after every argument of the stream and of its output "
                f"calls was checked")
        return self._epoch

    def start(self) -> int:
        """Step 3 of the module docstring: take a new epoch (the first store write; older drivers can
        no longer commit), re-read the store and resume from it if another driver committed since
        the read-only start, and queue the uncommitted batches for replay. Idempotent; returns the
        epoch."""
        with self._lock:
            if self._epoch is not None:
                return self._epoch
            state = self._state
            # a retry after a lost reply takes one more epoch: it fences only this driver's lost attempt
            epoch = self.call_store(self.store.start_epoch, "start_epoch")
            fresh = self._read_state()
            if fresh != state:  # another driver committed between the read and the epoch
                log.info("the store moved while this driver started; resuming from its newer state")
                state = self._resume(fresh)
            _positions, pending, last = state
            self.heartbeat.epoch = epoch
            self._pending = deque(pending)
            self.replay_ids = {b.batch_id for b in pending}
            self.next_batch_id = 0 if last is None else last + 1
            self._epoch = epoch
            if pending:
                log.warning("replaying %d uncommitted batch(es) %s before planning new ones", len(pending),
                            [b.batch_id for b in pending])
            return epoch

    # ------------------------------------------------------------ store calls
    def call_store(self, fn: Callable[[], T], what: str) -> T:
        """``fn()`` (one store operation), retried within :attr:`retry`'s budget on retriable errors.

        Called inside the batch's planning or commit, so planning stays paused while it retries.
        """
        return self.retry.call(fn, f"store {what} of app {self.store.app_id!r}")

    # ------------------------------------------------------------ start-up
    def _read_state(self) -> Tuple[Dict[str, Position], List[PlannedBatch], Optional[int]]:
        store = self.store
        return self.call_store(lambda: (store.load_positions(), store.pending_batches(), store.last_logged_batch_id()),
                               "read of positions and offset log")

    def _resume(self, state: Optional[Tuple[Dict[str, Position], List[PlannedBatch], Optional[int]]] = None
                ) -> Tuple[Dict[str, Position], List[PlannedBatch], Optional[int]]:
        if state is None:
            state = self._read_state()
        positions, pending, _ = state
        kind = self.source.kind
        for b in pending:
            other = sorted({r.kind for r in b.ranges} - {kind})
            if other:
                raise ConfigurationError(
                    f"app {self.store.app_id!r} in {self.store!r} has uncommitted batch {b.batch_id} of another "
                    f"source ({', '.join(other)}); this stream reads {kind} ({self.source.describe()}): use "
                    f"another app_id")
        try:
            self.source.start(positions)
        except DataLossError as exc:  # the first batch to replay reads the lost data: name it and the way out
            if not pending:
                raise
            first = pending[0]
            raise loss_error(first.batch_id, list(first.ranges), str(exc), store_url=self.store.display_url,
                             app_id=self.store.app_id, policy_hint=self.source.data_loss_option) from exc
        for b in pending:  # new batches start where the replayed ones end
            self.source.advance(list(b.ranges))
        # which batch last read each position: for those stored before this start, looked up in the offset
        # log's retained window when the source first retires one of them
        self._last_read: Dict[str, int] = {}
        self._loaded: Set[str] = set(positions)
        self._logged_at_start = state[2]
        # position keys stored, or read by a batch planned since: their empty ranges are left out of the log
        self._known: Set[str] = set(positions)
        for b in pending:
            self._known.update(r.position_key for r in b.ranges)
        self._stored_forms: Dict[int, PlannedBatch] = {}
        return state

    def __repr__(self) -> str:
        store = getattr(self, "store", None)  # a committer whose launch failed may have none
        return f"BatchCommitter(store={store!r}, epoch={self._epoch}, next_batch_id={self.next_batch_id})"

    # ------------------------------------------------------------ planning (JobGenerator thread)
    def next_batch(self, time: datetime) -> Optional[PlannedBatch]:
        """The batch at ``time``: a replayed one, a newly planned and logged one, or ``None`` when
        there is nothing to read (or the stream already failed).

        Called when Spark generates the batch at ``time`` (batch times only grow). Asked again for a
        time it answered, it returns the same batch (it never plans a time twice); asked for an older
        time it no longer remembers (more than 1024 batches between planning and output), it fails
        the stream rather than plan other ranges for a time that has its batch already.
        """
        with self._lock:
            if time in self._by_time:
                return self._by_time[time]
            if self._epoch is None and self.failed is None:
                try:
                    self.start()  # the StreamingContext's start normally took it already
                except BaseException as exc:
                    self.fail(exc)
                    raise
            if self._by_time and time < next(reversed(self._by_time)):
                err = DStreamExactlyOnceError(
                    f"the batch at {time} was planned but is no longer remembered (only the last "
                    f"{_REMEMBERED_TIMES} batch times are): planning it again would read other ranges than the "
                    f"batch already planned for it; the stream stops (a restart replays the logged batches)")
                self.fail(err)
                raise err
            batch: Optional[PlannedBatch]
            if self.failed is not None:
                batch = None
            elif self.catch_up and self._uncommitted:
                batch = None  # an earlier batch still queued or running: a later batch takes these records
                self.deferred += 1
            elif self._pending:
                batch = self._pending.popleft()
                log.info("replaying batch %d with its logged ranges", batch.batch_id)
                self.progress.planned(batch.batch_id, 0.0, 0.0, self.source.latest_positions(), replayed=True)
            else:
                started = _time.monotonic()
                ranges = self.source.plan(time)
                planned_at = _time.monotonic()
                try:
                    if not any(r.count() for r in ranges):
                        batch = None
                        self.skipped_empty += 1
                        self._check_epoch()
                    else:
                        planned = PlannedBatch(self.next_batch_id, int(time.timestamp() * 1000), tuple(ranges))
                        stored = planned.stored_form(self._known) if self.compact_log else planned
                        if self.log_ahead:
                            self.call_store(lambda: self.store.log_batch(self.epoch, stored), "log_batch")
                        batch = planned
                        self._stored_forms[planned.batch_id] = stored
                        self._known.update(r.position_key for r in planned.ranges)
                        self.next_batch_id += 1
                        for r in planned.ranges:
                            self._last_read[r.position_key] = planned.batch_id
                        self.progress.planned(planned.batch_id, planned_at - started, _time.monotonic() - planned_at,
                                              self.source.latest_positions())
                except BaseException as exc:  # the source moved past ranges no log holds: stop here
                    self.fail(exc)
                    raise
            self._by_time[time] = batch
            if batch is not None:
                self._queued(batch)
            while len(self._by_time) > _REMEMBERED_TIMES:
                self._by_time.popitem(last=False)
            if self.failed is None:
                self.heartbeat.beat(self.last_committed_id)
            return batch

    def _queued(self, batch: PlannedBatch) -> None:
        """Note ``batch`` as planned and not committed; warn once when batches pile up behind a slow one."""
        self._uncommitted.add(batch.batch_id)
        if self.catch_up or self._queue_warned or len(self._uncommitted) < _QUEUE_WARNING:
            return
        self._queue_warned = True
        log.warning("%d batches are planned and not committed yet: batches take longer than the batch interval, and "
                    "each new batch still plans only the records of its own interval, so the queue does not shrink "
                    "by itself. Set spark.streaming.exactlyOnce.catchUp=true to plan no new records while a batch "
                    "is queued (the first batch planned after the queue emptied takes the backlog), or use a longer "
                    "batch interval", len(self._uncommitted))

    def _check_epoch(self) -> None:
        """An idle driver still learns within one batch that a newer driver fenced it."""
        current = self.call_store(self.store.current_epoch, "current_epoch")
        try:
            check_epoch(self.store.app_id, current, self.epoch)  # the stores' own rule and message
        except FencedError as err:
            self.fail(err)
            raise

    def batch_at(self, time: datetime) -> Optional[PlannedBatch]:
        with self._lock:
            if self.failed is not None:
                raise DStreamExactlyOnceError(
                    f"the stream stopped committing after an earlier failure: {self.failed}") from self.failed
            return self._by_time.get(time)

    def fail(self, exc: BaseException) -> None:
        """Stop committing: every later batch is skipped and reports ``exc``."""
        with self._lock:
            if self.failed is None:
                self.failed = exc
                self.progress.failed(exc)

    def stored_form(self, batch: PlannedBatch) -> PlannedBatch:
        """``batch`` as its offset-log entry holds it (:meth:`PlannedBatch.stored_form`): what a whole-batch
        commit commits. A replayed batch was read from the log in that form already."""
        with self._lock:
            return self._stored_forms.get(batch.batch_id, batch)

    def is_replay(self, batch: PlannedBatch) -> bool:
        """Whether ``batch`` was planned by an earlier driver (found uncommitted at start)."""
        return batch.batch_id in self.replay_ids

    # ------------------------------------------------------------ retired positions
    def position_drops(self, batch: PlannedBatch) -> List[str]:
        """The stored positions the commit of ``batch`` deletes: those the source retired
        (:meth:`BatchSource.retired_positions`) that no batch kept in the offset log reads — the
        last batch reading one is at least ``retain_batches`` ids older than ``batch`` (so the purge
        drops it), and ``batch`` itself does not read it. Positions stay bounded by the partitions
        that exist plus those read by the retained batches."""
        with self._lock:
            horizon = batch.batch_id - self.retain_batches
            own = {r.position_key for r in batch.ranges}
            retired = [k for k in self.source.retired_positions() if k not in own]
            if self._loaded.intersection(retired):
                self._read_retained_window()
            return sorted(k for k in retired if self._last_read.get(k, -1) <= horizon)

    def _read_retained_window(self) -> None:
        """Which batches of the offset log logged before this start read each position: the newest
        ``retain_batches`` ids up to the last one logged then (older entries are, or will be, purged)."""
        last = self._logged_at_start
        self._loaded = set()
        if last is None:
            return
        for bid in range(max(0, last - self.retain_batches), last + 1):
            b = self.call_store(lambda bid=bid: self.store.get_batch(bid), "get_batch")  # type: ignore[misc]
            for r in b.ranges if b is not None else ():
                self._last_read[r.position_key] = max(bid, self._last_read.get(r.position_key, -1))

    # ------------------------------------------------------------ after a commit
    def committed_batch(self, outcome: CommitOutcome, batch: PlannedBatch, dropped: Sequence[str] = ()) -> None:
        """Count ``batch``'s outcome, let the source forget the positions its commit ``dropped`` (when
        it applied), run the source's post-commit hook and purge old log entries."""
        self.last_committed_id = batch.batch_id
        with self._lock:
            for bid in [b for b in self._stored_forms if b <= batch.batch_id]:
                del self._stored_forms[bid]
            self._uncommitted = {b for b in self._uncommitted if b > batch.batch_id}
        if outcome is CommitOutcome.APPLIED:
            self.committed += 1
            if dropped:
                with self._lock:
                    self._known.difference_update(dropped)
                    # a batch planned since position_drops() may read a key again (a gone file came back):
                    # the source keeps following it; its next commit stores the position afresh
                    horizon = batch.batch_id - self.retain_batches
                    retired = set(self.source.retired_positions())
                    forget = [k for k in dropped if k in retired and self._last_read.get(k, -1) <= horizon]
                    for k in forget:
                        self._last_read.pop(k, None)
                    self.source.forget_positions(forget)
                log.info("batch %d dropped the stored positions of %d retired partition(s) of %s: %s",
                         batch.batch_id, len(dropped), self.source.describe(), ", ".join(dropped))
        else:
            self.replayed += 1
        try:
            self.source.after_commit(list(batch.ranges))
        except Exception as exc:  # noqa: BLE001 - the commit happened; a hook must not fail the stream
            log.warning("post-commit hook of %s failed for batch %d: %s", self.source.describe(), batch.batch_id, exc)
        if (outcome is CommitOutcome.APPLIED and batch.batch_id % self.PURGE_EVERY == 0
                and batch.batch_id >= self.retain_batches):
            self._purge()

    def _purge(self) -> None:
        """Drop offset-log and commit-log entries older than the newest ``retain_batches`` commits."""
        try:
            self.purged += self.call_store(lambda: self.store.purge_logs(self.epoch, self.retain_batches), "purge_logs")
        except FencedError:
            raise
        except StoreError as exc:  # the logs only grow a little longer; the next purge catches up
            log.warning("could not drop old offset-log entries: %s", exc)

    def close(self) -> None:
        """Release the source's and the store's driver-side resources (idempotent)."""
        try:
            if self.failed is None and self._epoch is not None:  # operators see a stopped driver at once
                self.heartbeat.beat(self.last_committed_id, force=True, stopped=True)
            self.source.close()
        finally:
            self.store.close()
