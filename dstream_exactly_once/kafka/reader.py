"""Executor-side reading of one :class:`OffsetRange` with kafka-python.

Each Spark task reads exactly one range: ``assign`` + ``seek(fromOffset)`` + ``poll`` until the
consumer's position reaches ``untilOffset``. Offsets may have gaps (transaction markers, aborted
records under ``read_committed``, compaction), so progress is measured by the consumer position,
never by counting records; a range may end on a marker. Executors never commit offsets and never
auto-reset: an offset that vanished is handled by the data-loss policy.

Records are handed on one fetched record batch at a time (:class:`RecordBlock`, parallel lists),
not one object per record. kafka-python's per-record path (a ``ConsumerRecord`` built through
several generator layers per record) cost most of a task's time, so each executor consumer gets a
fetcher hook (:class:`_BatchPartitionRecords`) that keeps kafka-python's batch-level work (CRC
check, control batches, aborted transactions, positions) and returns whole batches; the records of
a batch are then decoded by :func:`_parse_v2`. Where that hook does not fit the installed
kafka-python, the reader falls back to ``ConsumerRecord``s (same results, slower).

Consumers are cached per executor process and reused by later tasks: the one last used for the
task's partition if there is one, else any idle one with the same client config (reassigned); a task
retry (attempt > 0) always gets a fresh one.
"""

from __future__ import annotations

import logging
import threading
import time
from bisect import bisect_left
from collections import OrderedDict
from typing import Any, Dict, Iterable, Iterator, List, NamedTuple, Optional, Tuple

from ..errors import DataLossError, DStreamExactlyOnceError, KafkaUnavailableError
from ..offsets import OffsetRange
from .metadata import translate_kafka_error
from .params import KafkaConfig

log = logging.getLogger(__name__)

__all__ = ["ConsumerCache", "RecordBlock", "current_offset_range", "read_range"]

_CACHE_CAPACITY = 64
# max.partition.fetch.bytes of executor consumers unless kafkaParams set it (kafka-python: 1 MiB).
# Fewer, larger fetches: about a third less broker CPU and a few percent less reader CPU per record.
# A cached consumer holds at most one fetched response it has not returned yet.
_EXECUTOR_FETCH_BYTES = 4 * 1024 * 1024
# Each fetch asks for about what the rest of the range needs (estimated from the bytes per offset
# seen so far, per topic), at least this much and at most max.partition.fetch.bytes, so reading a
# small range does not transfer megabytes past its end (a broker returns at least one whole batch).
_MIN_FETCH_BYTES = 64 * 1024
_BYTES_PER_OFFSET: Dict[str, float] = {}


class ConsumerCache:
    """An LRU of idle assign-only consumers keyed by (config, topic, partition), per process."""

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
        """Take a consumer out of the cache (so no other thread uses it) or make one.

        First choice is the consumer last used for ``r``'s partition, then the least recently used
        idle one with the same config (the reader assigns it ``r``'s partition): making a consumer
        costs a connection and metadata round trips. ``fresh`` (a task retry) always makes one.
        """
        k = self.key(config, r)
        with self._lock:
            consumer = self._items.pop(k, None)
            if consumer is None and not fresh:
                same_config = next((key for key in self._items if key[:2] == k[:2]), None)
                if same_config is not None:
                    consumer = self._items.pop(same_config)
        if consumer is not None and fresh:
            _close(consumer)
            consumer = None
        if consumer is None:
            from kafka import KafkaConsumer

            kwargs = config.consumer_kwargs(client_id="dstream-exactly-once-executor")
            kwargs.setdefault("max_partition_fetch_bytes", _EXECUTOR_FETCH_BYTES)
            try:
                consumer = KafkaConsumer(**kwargs)
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


class RecordBlock(NamedTuple):
    """Consecutive records of one range (from one fetched record batch), as parallel lists.

    ``offsets`` ascend and lie in the range; ``keys``/``values`` are raw bytes (``None`` for null).
    ``timestamps``, ``timestamp_types`` and ``headers`` are filled only when the range is read with
    ``metadata=True`` (``None`` otherwise).
    """

    topic: str
    partition: int
    offsets: List[int]
    keys: List[Optional[bytes]]
    values: List[Optional[bytes]]
    timestamps: Optional[List[int]] = None
    timestamp_types: Optional[List[int]] = None
    headers: Optional[List[Any]] = None


