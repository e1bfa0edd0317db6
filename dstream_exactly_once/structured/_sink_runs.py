"""Which run of a query committed a sink's batches, and what a micro-batch id means for the store.

Spark numbers a query's micro-batches from 0 in its checkpoint; the number alone cannot tell a
replay of a committed batch from the batch of another checkpoint that happens to carry the same
id. Every task of a streaming query carries two ids Spark sets on the query's thread: the *query
id* (``sql.streaming.queryId``, kept in the checkpoint: the same after every restart from it, a new
one for a new checkpoint) and the *run id* (the job group, new at every start). The exactly-once
sinks send both with each task's commit message, and the store keeps them beside the application's
next batch id, in the same transaction as the batch's output (the position's document)::

    {"query": "<query id>", "run": "<run id>", "epoch": 3, "base": 0, "fenced": ["<older run id>"]}

Rules, for Spark batch ``b`` of query ``q`` (run ``r``) against the stored next batch id ``n``
(:func:`decide_batch`):

- nothing stored: the application's first batch; it is applied;
- stored by query ``q``: the store's batch id is ``base + b``; ``n == base + b`` applies it,
  ``n == base + b + 1`` is a replay (nothing written), anything else is refused
  (:class:`~dstream_exactly_once.errors.OffsetConflictError`);
- stored by another query (a new checkpoint): refused, whatever ``n`` is, unless the sink's option
  ``new_checkpoint`` is ``continue`` and ``b`` is 0 — the new checkpoint then continues the
  application: its batch ``b`` is the store's batch ``n + b`` (``base = n``), so its batches never
  meet the batch ids, Doris labels or Kafka markers of the run before;
- stored without a query id (by a release that did not record runs): the batch-id rule of that
  release applies (``n == b`` applies, ``n == b + 1`` is a replay) and the first batch applied
  records the run.

Epochs: the first commit of a run (a run id the store does not hold) takes a new epoch for the
application, after the checks above passed, and records it with the run; later commits of the run
use it. A run the store recorded as replaced by a later one (``fenced``) is refused with
:class:`~dstream_exactly_once.errors.FencedError`, as is a run whose epoch a later run replaced.
Nothing is written before a query's first commit: building the options takes no epoch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence, Tuple

from ..errors import ConfigurationError, FencedError, OffsetConflictError

__all__ = ["NEW_CHECKPOINT_CHOICES", "BatchDecision", "QueryRun", "SinkState", "decide_batch", "read_state",
           "run_of_messages", "task_run"]

#: Values of the sinks' option ``new_checkpoint``.
NEW_CHECKPOINT_CHOICES = ("refuse", "continue")

#: How many replaced run ids the store keeps (a replaced run that commits again is fenced).
KEEP_FENCED = 8


@dataclass(frozen=True)
class QueryRun:
    """The ids Spark gave the tasks of one micro-batch: ``query`` (stable across restarts from one
    checkpoint) and ``run`` (new at each start)."""

    query: str
    run: str


@dataclass(frozen=True)
class SinkState:
    """What the store holds for a sink: the next batch id to commit and the run that committed."""

    next_batch: int
    query: Optional[str] = None
    run: Optional[str] = None
    epoch: Optional[int] = None
    base: int = 0
    fenced: Tuple[str, ...] = ()

    @classmethod
    def of(cls, position: Any) -> Optional[SinkState]:
        """The state of a stored :class:`~dstream_exactly_once.core._ranges.Position` (``None``: none)."""
        if position is None:
            return None
        meta: Mapping[str, Any] = position.meta or {}
        epoch = meta.get("epoch")
        return cls(int(position.offset), meta.get("query"), meta.get("run"),
                   None if epoch is None else int(epoch), int(meta.get("base", 0)),
                   tuple(str(r) for r in meta.get("fenced", ())))


@dataclass(frozen=True)
class BatchDecision:
    """What a sink does with Spark batch ``spark_batch``: the store's batch id ``app_batch``, whether it
    is a replay, the ``base`` of the run, and the run's ``epoch`` (``None``: the run's first commit
    takes one)."""

    spark_batch: int
    app_batch: int
    replay: bool
    base: int
    epoch: Optional[int]
    fenced: Tuple[str, ...]

    def meta(self, ident: QueryRun, epoch: int) -> dict:
        """The document stored beside the next batch id when this batch commits under ``epoch``."""
        return {"query": ident.query, "run": ident.run, "epoch": epoch, "base": self.base,
                "fenced": list(self.fenced)}


def task_run(what: str) -> QueryRun:
    """The :class:`QueryRun` of the running Spark task (``what`` names the sink, application and task)."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    query = run = None
    if ctx is not None:
        query, run = ctx.getLocalProperty("sql.streaming.queryId"), ctx.getLocalProperty("spark.jobGroup.id")
    if not query or not run:
        raise ConfigurationError(f"{what}: Spark gave the task no streaming query id and run id (task properties "
                                 f"sql.streaming.queryId, spark.jobGroup.id); the exactly-once sinks run only "
                                 f"in a streaming query (writeStream … start())")
    return QueryRun(query, run)


