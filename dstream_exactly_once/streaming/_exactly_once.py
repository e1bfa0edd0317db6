"""Exactly-once output patterns on a direct stream, for any source.

The driver-side machinery (epoch, offset log, replays, commits) is the core's
:class:`~dstream_exactly_once.engine._committer.BatchCommitter`; this module attaches it to Spark: a
:class:`ExactlyOnceDStream` plans each batch through the committer and offers the output patterns —
:meth:`~ExactlyOnceDStream.commit_each_batch` (driver), :meth:`~ExactlyOnceDStream.commit_each_partition`
(executors), :meth:`~ExactlyOnceDStream.foreach_batch` (Structured Streaming's ``batchId`` contract)
and :meth:`~ExactlyOnceDStream.write_each_partition` (label-idempotent sinks). User code runs inside
the one error boundary (:func:`~dstream_exactly_once.engine._boundary.user_code`); nothing is committed
for a batch whose output raised, and no later batch commits either.

Each batch is planned — or replayed from the offset log — when Spark generates it, on Spark's
JobGenerator thread, as Spark's own direct Kafka stream plans its ranges: Spark's Streaming tab
counts its records and shows its ranges (:mod:`._input_info`). Its output job runs later, after the
batches before it (``spark.streaming.concurrentJobs`` = 1), so a batch may be planned and logged
while the previous one still runs; the committer's module docstring
(:mod:`dstream_exactly_once.engine._committer`) says what keeps that exact.

No write-ahead log, no receivers and no Spark checkpoint: the store is the single source of
truth. ``ssc.checkpoint(dir)`` may still be set for stateful operators (``updateStateByKey``,
windows with an inverse function), but offsets are never taken from it and a stream cannot be
recovered with ``StreamingContext.getOrCreate`` (recovering raises a ConfigurationError saying
so): create a new context, it resumes from the store.
"""

from __future__ import annotations

import inspect
import logging
from datetime import datetime
from typing import Any, Callable, Iterable, Iterator, List, Optional, Protocol, Sequence, Union

from pyspark import RDD
from pyspark.streaming import StreamingContext

from ..core._loss import record_losses
from ..core._loss_totals import DataLossTotals
from ..core._ranges import SourceRange
from ..core._tasks import TaskOptions
from ..engine._boundary import as_writes, output_error, user_code
from ..engine._committer import BatchCommitter
from ..errors import ConfigurationError, DStreamExactlyOnceError
from ..stores._base import CommitOutcome, PlannedBatch, TransactionalStore, Writes
from ._data_loss import batch_losses, begin_range, log_losses, loss_failure, task_losses
from ._dstream import RangeDStream
from ._lifecycle import close_on_stop, run_on_start
from ._partition_ranges import shown_batch
from ._progress_hooks import ProgressAPI, attach_monitoring, counted, summarize_partitions, writes_size
from ._range_rdd import RangeRDD
from ._termination import await_termination, register_committer

log = logging.getLogger(__name__)

_OFFSET_LOG_MODES = ("ahead", "in_commit")

__all__ = ["BatchIdSink", "ExactlyOnceDStream", "PartitionSink", "check_monitor_group"]


class PartitionSink(Protocol):
    """A label-idempotent sink written per partition (e.g. :class:`~dstream_exactly_once.sinks.DorisSink`).

    ``write_partition`` must commit the partition's range offsets in ``store`` (with
    ``complete_batch=False``) in the same store transaction that records its label; ``recover``
    resolves in-doubt work of a batch that is about to be replayed. A ``write_partition`` that also
    takes ``writes=`` (a :class:`Writes`) must add them to that commit, copied when it commits:
    they grow while the rows are read (a skipped range's data-loss record). A sink with a ``check()``
    method has it called by :meth:`ExactlyOnceDStream.write_each_partition`, before the stream takes
    its epoch: settings its service must accept are refused there, with nothing written.
    """

    def write_partition(self, store: TransactionalStore, epoch: int, batch: PlannedBatch, partition_id: int,
                        rows: Iterable[Any]) -> Any: ...

    def recover(self, store: TransactionalStore, batch: PlannedBatch) -> Any: ...


