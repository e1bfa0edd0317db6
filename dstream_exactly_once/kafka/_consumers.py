"""Executor-side cache of assign-only kafka-python consumers, one per process (:data:`CONSUMERS`).

Consumers are reused by later tasks: the one last used for the task's partition if there is one,
else any idle one with the same client config (the reader reassigns it); a task retry always gets a
fresh one. Only kafka-python's public API is used here; the cache itself does not depend on the
client library (the confluent-kafka reader keeps its own instance with its own ``create``/``close``).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from typing import Any, Callable, Dict, Optional, Sequence, Tuple, TypeVar

from ._errors_map import translate_kafka_error
from ._offsets import OffsetRange
from ._params import KafkaConfig

log = logging.getLogger(__name__)

K = TypeVar("K")

__all__ = ["CONSUMERS", "EXECUTOR_FETCH_BYTES", "ConsumerCache", "ConsumerFactory", "close_consumer", "log_bounds",
           "sessionless_consumer"]

_CACHE_CAPACITY = 64
#: max.partition.fetch.bytes of executor consumers unless kafkaParams set it (kafka-python: 1 MiB).
#: Fewer, larger fetches: about a third less broker CPU and a few percent less reader CPU per record.
#: A cached consumer holds at most one fetched response it has not returned yet.
EXECUTOR_FETCH_BYTES = 4 * 1024 * 1024


#: ``create(config, r)``: a new consumer for reading ``r`` under ``config`` (errors already translated)
ConsumerFactory = Callable[[KafkaConfig, OffsetRange], Any]


class ConsumerCache:
    """An LRU of idle assign-only consumers keyed by (config, topic, partition), per process.

    ``create`` makes a consumer (default: a kafka-python ``KafkaConsumer``), ``close`` closes one
    without committing and without raising (default: :func:`close_consumer`). ``share_idle=False``
    reuses a consumer only for the partition it last read (for clients that keep fetching in the
    background, whose fetch parked at the broker would delay another partition's first fetch).
    """

    def __init__(self, capacity: int = _CACHE_CAPACITY, *, create: Optional[ConsumerFactory] = None,
                 close: Optional[Callable[[Any], None]] = None, share_idle: bool = True) -> None:
        self.capacity = capacity
        self.share_idle = share_idle
        self._create: ConsumerFactory = create or _kafka_python_consumer
        self._close: Callable[[Any], None] = close or close_consumer
        self._items: OrderedDict[Tuple[Any, ...], Any] = OrderedDict()
        self._lock = threading.Lock()
        self.created = 0

    @staticmethod
    def key(config: KafkaConfig, r: OffsetRange) -> Tuple[Any, ...]:
        """The cache key of ``r``'s partition under ``config``'s client settings."""
        items = tuple(sorted((k, repr(v)) for k, v in config.client.items()))
        return (items, config.isolation_level, r.topic, r.partition)

    def acquire(self, config: KafkaConfig, r: OffsetRange, fresh: bool) -> Any:
        """Take a consumer out of the cache (so no other thread uses it) or make one.

        First choice is the consumer last used for ``r``'s partition, then the least recently used
        idle one with the same config (the reader assigns it ``r``'s partition): making a consumer
        costs a connection and metadata round trips. ``fresh`` (a task retry) always makes one.
        """
        k = self.key(config, r)
        with self._lock:
            consumer = self._items.pop(k, None)
            if consumer is None and not fresh and self.share_idle:
                same_config = next((key for key in self._items if key[:2] == k[:2]), None)
                if same_config is not None:
                    consumer = self._items.pop(same_config)
        if consumer is not None and fresh:
            self._close(consumer)
            consumer = None
        if consumer is None:
            consumer = self._create(config, r)
            self.created += 1
        return consumer

    def discard(self, consumer: Any) -> None:
        """Close a consumer that failed (it is not put back)."""
        self._close(consumer)

    def release(self, config: KafkaConfig, r: OffsetRange, consumer: Any) -> None:
        """Put a consumer that read ``r`` without error back; the least recently used beyond capacity closes."""
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
            self._close(c)

    def clear(self) -> None:
        """Close every idle consumer."""
        with self._lock:
            items = list(self._items.values())
            self._items.clear()
        for c in items:
            self._close(c)


def _kafka_python_consumer(config: KafkaConfig, r: OffsetRange) -> Any:
    """An assign-only kafka-python consumer for the executors (4 MiB partition fetches by default)."""
    from kafka import KafkaConsumer

    kwargs = config.consumer_kwargs(client_id="dstream-exactly-once-executor")
    kwargs.setdefault("max_partition_fetch_bytes", EXECUTOR_FETCH_BYTES)
    try:
        return KafkaConsumer(**kwargs)
    except Exception as exc:  # noqa: BLE001 - translated at this boundary
        raise translate_kafka_error(exc, config.bootstrap, f"creating a consumer for {r}", config) from exc


def sessionless_consumer(config: KafkaConfig, r: OffsetRange) -> Any:
    """A new assign-only kafka-python consumer without incremental fetch sessions, for reading again
    partitions whose records a consumer did not return (:mod:`._stall`); never put in a cache."""
    from kafka import KafkaConsumer

    kwargs = config.consumer_kwargs(client_id="dstream-exactly-once-executor-recovery")
    kwargs.setdefault("max_partition_fetch_bytes", EXECUTOR_FETCH_BYTES)
    kwargs["enable_incremental_fetch_sessions"] = False
    try:
        return KafkaConsumer(**kwargs)
    except Exception as exc:  # noqa: BLE001 - translated at this boundary
        raise translate_kafka_error(exc, config.bootstrap, f"creating a consumer for {r}", config) from exc


def log_bounds(config: KafkaConfig, keys: Sequence[K], timeout_ms: int = 10000) -> Tuple[Dict[K, int], Dict[K, int]]:
    """``({key: log start}, {key: log end})`` of the partitions ``keys`` (``(topic, partition)`` pairs, such
    as kafka-python ``TopicPartition`` s), asked of the broker with a new kafka-python client at the
    reader's isolation level (the end is the last stable offset under read_committed). Serves both
    readers: it is pure Python, so a caller can give up on it (:class:`._stall.BoundedProbe`). Raises
    whatever the client raises when the broker cannot be asked."""
    from kafka import KafkaConsumer, TopicPartition

    tps = {TopicPartition(k[0], k[1]): k for k in keys}  # type: ignore[index]
    kwargs = config.consumer_kwargs(client_id="dstream-exactly-once-executor-probe")
    consumer = KafkaConsumer(**kwargs)
    try:
        starts = consumer.beginning_offsets(list(tps), timeout_ms=timeout_ms)
        ends = consumer.end_offsets(list(tps), timeout_ms=timeout_ms)
        return {tps[tp]: int(v) for tp, v in starts.items()}, {tps[tp]: int(v) for tp, v in ends.items()}
    finally:
        close_consumer(consumer)


def close_consumer(consumer: Any) -> None:
    """Close without committing; errors are logged, never raised (the caller may be failing already)."""
    try:
        consumer.close(autocommit=False)
    except Exception:  # noqa: BLE001 - closing a broken consumer must not mask the real error
        log.debug("error closing a cached consumer", exc_info=True)


#: The process-wide cache the reader uses by default.
CONSUMERS = ConsumerCache()
