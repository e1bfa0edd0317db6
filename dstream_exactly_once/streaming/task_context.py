"""Which :class:`OffsetRange` the running Spark task reads (executor side).

The KafkaRDD's partition function records its range here, keyed by the task's (stage id,
partition id), before it reads; :func:`current_offset_range` finds it again from user code in the
same stage. This is the Spark half of the reader: ``kafka/`` itself never imports Spark.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Optional, Tuple

from pyspark import TaskContext

from ..kafka.offsets import OffsetRange

__all__ = ["current_offset_range", "remember_current", "task_identity"]

_REMEMBERED = 1024
# (stage id, partition id) -> the range that task reads; lets user code in the same stage find it.
_CURRENT: OrderedDict[Tuple[int, int], OffsetRange] = OrderedDict()


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
    """The :class:`OffsetRange` read by the running Spark task (executor side).

    Call it inside ``mapPartitions``/``foreachPartition`` functions of the stage that reads Kafka
    (before any shuffle); it raises ``LookupError`` anywhere else.
    """
    ident, _ = task_identity()
    if ident is None or ident not in _CURRENT:
        raise LookupError("no Kafka offset range for this task: call current_offset_range() inside a "
                          "partition function of the stage that reads the KafkaRDD (before any shuffle)")
    return _CURRENT[ident]