BatchFunc = Callable[[PlannedBatch, RDD], Optional[Writes]]
PartitionFunc = Callable[[Iterable[Any], Any, PlannedBatch], Optional[Writes]]
RddFactory = Callable[[Sequence[SourceRange]], RangeRDD]
#: An RDD factory that plans tasks: ``make_rdd(ranges, shape)``.
TaskRddFactory = Callable[[Sequence[SourceRange], TaskOptions], RangeRDD]


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


class ExactlyOnceDStream(ProgressAPI, RangeDStream):
    """A direct stream whose output operations commit results and source positions atomically.

    Unit of parallelism: one Spark task per planned task (:mod:`dstream_exactly_once.core._tasks`;
    one per range when the source's task planning is off):
    small ranges packed for every output pattern, large ranges split for :meth:`commit_each_batch`
    and :meth:`foreach_batch` only (a per-task commit stores whole ranges), and one task per range
    for :meth:`write_each_partition` (its labels name partitions).
    Delivery guarantee: exactly-once for results written through :meth:`commit_each_batch`,
    :meth:`commit_each_partition`, :meth:`foreach_batch` or :meth:`write_each_partition` (each
    record's effect is in the store once, whatever crashes, task retries, replays or zombie drivers
    happen). Anything else the user's function does on the side (printing, calling services) is
    at-least-once.

    Batches with no new records are not logged, not committed and do not call the output
    function. Use exactly one output pattern per stream. Each batch is planned when Spark
    generates it (its records and ranges show in Spark's Streaming tab); its output runs once the
    batches before it are done.

    ``StreamingContext.getOrCreate`` refuses to recover it from a Spark checkpoint (see
    :attr:`_recovery_refusal`): the store is the stream's one source of truth.
    """

    _recovery_refusal = (
        "an exactly-once stream (createExactlyOnceStream, createExactlyOnceFileStream) keeps its positions and "
        "results in its store, the one source of truth; Spark state restored from the checkpoint would not match "
        "the batches the store has committed. Build the context with your setup function (ssc = create()) instead "
        "of StreamingContext.getOrCreate: the stream resumes from the store's committed positions and replays the "
        "uncommitted batches with their logged ranges (updateStateByKey and window state start empty; keep state "
        "that must survive restarts in the store with Writes.incr / Writes.put)")

    def __init__(self, ssc: StreamingContext, committer: BatchCommitter, make_rdd: Callable[..., RangeRDD],
                 tasks: Optional[TaskOptions] = None, *, plan_on_generate: bool = True) -> None:
        """``plan_on_generate=False`` plans each batch when its first output job runs, after the batch
        before it committed (Spark's Streaming tab then counts 0 records for it): only the teaching
        demo uses it, to place each crash point of its at-least-once pipeline inside one batch."""
        self.committer = committer
        self._make_rdd = make_rdd
        self._outputs: list[str] = []
        self._pack_partitions = False  # commit_each_partition(pack=True): small ranges share a task
        self._tasks = tasks

        def compute(time: datetime) -> RangeRDD:
            batch = committer.next_batch(time)
            ranges = list(batch.ranges) if batch is not None else []
            if tasks is None:
                return make_rdd(ranges)
            return make_rdd(ranges, self._task_shape(tasks, batch))

        super().__init__(ssc, compute, plan_on_generate=plan_on_generate)
        # the epoch (the first store write) waits for ssc.start(): an output call refused before it
        # leaves the store as it was and fences no running driver
        run_on_start(ssc, self._start)
        close_on_stop(ssc, committer.close)
        register_committer(ssc, committer)
        attach_monitoring(ssc, committer)

    def _start(self) -> None:
        """Take the epoch when the context starts — for a stream with an output pattern only: a stream
        whose output calls were all refused is never run, and must fence nobody."""
        if self._outputs:
            self.committer.start()

    def data_loss(self) -> DataLossTotals:
        """What this stream skipped as lost since this driver started, in its source's unit (Kafka:
        offsets, files: bytes): skipped while planning and found gone while reading committed
        batches. The same numbers as the progress records' ``dataLossTotals``."""
        return self.committer.progress.data_loss_totals()

    def _task_shape(self, tasks: TaskOptions, batch: Optional[PlannedBatch]) -> TaskOptions:
        """How the batch's ranges become tasks for the stream's output patterns: packed and split for
        whole-batch commits; packed, never split, for per-task commits (a task commits whole ranges;
        a replayed batch gives no task to a range an earlier attempt committed, so no task mixes
        committed and uncommitted ranges); one task per range for label-idempotent sinks.

        Called when Spark generates the batch, possibly before the batches ahead of it ran: the
        stored positions read here for a replayed batch are still the ones its job finds, since only
        that batch's own job commits its ranges (an earlier batch moves a position to where this
        batch's range starts, never to where it ends)."""
        if "write_each_partition" in self._outputs:
            return tasks.with_shape(pack=False, split=False)
        if "commit_each_partition" not in self._outputs:
            return tasks
        if not self._pack_partitions:
            return tasks.with_shape(pack=False, split=False)
        shape = tasks.with_shape(pack=True, split=False)
        if batch is None or not self.committer.is_replay(batch):
            return shape
        committer = self.committer
        stored = committer.call_store(committer.store.load_positions, "load_positions")
        done = frozenset(r.position_key for r in batch.ranges
                         if r.end > r.start and r.position_key in stored and stored[r.position_key].offset == r.end)
        return shape.skipping(done)

    def _add_output(self, pattern: str, log_ahead: bool = True) -> None:
        """Register an output pattern; an offset log written by the commits allows no other output."""
        if self._outputs and (not log_ahead or not self.committer.log_ahead):
            raise ConfigurationError(
                f"commit_each_batch(offset_log='in_commit') must be the stream's only output; it already has "
                f"{', '.join(self._outputs)} and {pattern} was added (use offset_log='ahead' for several outputs)")
        self._outputs.append(pattern)
        self.committer.log_ahead = log_ahead
        # whole-batch commits only: the offset log keeps the ranges with data (see BatchCommitter.compact_log)
        self.committer.compact_log = all(p == "commit_each_batch" for p in self._outputs)

    def await_termination(self, timeout: Optional[float] = None) -> bool:
        """``ssc.awaitTermination()`` with the library's typed error: see
        :func:`~dstream_exactly_once.await_termination`."""
        return await_termination(self._ssc, timeout)

    @property
    def store(self) -> TransactionalStore:
        return self.committer.store

    @property
    def epoch(self) -> int:
        """The epoch this driver holds: taken when the StreamingContext starts (``ssc.start()``), after
        every argument of the stream and its output calls was checked; reading it before raises."""
        return self.committer.epoch

    # ------------------------------------------------------------------ pattern (a)
    def commit_each_batch(self, func: BatchFunc, *, offset_log: str = "ahead") -> None:
        """Run ``func(batch, rdd) -> Writes`` on the driver each batch and commit its writes with
        the batch's positions and commit-log entry in ONE transaction.

        For results small enough for the driver (aggregates): compute them with Spark inside
        ``func`` (``rdd.reduceByKey(...).collect()``) and return :class:`Writes`. ``func``'s
        exception fails the batch; nothing is committed and the error names the batch and ranges.

        ``offset_log`` says when a batch enters the offset log:

        - ``"ahead"`` (default, Spark's design): before it runs, in its own store transaction. A
          batch cut short by a crash is replayed by the next driver with the same id and ranges.
        - ``"in_commit"``: in the commit transaction itself — one durable store transaction per
          batch instead of two (the original WAL-free design: positions and results together, nothing
          else). A batch cut short by a crash left nothing in the store; the next driver plans it
          afresh from the committed positions (same id, possibly longer ranges). The results are
          exactly-once either way; choose ``"ahead"`` when ``func``'s side effects rely on a batch id
          always meaning the same records. With ``"in_commit"`` this must be the stream's only output.
        """
        if not callable(func):
            raise ConfigurationError(f"commit_each_batch needs a function (batch, rdd) -> Writes, got {func!r}")
        if offset_log not in _OFFSET_LOG_MODES:
            raise ConfigurationError(f"offset_log must be one of {', '.join(map(repr, _OFFSET_LOG_MODES))}, "
                                     f"got {offset_log!r}")
        self._add_output("commit_each_batch", log_ahead=offset_log == "ahead")
        committer = self.committer
        log_entry = offset_log == "in_commit"

        def output(time: datetime, rdd: RangeRDD) -> None:
            batch = committer.batch_at(time)
            if batch is None:
                return
            committer.progress.output_started(batch.batch_id)
            try:
                try:
                    with user_code(batch):
                        writes = as_writes(func(shown_batch(batch, rdd), rdd), "the commit_each_batch function")
                except Exception as exc:  # noqa: BLE001 - a read that found its data gone names the way out
                    lost = loss_failure(exc, batch, committer.store)
                    if lost is None:
                        raise
                    raise lost from exc
                losses = batch_losses(rdd.context, batch)
                drops = committer.position_drops(batch)
                committed = writes
                if losses or drops:  # incident records and retired positions commit with the positions
                    committed = writes.copy().drop_positions(drops)
                    record_losses(committed, batch.batch_id, losses)
                committer.progress.commit_started(batch.batch_id)
                outcome = committer.call_store(
                    lambda: committer.store.commit(committer.epoch, committer.stored_form(batch), committed,
                                                   log_entry=log_entry), "commit")
                committer.committed_batch(outcome, batch, drops)
                if outcome is CommitOutcome.APPLIED:
                    log_losses(batch, losses, "beside the batch's commit")
                committer.progress.finished(batch, outcome.value, sink="commit_each_batch",
                                            num_output_rows=writes_size(writes),
                                            replays_skipped=int(outcome is CommitOutcome.REPLAYED), losses=losses,
                                            num_tasks=_num_tasks(rdd))
            except BaseException as exc:
                committer.fail(exc)
                raise

        self.foreachRDD(output)

    def foreach_batch(self, sink: Union[BatchIdSink, Callable[[int, RDD], Optional[Writes]]]) -> None:
        """Structured Streaming's ``foreachBatch`` / ``Sink.addBatch(batchId, data)`` contract.

        ``sink.add_batch(batch_id, rdd)`` (or a plain ``f(batch_id, rdd)``) is called once per batch
        id: a batch id already in the commit log is skipped without calling it, and the returned
        :class:`Writes` commit with the batch's positions, so batch ids are applied exactly once.
        Batch ids are consecutive integers and a replayed batch keeps its id and ranges.
        """
        add_batch = sink.add_batch if isinstance(sink, BatchIdSink) else sink
        if not callable(add_batch):
            raise ConfigurationError(f"foreach_batch(sink=) needs a BatchIdSink or a function (batch_id, rdd), "
                                     f"got {sink!r}")
        committer = self.committer

        def func(batch: PlannedBatch, rdd: RDD) -> Optional[Writes]:
            if committer.call_store(lambda: committer.store.is_committed(batch.batch_id), "is_committed"):
                return None  # the commit below reports the replay; add_batch is not called again
            return add_batch(batch.batch_id, rdd)

        self.commit_each_batch(func)

    # ------------------------------------------------------------------ pattern (b)
    def commit_each_partition(self, func: PartitionFunc, *, pack: bool = False) -> None:
        """Run ``func(records, offset_range, batch) -> Writes`` in each executor task and commit that
        partition's writes with its range's position in ONE transaction on the executor; the driver
        then writes the batch's commit-log entry.

        For results too large for the driver. A task retry or a replayed batch finds its range
        already committed and writes nothing.

        Unit of parallelism: one task per range with data (``offset_range`` is that range), unless
        ``pack=True``: then small ranges share a task as the task planner packs them
        (:mod:`dstream_exactly_once.core._tasks`), ``func`` receives the **tuple** of its task's ranges
        (always a tuple, also of one), and one transaction commits the writes with every one of their
        positions, each under compare-and-set. Ranges are never split for this pattern: a piece could
        not store its range's position without passing unread bytes.
        """
        if not callable(func):
            raise ConfigurationError(f"commit_each_partition needs a function (records, offset_range, batch) -> "
                                     f"Writes, got {func!r}")
        if not isinstance(pack, bool):
            raise ConfigurationError(f"commit_each_partition(pack=) must be True or False, got {pack!r}")
        self._add_output("commit_each_partition")
        self._pack_partitions = pack
        committer = self.committer
        store = committer.store
        retry = committer.retry  # pickled into the tasks: executors retry with the driver's budget

        def output(time: datetime, rdd: RangeRDD) -> None:
            batch = committer.batch_at(time)
            if batch is None:
                return
            epoch = committer.epoch
            by_task = _task_ranges(rdd)
            shown = shown_batch(batch, rdd)  # what func sees: ranges not to be picked by partition index

            def per_partition(index: int, records: Iterable[Any]) -> Iterable[Any]:
                ranges = [r for r in by_task[index] if r.count() > 0] if index < len(by_task) else []
                if not ranges:
                    return [("empty", 0, 0)]
                seen = [0]
                for r in ranges:
                    begin_range(r)
                arg = tuple(ranges) if pack else ranges[0]
                with user_code(batch, ranges):
                    writes = as_writes(func(counted(records, seen), arg, shown), "the commit_each_partition function")
                losses = [d for r in ranges for d in task_losses(r)]
                if losses:  # the ranges' incident records commit with their positions, or not at all
                    writes = writes.copy()
                    record_losses(writes, batch.batch_id, losses)
                outcome = retry.call(lambda: store.commit(epoch, batch, writes, ranges=ranges, complete_batch=False),
                                     f"store commit of batch {batch.batch_id} ranges {', '.join(map(str, ranges))}")
                return [(outcome.value, seen[0], writes_size(writes))]

            _run_partition_job(committer, batch, rdd, per_partition, sink="commit_each_partition")

        self.foreachRDD(output)

    # ------------------------------------------------------------------ label-idempotent sinks
    def write_each_partition(self, sink: PartitionSink,
                             rows: Optional[Callable[[Iterable[Any]], Iterable[Any]]] = None) -> None:
        """Write each partition's records (mapped by ``rows``) to ``sink`` exactly once.

        The sink's label for (application, batch id, partition id) is recorded in the same store
        transaction as the partition's positions; a batch found uncommitted at start is first
        ``recover``-ed (in-doubt two-phase transactions committed or aborted), then replayed with
        the same id, ranges and therefore the same labels. Under a skip data-loss policy the range's
        loss record is handed to the sink as ``writes=`` when its ``write_partition`` takes them.
        """
        if not callable(getattr(sink, "write_partition", None)) or not callable(getattr(sink, "recover", None)):
            raise ConfigurationError(f"write_each_partition needs a sink with write_partition() and recover() "
                                     f"(e.g. DorisSink, KafkaTransactionalSink), got {sink!r}")
        if rows is not None and not callable(rows):
            raise ConfigurationError(f"rows must be a function (records) -> rows, or None, got {rows!r}")
        check = getattr(sink, "check", None)
        if callable(check):  # a sink that reaches its service to check its settings, before the epoch
            check()
        self._add_output("write_each_partition")
        committer = self.committer
        store = committer.store
        to_rows = rows if rows is not None else (lambda records: records)
        takes_writes = _takes_writes(sink)

        def output(time: datetime, rdd: RangeRDD) -> None:
            batch = committer.batch_at(time)
            if batch is None:
                return
            epoch = committer.epoch

            def per_partition(index: int, records: Iterable[Any]) -> Iterable[Any]:
                seen = [0]
                r = batch.ranges[index]
                begin_range(r)
                losses = Writes()
                extra = {"writes": losses} if takes_writes else {}
                read = _with_loss_records(records, r, batch.batch_id, losses)
                with user_code(batch, [r]):
                    result = sink.write_partition(store, epoch, batch, index, to_rows(counted(read, seen)), **extra)
                outcome = getattr(result, "outcome", result)
                return [(getattr(outcome, "value", outcome), seen[0], -1)]

            _run_partition_job(committer, batch, rdd, per_partition, sink=type(sink).__name__,
                               before=lambda: sink.recover(store, batch) if committer.is_replay(batch) else None)

        self.foreachRDD(output)


