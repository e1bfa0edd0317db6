"""Driver-side batch planning: starting offsets, partition discovery, rate limits, data loss.

The planner turns "where we are" (the next offset to read per partition) and "where the log ends"
(one ListOffsets round trip per batch) into the batch's :class:`OffsetRange` list. It never reads
records and never runs Spark jobs.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Set

from .._checks import is_int
from ..errors import ConfigurationError, DataLossError, OffsetRangeError
from ._metadata import MetadataSource
from ._offsets import OffsetRange, TopicAndPartition
from ._spark_conf import RATE_OPTIONS
from ._strategies import ConsumerStrategy

log = logging.getLogger(__name__)

__all__ = ["DirectPlanner", "RateLimit", "clamp_ranges"]


@dataclass(frozen=True)
class RateLimit:
    """Records per second per partition (``spark.streaming.kafka.maxRatePerPartition``; 0 = no
    limit) and the per-batch floor (``spark.streaming.kafka.minRatePerPartition``, default 1)."""

    max_rate_per_partition: int = 0
    min_rate_per_partition: int = 1

    def __post_init__(self) -> None:
        for name in ("max_rate_per_partition", "min_rate_per_partition"):
            v = getattr(self, name)
            if not is_int(v) or v < 0:
                raise ConfigurationError(f"{name} must be an int >= 0, got {v!r}")

    @classmethod
    def from_spark_conf(cls, conf: Any) -> RateLimit:
        return cls(*(option.read(conf) for option in RATE_OPTIONS))

    def max_messages(self, batch_seconds: float) -> Optional[int]:
        if self.max_rate_per_partition <= 0:
            return None
        return max(int(batch_seconds * self.max_rate_per_partition), self.min_rate_per_partition)

    def backpressure_messages(self, batch_seconds: float, rate: float, current: Mapping[TopicAndPartition, int],
                              latest: Mapping[TopicAndPartition, int]) -> Optional[Dict[TopicAndPartition, int]]:
        """Records per partition for one batch under a backpressure ``rate`` (records/s, all partitions).

        As Spark's direct stream: the rate is split by each partition's share of the lag, capped
        by ``maxRatePerPartition`` when set, times the batch duration (rounded half up), at least
        ``minRatePerPartition``. ``None`` (no limit) when nothing is behind.
        """
        lags = {tp: max(latest[tp] - start, 0) for tp, start in current.items()}
        total = sum(lags.values())
        if total <= 0 or rate <= 0:
            return None
        out = {}
        for tp, lag in lags.items():
            limit = lag / total * rate
            if self.max_rate_per_partition > 0:
                limit = min(limit, self.max_rate_per_partition)
            out[tp] = max(math.floor(limit * batch_seconds + 0.5), self.min_rate_per_partition)
        return out


def clamp_ranges(current: Mapping[TopicAndPartition, int], latest: Mapping[TopicAndPartition, int],
                 max_messages: Optional[int]) -> List[OffsetRange]:
    """Ranges ``[current, min(current + max_messages, latest))`` in topic/partition order."""
    out = []
    for tp in sorted(current):
        start = current[tp]
        until = latest[tp] if max_messages is None else min(start + max_messages, latest[tp])
        out.append(OffsetRange(tp.topic, tp.partition, start, max(until, start)))
    return out


class _Order:
    """One partition set of :attr:`DirectPlanner.current`, kept across batches while it is unchanged:
    the partitions sorted, each one's key by ``(topic, partition)``, and the last ranges planned
    (reused while a partition's range is the same, as it is for idle partitions)."""

    def __init__(self, current: Dict[TopicAndPartition, int]) -> None:
        self.current = current
        self.sorted = sorted(current)
        self.keys = {(tp.topic, tp.partition): tp for tp in self.sorted}
        self.last: List[Optional[OffsetRange]] = [None] * len(self.sorted)

    def describes(self, current: Dict[TopicAndPartition, int]) -> bool:
        """Whether ``current`` may still hold these partitions: the same dict, as many partitions.
        (If one was removed and another added in between, :meth:`ranges` raises KeyError.)"""
        return current is self.current and len(current) == len(self.sorted)

    def ranges(self, current: Mapping[TopicAndPartition, int], latest: Mapping[TopicAndPartition, int],
               max_messages: Optional[int],
               per_partition: Optional[Mapping[TopicAndPartition, int]] = None) -> List[OffsetRange]:
        """:func:`clamp_ranges` for this partition set (``per_partition`` limits win over ``max_messages``)."""
        out = []
        last = self.last
        for i, tp in enumerate(self.sorted):
            start = current[tp]
            limit = max_messages if per_partition is None else per_partition[tp]
            until = latest[tp] if limit is None else min(start + limit, latest[tp])
            if until < start:
                until = start
            r = last[i]
            if r is None or r.fromOffset != start or r.untilOffset != until:
                r = last[i] = OffsetRange(tp.topic, tp.partition, start, until)
            out.append(r)
        return out


class DirectPlanner:
    """Plans each batch's offset ranges for one stream (driver only; not thread-safe).

    ``fail_on_data_loss``: offsets that vanished (retention, deleted or recreated topic) raise
    :class:`DataLossError` naming topic, partition and the lost range; when false the planner
    goes on: a stored offset below the log start stays the next range's start (the executor's
    reader skips the deleted offsets and reports them, so the loss is recorded with the commit), a
    deleted partition is dropped and a log that ends below the position restarts at its earliest
    offset, counting and logging what was skipped.
    """

    def __init__(self, metadata: MetadataSource, strategy: ConsumerStrategy, *, auto_offset_reset: str = "latest",
                 fail_on_data_loss: bool = True, rate: RateLimit = RateLimit(),
                 discovery_interval_s: float = 5.0) -> None:
        self.metadata = metadata
        self.strategy = strategy
        self.auto_offset_reset = auto_offset_reset
        self.fail_on_data_loss = fail_on_data_loss
        self.rate = rate
        self.discovery_interval_s = discovery_interval_s
        self.current: Dict[TopicAndPartition, int] = {}
        self.lost_offsets = 0  # offsets skipped under fail_on_data_loss=False
        self.last_latest: Dict[TopicAndPartition, int] = {}  # the log ends of the last plan (for lag)
        self._last_discovery = 0.0
        self._order = _Order({})

    # ------------------------------------------------------------------ start
    def start(self, stored: Optional[Mapping[TopicAndPartition, int]] = None) -> Dict[TopicAndPartition, int]:
        """Resolve starting offsets: ``stored`` (from the store) wins, then explicit strategy
        offsets, then ``auto.offset.reset``. Everything is checked against the broker's log."""
        parts = self.strategy.validate(self.metadata)
        stored = dict(stored or {})
        tps = parts | set(stored)
        earliest = self.metadata.earliest(tps & parts)
        latest = self.metadata.latest(tps & parts)
        for tp, off in sorted(self.strategy.offsets.items()):  # checked even where the store's offset wins
            if tp in parts and not earliest[tp] <= off <= latest[tp]:
                raise OffsetRangeError(f"fromOffsets[{tp}] = {off} is outside the log [{earliest[tp]}, {latest[tp]}]")
        start: Dict[TopicAndPartition, int] = {}
        for tp in sorted(tps):
            if tp not in parts:
                self._data_loss(f"{tp} has stored offset {stored[tp]} but the partition no longer exists", 0)
                continue
            if tp in stored:
                off = stored[tp]
                if off > latest[tp]:
                    raise OffsetRangeError(
                        f"stored offset {off} for {tp} is beyond the log end {latest[tp]}: the topic was "
                        f"recreated or the store belongs to another cluster")
                if off < earliest[tp]:
                    if self.fail_on_data_loss:
                        self._data_loss(f"{tp}: offsets [{off}, {earliest[tp]}) were deleted before they were read",
                                        earliest[tp] - off)
                    # the next range still starts at the stored offset (the store's compare-and-set
                    # needs it); its reader skips the deleted offsets and reports them with the commit
                    log.info("data loss: %s: offsets [%d, %d) were deleted before they were read; the next "
                             "batch skips them and records the loss", tp, off, earliest[tp])
            elif tp in self.strategy.offsets:
                off = self.strategy.offsets[tp]
                if not earliest[tp] <= off <= latest[tp]:
                    raise OffsetRangeError(
                        f"fromOffsets[{tp}] = {off} is outside the log [{earliest[tp]}, {latest[tp]}]")
            elif self.auto_offset_reset == "earliest":
                off = earliest[tp]
            elif self.auto_offset_reset == "latest":
                off = latest[tp]
            else:
                raise ConfigurationError(f"no starting offset for {tp} and auto.offset.reset is 'none'")
            start[tp] = off
        self.current = start
        self._last_discovery = time.monotonic()
        return dict(start)

    # ------------------------------------------------------------------ per batch
    def _discover(self) -> None:
        if not self.strategy.dynamic or time.monotonic() - self._last_discovery < self.discovery_interval_s:
            return
        self._last_discovery = time.monotonic()
        try:
            now = self.strategy.partitions(self.metadata)
        except ConfigurationError as exc:
            # A subscribed topic was deleted: plan() reports it under the data-loss policy.
            log.warning("partition discovery skipped: %s", exc)
            return
        new = now - set(self.current)
        if new:
            earliest = self.metadata.earliest(new)
            for tp in sorted(new):
                log.info("new partition %s starts at its earliest offset %d", tp, earliest[tp])
                self.current[tp] = earliest[tp]

    def plan(self, batch_seconds: float, backpressure_rate: Optional[float] = None) -> List[OffsetRange]:
        """The next batch's ranges; does not advance (call :meth:`advance` once logged).

        ``backpressure_rate``: records/s for the whole batch from the stream's rate estimator
        (``None``: only ``maxRatePerPartition`` limits the batch).
        """
        self._discover()
        if not self.current:
            return []
        try:
            latest = self.metadata.latest(self.current)
        except DataLossError as exc:
            gone = self._vanished_partitions()
            if not gone:
                raise
            for tp in gone:
                self._data_loss(f"{tp} was deleted; offsets from {self.current[tp]} on cannot be read", 0, exc)
                del self.current[tp]
            latest = self.metadata.latest(self.current)
        self.last_latest = dict(latest)
        for tp, end in latest.items():
            if end < self.current[tp]:
                earliest = self.metadata.earliest([tp])[tp]
                self._data_loss(f"{tp}: the log ends at {end} but offset {self.current[tp]} was expected to exist "
                                f"(topic recreated or truncated); continuing from {earliest}", 0)
                self.current[tp] = earliest
        max_messages = self.rate.max_messages(batch_seconds)
        per_partition = None if backpressure_rate is None else self.rate.backpressure_messages(
            batch_seconds, backpressure_rate, self.current, latest)
        try:
            return self._order_of_current().ranges(self.current, latest, max_messages, per_partition)
        except KeyError:  # a partition of ``current`` was swapped for another in place: sort again
            self._order = _Order(self.current)
            return self._order.ranges(self.current, latest, max_messages, per_partition)

    def advance(self, ranges: List[OffsetRange]) -> None:
        keys = self._order_of_current().keys
        current = self.current
        for r in ranges:
            tp = keys.get((r.topic, r.partition))
            current[r.topicPartition() if tp is None else tp] = r.untilOffset

    def _order_of_current(self) -> _Order:
        """The sorted partitions of :attr:`current`, sorted again only when its partitions change."""
        if not self._order.describes(self.current):
            self._order = _Order(self.current)
        return self._order

    def _vanished_partitions(self) -> List[TopicAndPartition]:
        alive = self.metadata.topics()
        return sorted(tp for tp in self.current if tp.topic not in alive)

    def _data_loss(self, message: str, count: int, cause: Optional[BaseException] = None) -> None:
        if self.fail_on_data_loss:
            raise DataLossError(message + " (set failOnDataLoss=False to continue from the earliest offset)") from cause
        self.lost_offsets += count
        log.warning("data loss: %s; %d offsets skipped", message, count)

    def partitions(self) -> Set[TopicAndPartition]:
        return set(self.current)