def read_range(config: KafkaConfig, r: OffsetRange, *, poll_timeout_ms: int = 120000,
               fail_on_data_loss: bool = True, metadata: bool = False,
               cache: ConsumerCache = CONSUMERS) -> Iterator[RecordBlock]:
    """Yield the records of ``r`` (offsets in ``[from, until)``) as :class:`RecordBlock`s, in order.

    ``metadata=True`` also fills timestamps and headers. Records the current range for
    :func:`current_offset_range` immediately (before the first record is pulled), then reads lazily.
    """
    attempt = _remember_current(r)
    if r.count() == 0:
        return iter(())
    return _read(config, r, poll_timeout_ms, fail_on_data_loss, metadata, cache, fresh=attempt > 0)


def _read(config: KafkaConfig, r: OffsetRange, poll_timeout_ms: int, fail_on_data_loss: bool,
          metadata: bool, cache: ConsumerCache, fresh: bool) -> Iterator[RecordBlock]:
    import kafka.errors as ke
    from kafka import TopicPartition

    tp = TopicPartition(r.topic, r.partition)
    consumer = cache.acquire(config, r, fresh)
    ok = False
    try:
        fetcher = _install_batches(consumer)
        max_fetch = int(config.client.get("max_partition_fetch_bytes", _EXECUTOR_FETCH_BYTES))
        consumer.assign([tp])
        consumer.seek(tp, r.fromOffset)
        pos = r.fromOffset
        until = r.untilOffset
        last_progress = time.monotonic()
        while pos < until:
            try:
                if fetcher is not None:
                    _size_next_fetch(fetcher, r.topic, until - pos, max_fetch)
                polled = consumer.poll(timeout_ms=min(200, poll_timeout_ms), max_records=10000)
                items = polled.get(tp, ())
                # whole record batches from the fetcher hook, else one list of ConsumerRecords
                chunks = items if fetcher is not None else ([_Records(items)] if items else ())
                blocks = []
                for chunk in chunks:
                    if pos >= until:
                        break
                    block = chunk.block(r.topic, r.partition, pos, until, metadata)
                    if block is not None:
                        blocks.append(block)
                    pos = min(max(pos, chunk.next_offset), until)
                if fetcher is not None and chunks:
                    _learn_batch_sizes(r.topic, chunks)
                if pos < until:
                    moved = consumer.position(tp)
                    if moved is not None and moved > pos:
                        pos = min(moved, until)  # skipped markers / aborted / compacted offsets
            except ke.OffsetOutOfRangeError as exc:
                pos = _handle_out_of_range(consumer, tp, r, pos, fail_on_data_loss, exc)
                continue
            except DStreamExactlyOnceError:
                raise
            except Exception as exc:  # noqa: BLE001 - translated at this boundary
                raise translate_kafka_error(exc, config.bootstrap, f"reading {r}") from exc
            yield from blocks
            if items or pos >= until:
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


# ------------------------------------------------------------------------------ record batches
class _Records:
    """Chunk of records kafka-python already decoded (``ConsumerRecord``s, or legacy-format records)."""

    __slots__ = ("records", "next_offset")

    def __init__(self, records: Iterable[Any]) -> None:
        self.records = list(records)
        self.next_offset = self.records[-1].offset + 1 if self.records else -1

    def block(self, topic: str, partition: int, lo: int, hi: int, metadata: bool) -> Optional[RecordBlock]:
        recs = [rec for rec in self.records if lo <= rec.offset < hi]
        if not recs:
            return None
        block = RecordBlock(topic, partition, [rec.offset for rec in recs], [rec.key for rec in recs],
                            [rec.value for rec in recs])
        if not metadata:
            return block
        return block._replace(timestamps=[rec.timestamp for rec in recs],
                              timestamp_types=[rec.timestamp_type for rec in recs],
                              headers=[rec.headers for rec in recs])


class _Batch:
    """Chunk holding one v2 record batch (CRC-checked, not a control batch, not aborted), undecoded."""

    __slots__ = ("batch", "next_offset")

    def __init__(self, batch: Any) -> None:
        self.batch = batch
        self.next_offset: int = batch.next_offset

    def block(self, topic: str, partition: int, lo: int, hi: int, metadata: bool) -> Optional[RecordBlock]:
        b = self.batch
        if self.next_offset <= lo or b.base_offset >= hi:
            return None
        if metadata:  # kafka-python's own record decoding: timestamps (incl. log-append time), headers
            return _Records(b).block(topic, partition, lo, hi, metadata)
        b._maybe_uncompress()
        offsets, keys, values = _parse_v2(bytes(b._buffer), b._pos, b.records_count, b.base_offset)
        if not offsets:
            return None
        if offsets[0] < lo or offsets[-1] >= hi:  # the batch straddles an end of the range
            i, j = bisect_left(offsets, lo), bisect_left(offsets, hi)
            if i >= j:
                return None
            offsets, keys, values = offsets[i:j], keys[i:j], values[i:j]
        return RecordBlock(topic, partition, offsets, keys, values)


