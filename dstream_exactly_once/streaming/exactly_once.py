"""Exactly-once output: each batch's results and offsets committed together, in one store.

Driver lifecycle (``DESIGN.md`` §2, §4):

1. open the store, take a new **epoch** (fencing token); older drivers can no longer commit;
2. starting offsets = the store's committed offsets (explicit ``fromOffsets`` or
   ``auto.offset.reset`` only when the store has none), checked against the broker's log;
3. batches in the **offset log** without a **commit log** entry are replayed first, in order,
   with their original ids and ranges; only then are new batches planned;
4. every new batch is written to the offset log *before* it runs;
5. the output commits results + new offsets (+ commit-log entry) in one transaction with an
   offset compare-and-set; a replayed, already-committed batch is skipped.

No write-ahead log, no receivers and no Spark checkpoint: the store is the single source of
truth. ``ssc.checkpoint(dir)`` may still be set for stateful operators (``updateStateByKey``,
windows with an inverse function), but offsets are never taken from it and a stream cannot be
recovered with ``StreamingContext.getOrCreate``: create a new context, it resumes from the store.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict, deque
from datetime import datetime
from typing import Any, Callable, Deque, Iterable, List, Optional, Protocol, Set, Union

from pyspark import RDD
from pyspark.streaming import StreamingContext

from ..errors import ConfigurationError, DStreamExactlyOnceError, FencedError, OutputError, StoreError
from ..offsets import OffsetRange
from ..stores.base import CommitOutcome, PlannedBatch, TransactionalStore, Writes
from ._driver_ref import DriverOnly
from .dstream import KafkaDStream
from .kafka_utils import DirectBatches
from .rdd import KafkaRDD

log = logging.getLogger(__name__)

__all__ = ["BatchCommitter", "ExactlyOnceDStream"]

class PartitionSink(Protocol):
    """A label-idempotent sink written per partition (e.g. :class:`~dstream_exactly_once.sinks.DorisSink`).

    ``write_partition`` must commit the partition's range offsets in ``store`` (with
    ``complete_batch=False``) in the same store transaction that records its label; ``recover``
    resolves in-doubt work of a batch that is about to be replayed.
    """

    def write_partition(self, store: TransactionalStore, epoch: int, batch: PlannedBatch, partition_id: int,
                        rows: Iterable[Any]) -> Any: ...

    def recover(self, store: TransactionalStore, batch: PlannedBatch) -> Any: ...


BatchFunc = Callable[[PlannedBatch, RDD], Optional[Writes]]
PartitionFunc = Callable[[Iterable[Any], OffsetRange, PlannedBatch], Optional[Writes]]


def _as_writes(value: Any, what: str) -> Writes:
    if value is None:
        return Writes()
    if not isinstance(value, Writes):
        raise OutputError(f"{what} must return a Writes (or None), got {type(value).__name__}")
    return value


class BatchCommitter(DriverOnly):
    """Driver-side state of one exactly-once stream: epoch, offset log, replays, counters."""

    #: Old offset-log / commit-log entries are dropped every this many batch ids.
    PURGE_EVERY = 10

    def __init__(self, store: TransactionalStore, batches: DirectBatches, *,
                 monitor_group: Optional[str] = None, retain_batches: int = 100) -> None:
        if isinstance(retain_batches, bool) or not isinstance(retain_batches, int) or retain_batches < 1:
            raise ConfigurationError(f"retain_batches must be an int >= 1, got {retain_batches!r}")
        self._register()
        self.store = store
        self.monitor_group = monitor_group
        self.retain_batches = retain_batches
        self.purged = 0
        self.mirror_failures = 0
        self.batches = batches
        self.epoch = store.start_epoch()
        self._pending: Deque[PlannedBatch] = deque(store.pending_batches())
        self.replay_ids: Set[int] = {b.batch_id for b in self._pending}
        last = store.last_logged_batch_id()
        self.next_batch_id = 0 if last is None else last + 1
        stored = store.load_offsets()
        batches.planner.start(stored)
        for b in self._pending:  # new batches start where the replayed ones end
            batches.planner.advance(list(b.ranges))
        self._by_time: OrderedDict[datetime, Optional[PlannedBatch]] = OrderedDict()
        self._lock = threading.RLock()
        self.failed: Optional[BaseException] = None
        self.committed = 0
        self.replayed = 0
        self.skipped_empty = 0
        if self._pending:
            log.warning("replaying %d uncommitted batch(es) %s before planning new ones", len(self._pending),
                        [b.batch_id for b in self._pending])

    def __repr__(self) -> str:
        return f"BatchCommitter(store={self.store!r}, epoch={self.epoch}, next_batch_id={self.next_batch_id})"

    # ------------------------------------------------------------ planning (JobGenerator thread)
    def compute(self, time: datetime) -> KafkaRDD:
        with self._lock:
            if self.failed is not None:
                batch = None
            elif self._pending:
                batch = self._pending.popleft()
                log.info("replaying batch %d with its logged ranges", batch.batch_id)
            else:
                ranges = self.batches.plan(time)
                if not any(r.count() for r in ranges):
                    batch = None
                    self.skipped_empty += 1
                else:
                    batch = PlannedBatch(self.next_batch_id, int(time.timestamp() * 1000), tuple(ranges))
                    self.store.log_batch(self.epoch, batch)
                    self.next_batch_id += 1
            self._by_time[time] = batch
            while len(self._by_time) > 1024:
                self._by_time.popitem(last=False)
            return self.batches.rdd(list(batch.ranges) if batch else [])

    def batch_at(self, time: datetime) -> Optional[PlannedBatch]:
        with self._lock:
            if self.failed is not None:
                raise DStreamExactlyOnceError(
                    f"the stream stopped committing after an earlier failure: {self.failed}") from self.failed
            return self._by_time.get(time)

    def fail(self, exc: BaseException) -> None:
        with self._lock:
            if self.failed is None:
                self.failed = exc

    def is_replay(self, batch: PlannedBatch) -> bool:
        """Whether ``batch`` was planned by an earlier driver (found uncommitted at start)."""
        return batch.batch_id in self.replay_ids

    def count(self, outcome: CommitOutcome, batch: Optional[PlannedBatch] = None) -> None:
        if outcome is CommitOutcome.APPLIED:
            self.committed += 1
        else:
            self.replayed += 1
        if batch is not None and self.monitor_group:
            self._mirror(batch)
        if (batch is not None and outcome is CommitOutcome.APPLIED and batch.batch_id % self.PURGE_EVERY == 0
                and batch.batch_id >= self.retain_batches):
            self._purge()

    def _purge(self) -> None:
        """Drop offset-log and commit-log entries older than the newest ``retain_batches`` commits."""
        try:
            self.purged += self.store.purge_logs(self.epoch, self.retain_batches)
        except FencedError:
            raise
        except StoreError as exc:  # the logs only grow a little longer; the next purge catches up
            log.warning("could not drop old offset-log entries: %s", exc)

    def _mirror(self, batch: PlannedBatch) -> None:
        """After a successful store commit: the same offsets to a Kafka group, for lag tools only."""
        import time as _time

        offsets = {r.topicPartition(): r.untilOffset for r in batch.ranges}
        for attempt in range(3):  # a new group's coordinator may not be ready at the first try
            try:
                self.batches.planner.metadata.mirror_group_offsets(  # type: ignore[attr-defined]
                    self.monitor_group, offsets)
                return
            except Exception as exc:  # noqa: BLE001 - monitoring must never fail the stream
                if attempt == 2:
                    self.mirror_failures += 1
                    log.warning("could not mirror offsets of batch %d to group %r: %s", batch.batch_id,
                                self.monitor_group, exc)
                else:
                    _time.sleep(0.5)


class BatchIdSink:
    """A Structured-Streaming-style sink: ``add_batch(batch_id, data)`` applies each batch id once.

    Subclass it and implement :meth:`add_batch`; pass it to
    :meth:`ExactlyOnceDStream.foreach_batch`. Unit of parallelism: whatever ``add_batch`` runs
    (a Spark job over the batch's RDD). Delivery guarantee: exactly-once for the returned
    :class:`Writes`; side effects inside ``add_batch`` are at-least-once unless they are keyed
    by ``batch_id`` (the Structured Streaming advice).
    """

    def add_batch(self, batch_id: int, data: RDD) -> Optional[Writes]:
        raise NotImplementedError


class ExactlyOnceDStream(KafkaDStream):
    """A direct Kafka stream whose output operations commit results and offsets atomically.

    Unit of parallelism: one Spark task per topic partition per batch.
    Delivery guarantee: exactly-once for results written through :meth:`commit_each_batch` or
    :meth:`commit_each_partition` (each record's effect is in the store once, whatever crashes,
    task retries, replays or zombie drivers happen). Anything else the user's function does on
    the side (printing, calling services) is at-least-once.

    Batches with no new records are not logged, not committed and do not call the output
    function. Use exactly one of the two commit methods per stream.
    """

    def __init__(self, ssc: StreamingContext, committer: BatchCommitter) -> None:
        self.committer = committer
        super().__init__(ssc, committer.compute)

    @property
    def store(self) -> TransactionalStore:
        return self.committer.store

    @property
    def epoch(self) -> int:
        return self.committer.epoch

    # ------------------------------------------------------------------ pattern (a)
    def commit_each_batch(self, func: BatchFunc) -> None:
        """Run ``func(batch, rdd) -> Writes`` on the driver each batch and commit its writes with
        the batch's offsets and commit-log entry in ONE transaction.

        For results small enough for the driver (aggregates): compute them with Spark inside
        ``func`` (``rdd.reduceByKey(...).collect()``) and return :class:`Writes`. ``func``'s
        exception fails the batch; nothing is committed and the error names the batch and ranges.
        """
        committer = self.committer

        def output(time: datetime, rdd: KafkaRDD) -> None:
            batch = committer.batch_at(time)
            if batch is None:
                return
            try:
                writes = _as_writes(func(batch, rdd), "the commit_each_batch function")
            except BaseException as exc:
                err = _output_error(batch, exc)
                committer.fail(err)
                raise err from exc
            try:
                committer.count(committer.store.commit(committer.epoch, batch, writes), batch)
            except BaseException as exc:
                committer.fail(exc)
                raise

        self.foreachRDD(output)

    def foreach_batch(self, sink: Union[BatchIdSink, Callable[[int, RDD], Optional[Writes]]]) -> None:
        """Structured Streaming's ``foreachBatch`` / ``Sink.addBatch(batchId, data)`` contract.

        ``sink.add_batch(batch_id, rdd)`` (or a plain ``f(batch_id, rdd)``) is called once per batch
        id: a batch id already in the commit log is skipped without calling it, and the returned
        :class:`Writes` commit with the batch's offsets, so batch ids are applied exactly once.
        Batch ids are consecutive integers and a replayed batch keeps its id and ranges.
        """
        add_batch = sink.add_batch if isinstance(sink, BatchIdSink) else sink
        if not callable(add_batch):
            raise ConfigurationError(f"foreach_batch needs a BatchIdSink or a function (batch_id, rdd), got {sink!r}")
        store = self.committer.store

        def func(batch: PlannedBatch, rdd: RDD) -> Optional[Writes]:
            if store.is_committed(batch.batch_id):
                return None  # the commit below reports the replay; add_batch is not called again
            return add_batch(batch.batch_id, rdd)

        self.commit_each_batch(func)

    # ------------------------------------------------------------------ pattern (b)
    def commit_each_partition(self, func: PartitionFunc) -> None:
        """Run ``func(records, offset_range, batch) -> Writes`` in each executor task and commit that
        partition's writes with its range's offsets in ONE transaction on the executor; the driver
        then writes the batch's commit-log entry.

        For results too large for the driver. A task retry or a replayed batch finds its range
        already committed and writes nothing.
        """
        committer = self.committer
        store = committer.store

        def output(time: datetime, rdd: KafkaRDD) -> None:
            batch = committer.batch_at(time)
            if batch is None:
                return
            epoch = committer.epoch

            def per_partition(index: int, records: Iterable[Any]) -> Iterable[str]:
                r = batch.ranges[index]
                if r.count() == 0:
                    return [CommitOutcome.REPLAYED.value]
                try:
                    writes = _as_writes(func(records, r, batch), "the commit_each_partition function")
                except BaseException as exc:
                    raise _output_error(batch, exc, [r]) from exc
                return [store.commit(epoch, batch, writes, ranges=[r], complete_batch=False).value]

            _run_partition_job(committer, batch, rdd, per_partition)

        self.foreachRDD(output)

    # ------------------------------------------------------------------ label-idempotent sinks
    def write_each_partition(self, sink: PartitionSink,
                             rows: Optional[Callable[[Iterable[Any]], Iterable[Any]]] = None) -> None:
        """Write each partition's records (mapped by ``rows``) to ``sink`` exactly once.

        The sink's label for (application, batch id, partition id) is recorded in the same store
        transaction as the partition's offsets; a batch found uncommitted at start is first
        ``recover``-ed (in-doubt two-phase transactions committed or aborted), then replayed with
        the same id, ranges and therefore the same labels.
        """
        committer = self.committer
        store = committer.store
        to_rows = rows if rows is not None else (lambda records: records)

        def output(time: datetime, rdd: KafkaRDD) -> None:
            batch = committer.batch_at(time)
            if batch is None:
                return
            epoch = committer.epoch

            def per_partition(index: int, records: Iterable[Any]) -> Iterable[Any]:
                try:
                    result = sink.write_partition(store, epoch, batch, index, to_rows(records))
                except DStreamExactlyOnceError:
                    raise
                except BaseException as exc:
                    raise _output_error(batch, exc, [batch.ranges[index]]) from exc
                return [getattr(result, "outcome", result)]

            _run_partition_job(committer, batch, rdd, per_partition,
                               before=lambda: sink.recover(store, batch) if committer.is_replay(batch) else None)

        self.foreachRDD(output)


def _run_partition_job(committer: BatchCommitter, batch: PlannedBatch, rdd: KafkaRDD,
                       per_partition: Callable[[int, Iterable[Any]], Iterable[Any]],
                       before: Optional[Callable[[], Any]] = None) -> None:
    """Run the per-partition commits as one Spark job, then write the batch's commit-log entry.

    Any failure marks the stream failed (no later batch commits) and is re-raised naming the batch.
    """
    try:
        if before is not None:
            before()
        outcomes = rdd.mapPartitionsWithIndex(per_partition).collect()
        committer.count(committer.store.mark_committed(committer.epoch, batch), batch)
    except BaseException as exc:
        err = exc if isinstance(exc, DStreamExactlyOnceError) else _output_error(batch, exc)
        committer.fail(err)
        raise err from exc
    log.debug("batch %d partition outcomes %s", batch.batch_id, outcomes)


def _output_error(batch: PlannedBatch, exc: BaseException,
                  ranges: Optional[List[OffsetRange]] = None) -> OutputError:
    rs = list(ranges if ranges is not None else batch.ranges)
    shown = ", ".join(str(r) for r in rs[:8]) + (f" and {len(rs) - 8} more" if len(rs) > 8 else "")
    return OutputError(f"output of batch {batch.batch_id} failed, nothing was committed "
                       f"(ranges: {shown}): {type(exc).__name__}: {exc}", batch=batch.batch_id, offset_ranges=rs)


StoreLike = Union[str, TransactionalStore]


def exactly_once(stream: KafkaDStream, store: StoreLike, app_id: Optional[str] = None, *,
                 monitor_group: Optional[str] = None, retain_batches: int = 100) -> ExactlyOnceDStream:
    """Turn a ``KafkaUtils.createDirectStream`` stream into an exactly-once one (before any output
    is attached and before the context starts): offsets then come from ``store`` (its committed
    offsets win over ``fromOffsets``/``auto.offset.reset``) and uncommitted batches are replayed.
    ``monitor_group`` and ``retain_batches`` are as in ``KafkaUtils.createExactlyOnceStream``.

    Returns the new stream; the original one must not be used any more (it raises if it is).
    """
    from ..stores import open_store

    if isinstance(stream, ExactlyOnceDStream) or not isinstance(stream, KafkaDStream):
        raise ConfigurationError(f"exactly_once() needs a stream from KafkaUtils.createDirectStream, got {stream!r}")
    from .kafka_utils import DirectBatches

    batches = stream._build
    if not isinstance(batches, DirectBatches) or stream._batches:
        raise ConfigurationError("exactly_once() must be called before the stream has produced a batch")
    if isinstance(store, str):
        if not isinstance(app_id, str) or not app_id:
            raise ConfigurationError(f"app_id must name the application in the store, got {app_id!r}")
        opened = open_store(store, app_id)
    elif isinstance(store, TransactionalStore):
        opened = store
    else:
        raise ConfigurationError(f"store must be a store URL or a TransactionalStore, got {store!r}")

    def detached(_time: datetime) -> KafkaRDD:
        raise ConfigurationError("this stream was converted by exactly_once(); use the stream it returned")

    committer = BatchCommitter(opened, batches, monitor_group=monitor_group, retain_batches=retain_batches)
    stream._build = detached
    return ExactlyOnceDStream(stream._ssc, committer)
