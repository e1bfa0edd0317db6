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

from ...core._loss_totals import DataLossTotals
from ...errors import ConfigurationError
from ...streaming._data_loss import loss_accumulator, lost_in
from ...streaming._dstream import KafkaDStream
from ...streaming._lifecycle import close_on_stop
from ...streaming._range_rdd import RangeRDD
from ...streaming._recovery import forget
from .._commit_queue import CanCommitOffsets, CommitCallback, CommitQueue, check_commit_args
from .._groups import GroupOffsets
from .._offsets import OffsetRange
from ._direct import DirectBatches

log = logging.getLogger(__name__)

__all__ = ["DirectKafkaDStream", "batch_time_ms"]

_REMEMBERED = 1024


def batch_time_ms(time: datetime) -> int:
    """A batch time as Spark's ``Time.milliseconds`` (what streaming listeners report)."""
    return int(round(time.timestamp() * 1000))


class DirectKafkaDStream(KafkaDStream, CanCommitOffsets):
    """A direct Kafka DStream with ``commitAsync`` (see the module docstring).

    ``recoverable``: ``StreamingContext.getOrCreate`` can recover the stream from a Spark
    checkpoint, as Spark 2.4's direct stream: each batch is planned when Spark generates it, and
    the checkpoint holds the remembered batches' ranges and the next offsets to plan from. The
    recovered stream regenerates the checkpointed batches with their original ranges and goes on
    from their end; a stream that is not recoverable refuses ``getOrCreate`` with the reason.
    """

    _recovery_refusal = ("KafkaUtils.createStream resumes from its consumer group's committed offsets, not from a "
                         "checkpoint. Build the context with your setup function (ssc = create()) instead of "
                         "StreamingContext.getOrCreate; the stream starts again from the group's offsets")

    def __init__(self, ssc: StreamingContext, batches: DirectBatches, recoverable: bool = False) -> None:
        self._init_direct(batches, ssc, recoverable)
        super().__init__(ssc, batches, plan_on_generate=recoverable)

    def _init_direct(self, batches: DirectBatches, ssc: Optional[StreamingContext], recoverable: bool) -> None:
        self._direct = batches
        self._ssc_ref = ssc
        self._recoverable = recoverable
        self._commit_queue: Optional[CommitQueue] = None
        self._queue_lock = threading.Lock()
        self._planned: OrderedDict[int, List[OffsetRange]] = OrderedDict()
        self._planned_lock = threading.Lock()

    # ---------------------------------------------------------------- Spark checkpoint
    def _recovery_recipe(self) -> Optional[Dict[str, Any]]:
        if not self._recoverable:
            return None
        return {"plan": self._plan_state(), "source": self._direct}

    @classmethod
    def _from_recipe(cls, token: str, recipe: Dict[str, Any]) -> DirectKafkaDStream:
        """The stream a recovering driver rebuilds from its recipe (driver side only, no new DStream)."""
        self = cls.__new__(cls)
        self._driver_token = token
        direct: DirectBatches = recipe["source"]
        self._init_direct(direct, None, True)
        self._restore_plan_state(recipe["plan"], direct.rdd)
        self._build = direct
        return self

    def _attach_recovered(self) -> None:
        """Once the recovered context runs: close the source with it and forget this recovery."""
        if self._ssc_ref is not None:
            return
        ssc = StreamingContext._activeContext
        if ssc is None:  # still inside ssc.start(), regenerating the checkpointed batches
            return
        self._ssc_ref = ssc
        direct = self._direct
        close_on_stop(ssc, direct.close)
        close_on_stop(ssc, lambda: (forget(self._driver_token), forget(direct._driver_token)))
        direct.attach(ssc)

    def _rdd_for(self, time: datetime, _tick: Any = None) -> RangeRDD:
        """Spark 0-10's order: commit what was queued, then plan the batch (once per batch time)."""
        if self._restored_until is not None:
            self._attach_recovered()
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

    def data_loss(self) -> DataLossTotals:
        """Offsets this stream skipped as lost since this driver started (``failOnDataLoss=False``):
        ``planned``, skipped while planning (retention or a deleted topic moved the log start past
        the next offset); ``read``, found gone while reading its batches (counted after each batch's
        action, once per range; reads of other streams of the same topic partitions in this
        application count too). ``rdd.data_loss_skipped()`` counts one batch's reads."""
        direct = self._direct
        keys = {f"{tp.topic}/{tp.partition}" for tp in direct.planner.current}
        read = lost_in(loss_accumulator(direct.sc), "offsets", keys.__contains__)
        return DataLossTotals("offsets", direct.data_loss_skips(), read)

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
                ssc = self._ssc_ref or StreamingContext._activeContext
                if ssc is not None:
                    close_on_stop(ssc, self._close_queue)
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