def run_of_messages(runs: Sequence[QueryRun], what: str) -> QueryRun:
    """The one run the commit messages of a batch came from (``what`` names sink, application, batch)."""
    found = set(runs)
    if len(found) != 1:
        raise ConfigurationError(f"{what}: the tasks' commit messages name {len(found)} query runs "
                                 f"{sorted((r.query, r.run) for r in found)}, not one; nothing was written")
    return found.pop()


def read_state(store: Any, key: str) -> Optional[SinkState]:
    """The sink's :class:`SinkState` in ``store`` (position ``key``)."""
    return SinkState.of(store.load_positions().get(key))


def _conflict(where: str, what: str) -> OffsetConflictError:
    return OffsetConflictError(f"{where}: {what}; nothing was written")


def decide_batch(where: str, state: Optional[SinkState], ident: QueryRun, batch_id: int,
                 new_checkpoint: str = "refuse") -> BatchDecision:
    """Apply the rules of this module to Spark batch ``batch_id`` of ``ident`` (``where`` names the sink,
    application and batch in messages). Raises :class:`OffsetConflictError` or :class:`FencedError`."""
    if state is None:
        return BatchDecision(batch_id, batch_id, False, 0, None, ())
    if state.query is None:  # written by a release that did not record runs: the batch-id rule
        if state.next_batch not in (batch_id, batch_id + 1):
            raise _conflict(where, f"batch {batch_id} does not follow the stored next batch id {state.next_batch} "
                                   f"(a new checkpoint against an application with committed batches?). Start the "
                                   f"query with a new application id, or from the checkpoint that wrote batch "
                                   f"{state.next_batch - 1}")
        return BatchDecision(batch_id, batch_id, state.next_batch == batch_id + 1, 0, None, ())
    if state.query != ident.query:
        if new_checkpoint == "continue" and batch_id == 0:
            return BatchDecision(batch_id, state.next_batch, False, state.next_batch, None, ())
        raise _conflict(where, (
            f"batch {batch_id} comes from query {ident.query}, a new checkpoint, but the application's batches up "
            f"to {state.next_batch - 1} were committed by query {state.query}; a batch id of another checkpoint "
            f"is never taken for a replay. Restart from the checkpoint of query {state.query}, start with a new "
            f"application id, or continue the application from this new checkpoint by starting it afresh with "
            f"option new_checkpoint=continue (its batch 0 then follows the stored batches)"))
    if ident.run in state.fenced:
        raise FencedError(f"{where}: run {ident.run} of query {ident.query} was replaced by a later start of the "
                          f"query (run {state.run}, epoch {state.epoch}); this run must stop")
    app_batch = state.base + batch_id
    if state.next_batch not in (app_batch, app_batch + 1):
        raise _conflict(where, f"batch {batch_id} (the application's batch {app_batch}) does not follow the stored "
                               f"next batch id {state.next_batch} of the same query {ident.query}; was the "
                               f"checkpoint restored from an older copy?")
    same_run = state.run == ident.run
    fenced = state.fenced if same_run or state.run is None else (state.fenced + (state.run,))[-KEEP_FENCED:]
    return BatchDecision(batch_id, app_batch, state.next_batch == app_batch + 1, state.base,
                         state.epoch if same_run else None, fenced)


def check_new_checkpoint_option(value: Any, sink: str) -> str:
    """The checked value of option ``new_checkpoint``."""
    text = "refuse" if value is None else str(value).strip().lower()
    if text not in NEW_CHECKPOINT_CHOICES:
        raise ConfigurationError(f"{sink} option 'new_checkpoint' must be one of {list(NEW_CHECKPOINT_CHOICES)}, "
                                 f"got {value!r}")
    return text