def _task_ranges(rdd: RangeRDD) -> List[List[SourceRange]]:
    """The ranges each partition of ``rdd`` reads (whole ranges: a per-task commit stores them)."""
    out: List[List[SourceRange]] = []
    for task in rdd.tasks:
        if any(not p.whole for p in task):
            raise ConfigurationError(f"a per-task commit needs whole ranges, but a task reads "
                                     f"{', '.join(p.describe() for p in task)}")
        out.append([p.range for p in task])
    return out


def _takes_writes(sink: PartitionSink) -> bool:
    """Whether ``sink.write_partition`` takes further ``writes=`` (then it commits a range's loss record)."""
    try:
        return "writes" in inspect.signature(sink.write_partition).parameters
    except (TypeError, ValueError):  # no signature to inspect: the sink gets the rows only
        return False


def _with_loss_records(records: Iterable[Any], r: SourceRange, batch_id: int, writes: Writes) -> Iterator[Any]:
    """``records``, then — once they are exhausted — the loss records of ``r``'s read added to ``writes``
    (handed to a sink that commits them after it consumed the rows)."""
    yield from records
    losses = task_losses(r)
    if losses:
        record_losses(writes, batch_id, losses)


def _num_tasks(rdd: Any) -> int:
    """The Spark tasks reading the batch: the task planner's plan of a range RDD (-1 when not known)."""
    try:
        tasks = getattr(rdd, "tasks", None)
        return len(tasks) if isinstance(tasks, list) else int(rdd.getNumPartitions())
    except Exception:  # noqa: BLE001 - progress output must never stop a committed stream
        return -1