def _varint(buf: bytes, pos: int) -> Tuple[int, int]:
    """The varint at ``pos``, still zigzag-encoded, and the position after it."""
    result = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError(f"varint at {pos} is longer than 64 bits")


def _parse_v2(buf: bytes, pos: int, count: int, base_offset: int
              ) -> Tuple[List[int], List[Optional[bytes]], List[Optional[bytes]]]:
    """Offsets, keys and values of the ``count`` records of a (decompressed) v2 batch from ``pos``.

    Record => Length Attributes:int8 TimestampDelta OffsetDelta KeyLength Key ValueLength Value
    HeaderCount [Header], every length, delta and count a zigzag varint. The one- and two-byte
    varints that almost all records use are decoded inline; the timestamp is skipped and the
    headers are stepped over with the record length. Malformed data raises CorruptRecordError.
    """
    offsets: List[int] = []
    keys: List[Optional[bytes]] = []
    values: List[Optional[bytes]] = []
    add_offset, add_key, add_value = offsets.append, keys.append, values.append
    try:
        for _ in range(count):
            z = buf[pos]  # Length
            if z > 0x7F:
                c = buf[pos + 1]
                if c > 0x7F:
                    z, pos = _varint(buf, pos)
                else:
                    z = (z & 0x7F) | (c << 7)
                    pos += 2
            else:
                pos += 1
            end = pos + ((z >> 1) ^ -(z & 1))
            pos += 1  # Attributes
            while buf[pos] > 0x7F:  # TimestampDelta: skipped
                pos += 1
            pos += 1
            z = buf[pos]  # OffsetDelta
            if z > 0x7F:
                c = buf[pos + 1]
                if c > 0x7F:
                    z, pos = _varint(buf, pos)
                else:
                    z = (z & 0x7F) | (c << 7)
                    pos += 2
            else:
                pos += 1
            add_offset(base_offset + ((z >> 1) ^ -(z & 1)))
            z = buf[pos]  # KeyLength, -1 (zigzag 1) for a null key
            if z == 1:
                add_key(None)
                pos += 1
            else:
                if z > 0x7F:
                    c = buf[pos + 1]
                    if c > 0x7F:
                        z, pos = _varint(buf, pos)
                    else:
                        z = (z & 0x7F) | (c << 7)
                        pos += 2
                else:
                    pos += 1
                n = (z >> 1) ^ -(z & 1)
                if n < 0:
                    add_key(None)
                else:
                    add_key(buf[pos:pos + n])
                    pos += n
            z = buf[pos]  # ValueLength, -1 for a null value
            if z > 0x7F:
                c = buf[pos + 1]
                if c > 0x7F:
                    z, pos = _varint(buf, pos)
                else:
                    z = (z & 0x7F) | (c << 7)
                    pos += 2
            else:
                pos += 1
            n = (z >> 1) ^ -(z & 1)
            if n < 0:
                add_value(None)
            else:
                add_value(buf[pos:pos + n])
                pos += n
            # HeaderCount then headers: at least one byte, exactly one when there are no headers
            if pos >= end or (buf[pos] == 0 and pos + 1 != end):
                raise ValueError(f"record at {pos} does not end where its length says ({end})")
            pos = end
        if pos != len(buf):
            raise ValueError(f"{len(buf) - pos} bytes left after the batch's {count} records")
    except (IndexError, ValueError) as err:
        from kafka.errors import CorruptRecordError

        raise CorruptRecordError(f"Found invalid record structure: {err!r}") from None
    return offsets, keys, values


def _size_next_fetch(fetcher: Any, topic: str, remaining_offsets: int, max_fetch: int) -> None:
    per_offset = _BYTES_PER_OFFSET.get(topic)
    size = max_fetch if per_offset is None else int(remaining_offsets * per_offset * 1.25)
    fetcher.config["max_partition_fetch_bytes"] = min(max_fetch, max(_MIN_FETCH_BYTES, size))


def _learn_batch_sizes(topic: str, chunks: Iterable[Any]) -> None:
    size = offsets = 0
    for chunk in chunks:
        if isinstance(chunk, _Batch):
            size += chunk.batch.size_in_bytes
            offsets += chunk.next_offset - chunk.batch.base_offset
    if offsets:
        _BYTES_PER_OFFSET[topic] = size / offsets


_BATCH_CLASS: Any = None  # the fetcher hook class once built; False if the installed kafka-python does not fit it


