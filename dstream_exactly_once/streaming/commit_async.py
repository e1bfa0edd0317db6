"""The direct stream that ``createDirectStream`` returns: a :class:`KafkaDStream` that can also
commit offsets to its Kafka consumer group (Spark 0-10's ``CanCommitOffsets``).

Unit of parallelism: one Spark task per topic partition per batch. Delivery: at-least-once when
offsets are committed to Kafka after the output (``stream.commitAsync(rdd.offsetRanges())`` at the
end of ``foreachRDD``); exactly-once needs ``KafkaUtils.createExactlyOnceStream``.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from datetime import datetime
from typing import Any, Dict, List, Optional, Sequence

from pyspark.streaming import StreamingContext

from ..errors import ConfigurationError
from ..kafka.commit_queue import CanCommitOffsets, CommitCallback, CommitQueue, check_commit_args
from ..kafka.groups import GroupOffsets
from ..offsets import OffsetRange
from .direct import DirectBatches
from .dstream import KafkaDStream
from .lifecycle import close_on_stop
from .range_rdd import RangeRDD

log = logging.getLogger(__name__)

__all__ = ["DirectKafkaDStream", "batch_time_ms"]

_REMEMBERED = 1024


def batch_time_ms(time: datetime) -> int:
    """A batch time as Spark's ``Time.milliseconds`` (what streaming listeners report)."""
    return int(round(time.timestamp() * 1000))


class DirectKafkaDStream(KafkaDStream, CanCommitOffsets):
    """A direct Kafka DStream with ``commitAsync`` (see the module docstring)."""

    def __init__(self, ssc: StreamingContext, batches: DirectBatches) -> None:
        self._direct = batches
        self._ssc_ref = ssc
        self._commit_queue: Optional[CommitQueue] = None
        self._queue_lock = threading.Lock()
        self._planned: OrderedDict[int, List[OffsetRange]] = OrderedDict()
        self._planned_lock = threading.Lock()
        super().__init__(ssc, batches)

    def _rdd_for(self, time: datetime, _tick: Any = None) -> RangeRDD:
        """Spark 0-10's order: commit what was queued, then plan the batch (once per batch time)."""
        with self._lock:
            if time in self._batches:
                return super()._rdd_for(time, _tick)
            self.flush_commits()
            rdd = super()._rdd_for(time, _tick)
        with self._planned_lock:
            self._planned[batch_time_ms(time)] = rdd.offsetRanges()
            while len(self._planned) > _REMEMBERED:
                self._planned.popitem(last=False)
        return rdd

    def planned_ranges(self, time_ms: int) -> Optional[List[OffsetRange]]:
        """The ranges planned for the batch at ``time_ms`` (and forget them); ``None`` if unknown."""
        with self._planned_lock:
            return self._planned.pop(time_ms, None)

    # ---------------------------------------------------------------- CanCommitOffsets
    def commitAsync(self, offsetRanges: Sequence[OffsetRange],  # noqa: N802, N803 - Spark API names
                    callback: Optional[CommitCallback] = None) -> None:
        """Queue ``offsetRanges`` for a commit to kafkaParams' ``group.id``, as Spark 0-10 does.

        The commit happens on the driver before the next batch is planned (and when the context
        stops), merged to the highest ``untilOffset`` per partition; then ``callback(offsets,
        exception)`` is called with ``{TopicAndPartition: offset}`` and ``None`` or the error.
        At-least-once: call it after your output has completed.
        """
        check_commit_args(offsetRanges, callback)
        self._queue().add(offsetRanges, callback)

    def _queue(self) -> CommitQueue:
        with self._queue_lock:
            if self._commit_queue is None:
                group = self._direct.config.group_id
                if group is None:
                    raise ConfigurationError(
                        "commitAsync needs kafkaParams['group.id'] (the consumer group to commit to); "
                        "add it to the kafkaParams of createDirectStream")
                self._commit_queue = CommitQueue(GroupOffsets(self._direct.config, group))
                close_on_stop(self._ssc_ref, self._close_queue)
            return self._commit_queue

    def flush_commits(self) -> Optional[Dict[object, int]]:
        """Commit what ``commitAsync`` queued now (driver); returns the offsets committed, if any."""
        queue = self._commit_queue
        if queue is None:
            return None
        return queue.commit_all()  # type: ignore[return-value]

    def _close_queue(self) -> None:
        queue = self._commit_queue
        if queue is not None:
            try:
                queue.commit_all()  # what the last batches queued
            finally:
                queue.group.close()
