"""spark-streaming-kafka-0-10's ``CanCommitOffsets``: queue offset ranges, commit them to the
stream's consumer group on the driver.

As in Spark 0-10, ``commitAsync`` only queues; the queue is drained on the driver when the next
batch is planned (and, here, once more when the StreamingContext stops). Ranges queued together
are merged to the highest ``untilOffset`` per partition. The group is Kafka's ``group.id`` from
kafkaParams, the offsets are each partition's next offset to read. Committing to Kafka after your
output is at-least-once (a crash between output and commit re-reads the batch); for exactly-once
use ``KafkaUtils.createExactlyOnceStream``, which commits offsets in the same transaction as results.
"""

from __future__ import annotations

import logging
import threading
from abc import ABC, abstractmethod
from typing import Any, Callable, Dict, List, Optional, Sequence

from ..errors import ConfigurationError
from ._groups import GroupOffsets
from ._offsets import OffsetRange, TopicAndPartition

log = logging.getLogger(__name__)

__all__ = ["CanCommitOffsets", "CommitCallback", "CommitQueue", "check_commit_args"]

#: ``callback(offsets, exception)``: the offsets committed (or tried) and ``None`` or the error
CommitCallback = Callable[[Dict[TopicAndPartition, int], Optional[BaseException]], Any]


class CanCommitOffsets(ABC):
    """Spark 0-10's interface of direct streams that commit offsets to Kafka (``stream.commitAsync``)."""

    @abstractmethod
    def commitAsync(self, offsetRanges: Sequence[OffsetRange],  # noqa: N802, N803 - Spark API names
                    callback: Optional[CommitCallback] = None) -> None:
        """Queue ``offsetRanges`` to be committed to the stream's ``group.id`` on the driver;
        ``callback(offsets, exception)`` is called after the commit (``exception`` is ``None`` on success)."""


def check_commit_args(offset_ranges: Any, callback: Any) -> List[OffsetRange]:
    """``offsetRanges`` as a list of :class:`OffsetRange` (``rdd.offsetRanges()``); ``callback`` callable or None."""
    if isinstance(offset_ranges, (str, bytes)) or not isinstance(offset_ranges, (list, tuple)):
        raise ConfigurationError(
            f"offsetRanges must be a list of OffsetRange (rdd.offsetRanges()), got {type(offset_ranges).__name__}")
    bad = [r for r in offset_ranges if not isinstance(r, OffsetRange)]
    if bad:
        raise ConfigurationError(f"offsetRanges must contain OffsetRange values, got {bad[0]!r}")
    if callback is not None and not callable(callback):
        raise ConfigurationError(f"callback must be callable(offsets, exception) or None, got {callback!r}")
    return list(offset_ranges)


class CommitQueue:
    """Queued ranges and callbacks of one stream; :meth:`commit_all` commits them (driver only)."""

    def __init__(self, group: GroupOffsets) -> None:
        self.group = group
        self._lock = threading.Lock()
        self._ranges: List[OffsetRange] = []
        self._callbacks: List[CommitCallback] = []
        self.commits = 0
        self.failures = 0

    def add(self, offset_ranges: Sequence[OffsetRange], callback: Optional[CommitCallback] = None) -> None:
        ranges = check_commit_args(offset_ranges, callback)
        with self._lock:
            self._ranges.extend(ranges)
            if callback is not None:
                self._callbacks.append(callback)

    def pending(self) -> int:
        with self._lock:
            return len(self._ranges) + len(self._callbacks)

    def commit_all(self) -> Optional[Dict[TopicAndPartition, int]]:
        """Commit everything queued (highest ``untilOffset`` per partition); call the callbacks.

        Never raises: a failed commit is handed to the callbacks (and logged when there is none);
        returns the offsets committed, ``None`` if nothing was queued or the commit failed.
        """
        with self._lock:
            ranges, self._ranges = self._ranges, []
            callbacks, self._callbacks = self._callbacks, []
        if not ranges and not callbacks:
            return None
        offsets: Dict[TopicAndPartition, int] = {}
        for r in ranges:
            tp = r.topicPartition()
            offsets[tp] = max(offsets.get(tp, r.untilOffset), r.untilOffset)
        error: Optional[BaseException] = None
        try:
            self.group.commit(offsets)
            self.commits += 1
        except Exception as exc:  # noqa: BLE001 - asynchronous: the error goes to the callbacks
            error = exc
            self.failures += 1
            if not callbacks:
                log.warning("commitAsync to group %r failed: %s", self.group.group_id, exc)
        for callback in callbacks:
            try:
                callback(dict(offsets), error)
            except Exception:  # noqa: BLE001 - a user callback must not stop the stream
                log.warning("commitAsync callback %r raised", callback, exc_info=True)
        return None if error is not None else offsets