def _run_partition_job(committer: BatchCommitter, batch: PlannedBatch, rdd: RangeRDD,
                       per_partition: Callable[[int, Iterable[Any]], Iterable[Any]],
                       before: Optional[Callable[[], Any]] = None, sink: str = "partitions") -> None:
    """Run the per-partition commits as one Spark job, then write the batch's commit-log entry.

    Any failure marks the stream failed (no later batch commits) and is re-raised naming the batch;
    an executor's error reaches the driver as Spark's job failure and is wrapped here once.
    """
    try:
        committer.progress.output_started(batch.batch_id)
        if before is not None:
            before()
        outcomes = rdd.mapPartitionsWithIndex(per_partition).collect()
        losses = batch_losses(rdd.context, batch)
        committer.progress.commit_started(batch.batch_id)
        drops = committer.position_drops(batch)
        outcome = committer.call_store(
            lambda: committer.store.mark_committed(committer.epoch, batch, drop_positions=drops) if drops
            else committer.store.mark_committed(committer.epoch, batch), "mark_committed")
        committer.committed_batch(outcome, batch, drops)
        rows_in, rows_out, replayed = summarize_partitions(outcomes)
        if outcome is CommitOutcome.APPLIED:
            log_losses(batch, losses, "beside each range's commit")
        committer.progress.finished(batch, outcome.value, sink=sink, num_input_rows=rows_in, num_output_rows=rows_out,
                                    replays_skipped=replayed, losses=losses, num_tasks=_num_tasks(rdd))
    except Exception as exc:  # noqa: BLE001 - a Spark job failure arrives as Py4JJavaError
        err: BaseException
        lost = loss_failure(exc, batch, committer.store)
        if lost is not None:
            err = lost
        else:
            err = exc if isinstance(exc, DStreamExactlyOnceError) else output_error(batch, exc)
        committer.fail(err)
        if err is exc:
            raise
        raise err from exc
    except BaseException as exc:
        committer.fail(exc)
        raise
    log.debug("batch %d partition outcomes %s", batch.batch_id, outcomes)


def check_monitor_group(monitor_group: object) -> None:
    if monitor_group is not None and (not isinstance(monitor_group, str) or not monitor_group.strip()):
        raise ConfigurationError(f"monitor_group must be a non-empty Kafka group id (str) or None, "
                                 f"got {monitor_group!r}")
