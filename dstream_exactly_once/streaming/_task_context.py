"""Which ranges the running Spark task reads (executor side).

A range RDD's partition function records what its task reads here, keyed by the task's (stage id,
partition id), before it reads: the pieces of its planned task (:mod:`dstream_exactly_once.core._tasks`;
one whole range for a task per range), which :func:`current_ranges` and :func:`current_pieces`
return, and — for Kafka — the range being read, which :func:`current_offset_range` returns. This is the Spark
half of the readers: ``kafka/`` and ``files/`` never import Spark.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Optional, Sequence, Tuple

from pyspark import TaskContext

from ..core._ranges import SourceRange
from ..core._tasks import Piece
from ..kafka._offsets import OffsetRange

__all__ = ["current_offset_range", "current_pieces", "current_ranges", "remember_current", "remember_task",
           "task_identity"]

_REMEMBERED = 1024
# (stage id, partition id) -> the range that task reads; lets user code in the same stage find it.
_CURRENT: OrderedDict[Tuple[int, int], OffsetRange] = OrderedDict()
# (stage id, partition id) -> the pieces that task reads (packed and split RDDs)
_TASKS: OrderedDict[Tuple[int, int], Tuple[Piece, ...]] = OrderedDict()


def task_identity() -> Tuple[Optional[Tuple[int, int]], int]:
    """``((stage id, partition id), attempt number)`` of the running Spark task; ``(None, 0)`` outside one."""
    ctx = TaskContext.get()
    if ctx is None:
        return None, 0
    return (ctx.stageId(), ctx.partitionId()), ctx.attemptNumber()


def remember_current(r: OffsetRange) -> int:
    """Record ``r`` as the running task's range; returns the task's attempt number (0 outside a task)."""
    ident, attempt = task_identity()
    if ident is not None:
        _CURRENT[ident] = r
        _CURRENT.move_to_end(ident)
        while len(_CURRENT) > _REMEMBERED:
            _CURRENT.popitem(last=False)
    return attempt


def current_offset_range() -> OffsetRange:
    """The :class:`OffsetRange` read by the running Spark task (executor side): its one range, or for
    a piece of a split range the offsets ``[start, end)`` of that piece.

    Call it inside ``mapPartitions``/``foreachPartition`` functions of the stage that reads Kafka
    (before any shuffle); it raises ``LookupError`` anywhere else, and for a task that packs
    several ranges (use :func:`current_ranges` or :func:`current_pieces` there).
    """
    ident, _ = task_identity()
    pieces = _TASKS.get(ident) if ident is not None else None
    if pieces is not None and pieces and all(isinstance(p.range, OffsetRange) for p in pieces):
        ranges = {p.range for p in pieces}
        if len(ranges) > 1:
            raise LookupError(f"this task reads {len(ranges)} Kafka offset ranges (a packed task): call "
                              f"current_ranges() or current_pieces() for all of them")
        first, last = pieces[0], pieces[-1]
        r = first.range
        assert isinstance(r, OffsetRange)
        return r if first.start == r.start and last.end == r.end else OffsetRange(r.topic, r.partition,
                                                                                   first.start, last.end)
    if ident is None or ident not in _CURRENT:
        raise LookupError("no Kafka offset range for this task: call current_offset_range() inside a "
                          "partition function of the stage that reads the KafkaRDD (before any shuffle)")
    return _CURRENT[ident]


def remember_task(pieces: Sequence[Piece]) -> None:
    """Record ``pieces`` as what the running task reads (called by the range RDD before reading)."""
    ident, _ = task_identity()
    if ident is not None:
        _TASKS[ident] = tuple(pieces)
        _TASKS.move_to_end(ident)
        while len(_TASKS) > _REMEMBERED:
            _TASKS.popitem(last=False)


def current_pieces() -> Tuple[Piece, ...]:
    """The pieces the running Spark task reads, in order (executor side): each names its range
    (``piece.range``), the range's index in ``offsetRanges()`` and the part ``[start, end)`` it reads.

    Call it inside a partition function of the stage that reads a stream's RDD (Kafka or files,
    before any shuffle); it raises ``LookupError`` anywhere else.
    """
    ident, _ = task_identity()
    if ident is None or ident not in _TASKS:
        raise LookupError("no ranges recorded for this task: call current_ranges()/current_pieces() inside a "
                          "partition function of the stage that reads the stream's RDD (before any shuffle)")
    return _TASKS[ident]


def current_ranges() -> Tuple[SourceRange, ...]:
    """The ranges the running Spark task reads (whole or in part), in order, each once (executor
    side; see :func:`current_pieces`)."""
    out: list[SourceRange] = []
    for p in current_pieces():
        if not out or out[-1] != p.range:
            out.append(p.range)
    return tuple(out)
