"""Executor-side reading of one :class:`OffsetRange` with kafka-python.

Each Spark task reads exactly one range: ``assign`` + ``seek(fromOffset)`` + ``poll`` until the
consumer's position reaches ``untilOffset``. Offsets may have gaps (transaction markers, aborted
records under ``read_committed``, compaction), so progress is measured by the consumer position,
never by counting records; a range may end on a marker. Executors never commit offsets and never
auto-reset: an offset that vanished is handled by the data-loss policy.

One consumer is cached per executor process per (client config, topic-partition) and reused by
later tasks; a task retry (attempt > 0) always gets a fresh one.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from typing import Any, Dict, Iterator, Optional, Tuple

from ..errors import DataLossError, DStreamExactlyOnceError, KafkaUnavailableError
from ..offsets import OffsetRange
from .metadata import translate_kafka_error
from .params import KafkaConfig

log = logging.getLogger(__name__)

__all__ = ["ConsumerCache", "current_offset_range", "read_range"]

_CACHE_CAPACITY = 64


class ConsumerCache:
    """An LRU of assign-only consumers keyed by (config, topic, partition), per process."""

    def __init__(self, capacity: int = _CACHE_CAPACITY) -> None:
        self.capacity = capacity
        self._items: OrderedDict[Tuple[Any, ...], Any] = OrderedDict()
        self._lock = threading.Lock()
        self.created = 0

    @staticmethod
    def key(config: KafkaConfig, r: OffsetRange) -> Tuple[Any, ...]:
        items = tuple(sorted((k, repr(v)) for k, v in config.client.items()))
        return (items, config.isolation_level, r.topic, r.partition)

    def acquire(self, config: KafkaConfig, r: OffsetRange, fresh: bool) -> Any:
        """Take the consumer out of the cache (so no other thread uses it) or make one."""
        k = self.key(config, r)
        with self._lock:
            consumer = self._items.pop(k, None)
        if consumer is not None and fresh:
            _close(consumer)
            consumer = None
        if consumer is None:
            from kafka import KafkaConsumer

            try:
                consumer = KafkaConsumer(**config.consumer_kwargs(client_id="dstream-exactly-once-executor"))
            except Exception as exc:  # noqa: BLE001 - translated at this boundary
                raise translate_kafka_error(exc, config.bootstrap, f"creating a consumer for {r}", config) from exc
            self.created += 1
        return consumer

    def release(self, config: KafkaConfig, r: OffsetRange, consumer: Any) -> None:
        k = self.key(config, r)
        evicted = []
        with self._lock:
            old = self._items.pop(k, None)
            if old is not None:
                evicted.append(old)
            self._items[k] = consumer
            while len(self._items) > self.capacity:
                evicted.append(self._items.popitem(last=False)[1])
        for c in evicted:
            _close(c)

    def clear(self) -> None:
        with self._lock:
            items = list(self._items.values())
            self._items.clear()
        for c in items:
            _close(c)


def _close(consumer: Any) -> None:
    try:
        consumer.close(autocommit=False)
    except Exception:  # noqa: BLE001 - closing a broken consumer must not mask the real error
        log.debug("error closing a cached consumer", exc_info=True)


CONSUMERS = ConsumerCache()

# (stage id, partition id) -> the range that task reads; lets user code in the same stage find it.
_CURRENT: OrderedDict[Tuple[int, int], OffsetRange] = OrderedDict()


def _task_identity() -> Tuple[Optional[Tuple[int, int]], int]:
    try:
        from pyspark import TaskContext
    except ImportError:  # pragma: no cover - pyspark is optional for the reader itself
        return None, 0
    ctx = TaskContext.get()
    if ctx is None:
        return None, 0
    return (ctx.stageId(), ctx.partitionId()), ctx.attemptNumber()


def _remember_current(r: OffsetRange) -> int:
    ident, attempt = _task_identity()
    if ident is not None:
        _CURRENT[ident] = r
        _CURRENT.move_to_end(ident)
        while len(_CURRENT) > 1024:
            _CURRENT.popitem(last=False)
    return attempt


def current_offset_range() -> OffsetRange:
    """The :class:`OffsetRange` read by the running Spark task (executor side).

    Call it inside ``mapPartitions``/``foreachPartition`` functions of the stage that reads Kafka
    (before any shuffle); it raises ``LookupError`` anywhere else.
    """
    ident, _ = _task_identity()
    if ident is None or ident not in _CURRENT:
        raise LookupError("no Kafka offset range for this task: call current_offset_range() inside a "
                          "partition function of the stage that reads the KafkaRDD (before any shuffle)")
    return _CURRENT[ident]


def read_range(config: KafkaConfig, r: OffsetRange, *, poll_timeout_ms: int = 120000,
               fail_on_data_loss: bool = True, cache: ConsumerCache = CONSUMERS) -> Iterator[Any]:
    """Yield the kafka-python ``ConsumerRecord``s of ``r`` (offsets in ``[from, until)``).

    Records the current range for :func:`current_offset_range` immediately (before the first
    record is pulled), then reads lazily.
    """
    attempt = _remember_current(r)
    if r.count() == 0:
        return iter(())
    return _read(config, r, poll_timeout_ms, fail_on_data_loss, cache, fresh=attempt > 0)


def _read(config: KafkaConfig, r: OffsetRange, poll_timeout_ms: int, fail_on_data_loss: bool,
          cache: ConsumerCache, fresh: bool) -> Iterator[Any]:
    import kafka.errors as ke
    from kafka import TopicPartition

    tp = TopicPartition(r.topic, r.partition)
    consumer = cache.acquire(config, r, fresh)
    ok = False
    try:
        consumer.assign([tp])
        consumer.seek(tp, r.fromOffset)
        pos = r.fromOffset
        until = r.untilOffset
        last_progress = time.monotonic()
        while pos < until:
            try:
                batch = consumer.poll(timeout_ms=min(200, poll_timeout_ms), max_records=10000)
            except ke.OffsetOutOfRangeError as exc:
                pos = _handle_out_of_range(consumer, tp, r, pos, fail_on_data_loss, exc)
                continue
            except DStreamExactlyOnceError:
                raise
            except Exception as exc:  # noqa: BLE001 - translated at this boundary
                raise translate_kafka_error(exc, config.bootstrap, f"reading {r}") from exc
            records = batch.get(tp, ())
            for rec in records:
                if rec.offset >= until:
                    pos = until
                    break
                if rec.offset >= pos:
                    yield rec
                    pos = rec.offset + 1
            if pos < until:
                moved = consumer.position(tp)
                if moved is not None and moved > pos:
                    pos = min(moved, until)  # skipped markers / aborted / compacted offsets
            if records or pos >= until:
                last_progress = time.monotonic()
            elif (time.monotonic() - last_progress) * 1000 > poll_timeout_ms:
                raise KafkaUnavailableError(
                    f"failed to get records of {r} at offset {pos} after polling for {poll_timeout_ms} ms "
                    "(broker unreachable, or offsets beyond the log end)")
        ok = True
    finally:
        if ok:
            cache.release(config, r, consumer)
        else:
            _close(consumer)


def _handle_out_of_range(consumer: Any, tp: Any, r: OffsetRange, pos: int, fail_on_data_loss: bool,
                         exc: BaseException) -> int:
    earliest = int(consumer.beginning_offsets([tp])[tp])
    if earliest <= pos:
        raise KafkaUnavailableError(f"offset {pos} of {r} is out of range but not below the log start "
                                    f"{earliest}: the log was truncated") from exc
    lost_until = min(earliest, r.untilOffset)
    if fail_on_data_loss:
        raise DataLossError(
            f"offsets [{pos}, {lost_until}) of {r.topic}-{r.partition} were deleted (log start is now {earliest}) "
            "before they were read; set failOnDataLoss=False to skip them") from exc
    log.warning("data loss: skipping offsets [%d, %d) of %s-%d (log start %d)", pos, lost_until, r.topic,
                r.partition, earliest)
    if earliest < r.untilOffset:
        consumer.seek(tp, earliest)
    return lost_until


def records_per_partition() -> Dict[str, int]:
    """Cache statistics (for tests and benchmarks)."""
    return {"cached": len(CONSUMERS._items), "created": CONSUMERS.created}