def _install_batches(consumer: Any) -> Optional[Any]:
    """Make ``consumer``'s fetcher hand out whole record batches (:class:`_Batch`) instead of
    ``ConsumerRecord``s and return it; ``None`` (nothing changed) when this kafka-python's fetcher
    does not fit."""
    global _BATCH_CLASS
    if _BATCH_CLASS is None:
        try:
            _BATCH_CLASS = _make_batch_class()
        except Exception as exc:  # noqa: BLE001 - any mismatch means: use the ConsumerRecord path
            log.info("reading Kafka record by record: kafka-python's fetcher does not fit the batch reader (%s)", exc)
            _BATCH_CLASS = False
    fetcher: Any = getattr(consumer, "_fetcher", None)
    config = getattr(fetcher, "config", None)
    if not _BATCH_CLASS or not hasattr(fetcher, "PartitionRecords") or not isinstance(config, dict) \
            or "max_partition_fetch_bytes" not in config:
        return None
    if fetcher.PartitionRecords is not _BATCH_CLASS:
        fetcher.PartitionRecords = _BATCH_CLASS  # _read does this before the consumer's first poll
    return fetcher


def _make_batch_class() -> Any:
    """A subclass of kafka-python's ``Fetcher.PartitionRecords`` (3.x) yielding one chunk per batch.

    It keeps kafka-python's batch-level logic as is (CRC check, leader epoch, aborted transactions,
    control batches, the fetch position after each batch) and only leaves out the per-record
    ``ConsumerRecord`` construction. ``fetched_records`` counts chunks against ``max_records``, and
    the position advances past a whole batch when its chunk is taken.
    """
    import inspect

    import kafka.errors as ke
    from kafka.consumer.fetcher import Fetcher
    from kafka.protocol.consumer import IsolationLevel
    from kafka.record.default_records import DefaultRecordBatch

    base = Fetcher.PartitionRecords
    needed = ("_maybe_skip_record", "_consume_aborted_transactions_up_to", "_contains_abort_marker",
              "_is_batch_aborted", "take", "drain")
    missing = [name for name in needed if not hasattr(base, name)]
    missing += [name for name in ("_maybe_uncompress", "_buffer", "_pos") if not hasattr(DefaultRecordBatch, name)]
    if missing:
        raise TypeError(f"missing {missing}")
    params = list(inspect.signature(base._unpack_records).parameters)
    if params != ["self", "tp", "records", "key_deserializer", "value_deserializer"]:
        raise TypeError(f"PartitionRecords._unpack_records{tuple(params)}")
    read_committed = IsolationLevel.READ_COMMITTED

    class _BatchPartitionRecords(base):  # type: ignore[misc, valid-type]
        def _maybe_skip_record(self, record: Any) -> bool:
            return False  # chunks are clipped to the fetch position by the reader

        def _unpack_records(self, tp: Any, records: Any, key_deserializer: Any,
                            value_deserializer: Any) -> Iterator[Any]:
            try:
                batch = records.next_batch()
                last_batch = None
                while batch is not None:
                    last_batch = batch
                    if self.check_crcs and not batch.validate_crc():
                        raise ke.CorruptRecordError(
                            f"Record batch for partition {self.topic_partition} at offset {batch.base_offset} "
                            "failed crc check")
                    if batch.magic < 2:  # legacy message format: kafka-python's records
                        legacy = _Records(batch)
                        for record in legacy.records:
                            if self.check_crcs and not record.validate_crc():
                                raise ke.CorruptRecordError(
                                    f"Record for partition {self.topic_partition} at offset {record.offset} "
                                    "failed crc check")
                        if legacy.records:
                            self.records_read += len(legacy.records)
                            self.next_fetch_offset = legacy.next_offset
                            yield legacy
                        batch = records.next_batch()
                        continue
                    self.leader_epoch = batch.leader_epoch
                    if self.isolation_level == read_committed and batch.has_producer_id():
                        self._consume_aborted_transactions_up_to(batch.last_offset)
                        if self._contains_abort_marker(batch):
                            self.aborted_producer_ids.discard(batch.producer_id)
                        elif self._is_batch_aborted(batch):
                            self.next_fetch_offset = batch.next_offset
                            batch = records.next_batch()
                            continue
                    if batch.is_control_batch or not batch.records_count:
                        self.next_fetch_offset = batch.next_offset
                        batch = records.next_batch()
                        continue
                    self.records_read += batch.records_count
                    self.bytes_read += batch.size_in_bytes
                    self.next_fetch_offset = batch.next_offset
                    yield _Batch(batch)
                    batch = records.next_batch()
                if last_batch is not None and last_batch.magic == 2:
                    self.next_fetch_offset = last_batch.next_offset
                self.drain()
            except StopIteration:
                raise RuntimeError("StopIteration raised unpacking messageset") from None

    _BatchPartitionRecords.__qualname__ = "_BatchPartitionRecords"
    return _BatchPartitionRecords
