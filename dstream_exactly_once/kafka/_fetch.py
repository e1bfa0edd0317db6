"""The only module that depends on kafka-python INTERNALS, and the v2 record-batch decoder.

Checked against kafka-python 3.0.x (3.0.12; ``setup.py`` pins ``kafka-python>=3.0,<3.1``). What it
touches beyond kafka-python's public API:

- ``Fetcher.PartitionRecords`` and its private helpers (``_unpack_records`` with the signature
  ``(self, tp, records, key_deserializer, value_deserializer)``, ``_maybe_skip_record``,
  ``_consume_aborted_transactions_up_to``, ``_contains_abort_marker``, ``_is_batch_aborted``),
  replaced per consumer by :func:`install_batches` (``consumer._fetcher.PartitionRecords``);
- ``consumer._fetcher.config["max_partition_fetch_bytes"]``, set before each poll by
  :func:`size_next_fetch`;
- ``DefaultRecordBatch._maybe_uncompress``, ``._buffer`` and ``._pos``, read by :class:`Batch`
  (with the public ``first_timestamp``, ``max_timestamp`` and ``timestamp_type`` for metadata);
- ``consumer._fetcher._paused_partition_records`` and ``._paused_completed_fetches`` (the data a
  consumer parks for a partition paused while its fetched records were not all returned), emptied by
  :func:`forget_parked` before a consumer is used again.

:func:`make_batch_class` checks these names and the signature first; when the installed
kafka-python does not fit, :func:`install_batches` returns ``None`` and the reader falls back to
kafka-python's ``ConsumerRecord``s (:class:`Records`: same results, slower). ``tests/unit/test_reader.py``
compares :func:`parse_v2` with kafka-python's own decoding, and ``tests/integration/test_kafka_rdd.py``
compares the hook with the fallback on a real broker.

Why: kafka-python's per-record path (a ``ConsumerRecord`` built through several generator layers per
record) cost most of a read task's time. The hook keeps kafka-python's batch-level work (CRC check,
control batches, aborted transactions, positions) and returns whole batches; the records of a batch
are then decoded by :func:`parse_v2` (keys and values) or :func:`parse_v2_meta` (also timestamps
and headers, for a message handler).
"""

from __future__ import annotations

import logging
from bisect import bisect_left
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple

from ._records import RecordBlock

log = logging.getLogger(__name__)

__all__ = ["POLL_MAX_RECORDS", "Batch", "Records", "forget_parked", "install_batches", "learn_batch_sizes",
           "make_batch_class", "parse_v2", "parse_v2_meta", "size_next_fetch"]

# Each fetch asks for about what the rest of the range needs (estimated from the bytes per offset
# seen so far, per topic), at least this much and at most max.partition.fetch.bytes, so reading a
# small range does not transfer megabytes past its end (a broker returns at least one whole batch).
_MIN_FETCH_BYTES = 64 * 1024
#: ``max_records`` of each kafka-python poll of the readers (with :func:`install_batches`: record batches)
POLL_MAX_RECORDS = 10000
_BYTES_PER_OFFSET: Dict[str, float] = {}


class Records:
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


class Batch:
    """Chunk holding one v2 record batch (CRC-checked, not a control batch, not aborted), undecoded."""

    __slots__ = ("batch", "next_offset")

    def __init__(self, batch: Any) -> None:
        self.batch = batch
        self.next_offset: int = batch.next_offset

    def block(self, topic: str, partition: int, lo: int, hi: int, metadata: bool) -> Optional[RecordBlock]:
        b = self.batch
        if self.next_offset <= lo or b.base_offset >= hi:
            return None
        b._maybe_uncompress()
        if metadata:
            return self._block_with_metadata(topic, partition, lo, hi)
        offsets, keys, values = parse_v2(bytes(b._buffer), b._pos, b.records_count, b.base_offset)
        if not offsets:
            return None
        if offsets[0] < lo or offsets[-1] >= hi:  # the batch straddles an end of the range
            i, j = bisect_left(offsets, lo), bisect_left(offsets, hi)
            if i >= j:
                return None
            offsets, keys, values = offsets[i:j], keys[i:j], values[i:j]
        return RecordBlock(topic, partition, offsets, keys, values)

    def _block_with_metadata(self, topic: str, partition: int, lo: int, hi: int) -> Optional[RecordBlock]:
        b = self.batch
        kind = b.timestamp_type  # 0 create time, 1 log-append time (then every record has the batch's max)
        offsets, keys, values, stamps, headers = parse_v2_meta(
            bytes(b._buffer), b._pos, b.records_count, b.base_offset, b.first_timestamp,
            b.max_timestamp if kind == 1 else None)
        if not offsets:
            return None
        if offsets[0] < lo or offsets[-1] >= hi:  # the batch straddles an end of the range
            i, j = bisect_left(offsets, lo), bisect_left(offsets, hi)
            if i >= j:
                return None
            offsets, keys, values, stamps, headers = (offsets[i:j], keys[i:j], values[i:j], stamps[i:j],
                                                      headers[i:j])
        return RecordBlock(topic, partition, offsets, keys, values, stamps, [kind] * len(offsets), headers)


#: the zigzag decoding of every one- and two-byte varint's 14 payload bits (``z`` -> ``(z >> 1) ^ -(z & 1)``)
_ZIGZAG: List[int] = [(z >> 1) ^ -(z & 1) for z in range(1 << 14)]


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


def parse_v2(buf: bytes, pos: int, count: int, base_offset: int
              ) -> Tuple[List[int], List[Optional[bytes]], List[Optional[bytes]]]:
    """Offsets, keys and values of the ``count`` records of a (decompressed) v2 batch from ``pos``.

    Record => Length Attributes:int8 TimestampDelta OffsetDelta KeyLength Key ValueLength Value
    HeaderCount [Header], every length, delta and count a zigzag varint. The one- and two-byte
    varints that almost all records use are decoded inline (zigzag through :data:`_ZIGZAG`) into
    preallocated lists (null keys and values are already in place); the timestamp is skipped and
    the headers are stepped over with the record length. Malformed data raises CorruptRecordError.
    """
    offsets: List[int] = [0] * count
    keys: List[Optional[bytes]] = [None] * count
    values: List[Optional[bytes]] = [None] * count
    zz = _ZIGZAG
    try:
        for i in range(count):
            z = buf[pos]  # Length
            if z < 0x80:
                pos += 1
                end = pos + zz[z]
            else:
                c = buf[pos + 1]
                if c < 0x80:
                    pos += 2
                    end = pos + zz[(c << 7) | (z & 0x7F)]
                else:
                    z, pos = _varint(buf, pos)
                    end = pos + ((z >> 1) ^ -(z & 1))
            pos += 1  # Attributes
            while buf[pos] > 0x7F:  # TimestampDelta: skipped
                pos += 1
            pos += 1
            z = buf[pos]  # OffsetDelta
            if z < 0x80:
                pos += 1
                offsets[i] = base_offset + zz[z]
            else:
                c = buf[pos + 1]
                if c < 0x80:
                    pos += 2
                    offsets[i] = base_offset + zz[(c << 7) | (z & 0x7F)]
                else:
                    z, pos = _varint(buf, pos)
                    offsets[i] = base_offset + ((z >> 1) ^ -(z & 1))
            z = buf[pos]  # KeyLength, -1 (zigzag 1) for a null key
            if z == 1:
                pos += 1
            else:
                if z < 0x80:
                    pos += 1
                    n = zz[z]
                else:
                    c = buf[pos + 1]
                    if c < 0x80:
                        pos += 2
                        n = zz[(c << 7) | (z & 0x7F)]
                    else:
                        z, pos = _varint(buf, pos)
                        n = (z >> 1) ^ -(z & 1)
                if n >= 0:
                    keys[i] = buf[pos:pos + n]
                    pos += n
            z = buf[pos]  # ValueLength, -1 for a null value
            if z < 0x80:
                pos += 1
                n = zz[z]
            else:
                c = buf[pos + 1]
                if c < 0x80:
                    pos += 2
                    n = zz[(c << 7) | (z & 0x7F)]
                else:
                    z, pos = _varint(buf, pos)
                    n = (z >> 1) ^ -(z & 1)
            if n >= 0:
                values[i] = buf[pos:pos + n]
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


def parse_v2_meta(buf: bytes, pos: int, count: int, base_offset: int, first_timestamp: int,
                  log_append_time: Optional[int]) -> Tuple[List[int], List[Optional[bytes]], List[Optional[bytes]],
                                                            List[int], List[List[Tuple[str, Optional[bytes]]]]]:
    """:func:`parse_v2` plus each record's timestamp and headers, as kafka-python decodes them.

    A record's timestamp is ``first_timestamp`` + its TimestampDelta, or ``log_append_time`` (the
    batch's max timestamp) for a log-append-time batch; headers are ``[(str key, bytes or None)]``
    (``[]`` without headers). A separate copy of the loop so the key/value path pays nothing for it.
    Malformed data (including a header key that is not UTF-8) raises CorruptRecordError.

    """
    offsets: List[int] = [0] * count
    keys: List[Optional[bytes]] = [None] * count
    values: List[Optional[bytes]] = [None] * count
    stamps: List[int] = [0] * count  # a log-append-time batch's are replaced after the loop
    headers: List[List[Tuple[str, Optional[bytes]]]] = [[]] * count  # each slot replaced below
    zz = _ZIGZAG
    try:
        for i in range(count):
            z = buf[pos]  # Length
            if z < 0x80:
                pos += 1
                end = pos + zz[z]
            else:
                c = buf[pos + 1]
                if c < 0x80:
                    pos += 2
                    end = pos + zz[(c << 7) | (z & 0x7F)]
                else:
                    z, pos = _varint(buf, pos)
                    end = pos + ((z >> 1) ^ -(z & 1))
            z = buf[pos + 1]  # TimestampDelta, after Attributes
            if z < 0x80:
                pos += 2
                stamps[i] = first_timestamp + zz[z]
            else:
                c = buf[pos + 2]
                if c < 0x80:
                    pos += 3
                    stamps[i] = first_timestamp + zz[(c << 7) | (z & 0x7F)]
                else:
                    z, pos = _varint(buf, pos + 1)
                    stamps[i] = first_timestamp + ((z >> 1) ^ -(z & 1))
            z = buf[pos]  # OffsetDelta
            if z < 0x80:
                pos += 1
                offsets[i] = base_offset + zz[z]
            else:
                c = buf[pos + 1]
                if c < 0x80:
                    pos += 2
                    offsets[i] = base_offset + zz[(c << 7) | (z & 0x7F)]
                else:
                    z, pos = _varint(buf, pos)
                    offsets[i] = base_offset + ((z >> 1) ^ -(z & 1))
            z = buf[pos]  # KeyLength, -1 (zigzag 1) for a null key
            if z == 1:
                pos += 1
            else:
                if z < 0x80:
                    pos += 1
                    n = zz[z]
                else:
                    c = buf[pos + 1]
                    if c < 0x80:
                        pos += 2
                        n = zz[(c << 7) | (z & 0x7F)]
                    else:
                        z, pos = _varint(buf, pos)
                        n = (z >> 1) ^ -(z & 1)
                if n >= 0:
                    keys[i] = buf[pos:pos + n]
                    pos += n
            z = buf[pos]  # ValueLength, -1 for a null value
            if z < 0x80:
                pos += 1
                n = zz[z]
            else:
                c = buf[pos + 1]
                if c < 0x80:
                    pos += 2
                    n = zz[(c << 7) | (z & 0x7F)]
                else:
                    z, pos = _varint(buf, pos)
                    n = (z >> 1) ^ -(z & 1)
            if n >= 0:
                values[i] = buf[pos:pos + n]
                pos += n
            if buf[pos] == 0:  # HeaderCount
                pos += 1
                headers[i] = []
            else:
                z, pos = _varint(buf, pos)
                n = (z >> 1) ^ -(z & 1)
                if n < 0:
                    raise ValueError(f"negative header count {n} at {pos}")
                hs: List[Tuple[str, Optional[bytes]]] = []
                for _h in range(n):
                    z, pos = _varint(buf, pos)
                    size = (z >> 1) ^ -(z & 1)
                    if size < 0:
                        raise ValueError(f"negative header key size {size} at {pos}")
                    name = buf[pos:pos + size].decode("utf-8")
                    pos += size
                    z, pos = _varint(buf, pos)
                    size = (z >> 1) ^ -(z & 1)
                    if size < 0:
                        hs.append((name, None))
                    else:
                        hs.append((name, buf[pos:pos + size]))
                        pos += size
                headers[i] = hs
            if pos != end:
                raise ValueError(f"record at {pos} does not end where its length says ({end})")
        if pos != len(buf):
            raise ValueError(f"{len(buf) - pos} bytes left after the batch's {count} records")
    except (IndexError, ValueError) as err:  # UnicodeDecodeError is a ValueError
        from kafka.errors import CorruptRecordError

        raise CorruptRecordError(f"Found invalid record structure: {err!r}") from None
    if log_append_time is not None:
        stamps = [log_append_time] * count
    return offsets, keys, values, stamps, headers


def size_next_fetch(fetcher: Any, topic: str, remaining_offsets: int, max_fetch: int) -> None:
    """Set the fetcher's next ``max_partition_fetch_bytes`` to about what ``remaining_offsets`` need."""
    per_offset = _BYTES_PER_OFFSET.get(topic)
    size = max_fetch if per_offset is None else int(remaining_offsets * per_offset * 1.25)
    fetcher.config["max_partition_fetch_bytes"] = min(max_fetch, max(_MIN_FETCH_BYTES, size))


def forget_parked(consumer: Any) -> int:
    """Drop what ``consumer``'s fetcher parked for paused partitions; returns how many partitions had some.

    kafka-python 3.0 parks the fetched records of a partition that is paused while they were not all
    returned (the reader pauses a partition the moment it reaches its range's end, and the rest of
    the record batch in hand is parked), and fetches nothing more for that partition while they are
    parked. It gives parked records back only at a poll that starts with no partition's records in
    line, which on a consumer that has fetched anything seldom happens: a cached consumer reassigned
    to that partition for a later range could stop returning its records for good. Parked records are of no use to a
    later read (it seeks every partition to its range's start), so a reader calls this before each
    read with a consumer it did not just create.
    """
    fetcher = getattr(consumer, "_fetcher", None)
    records = getattr(fetcher, "_paused_partition_records", None)
    completed = getattr(fetcher, "_paused_completed_fetches", None)
    parked: set = set()
    if isinstance(records, dict) and records:
        for part in list(records.values()):
            try:
                part.drain()
            except Exception as exc:  # noqa: BLE001 - draining only records metrics; the data is dropped anyway
                log.debug("draining parked records of %s: %s", getattr(part, "topic_partition", "?"), exc)
        parked.update(records)
        records.clear()
    if isinstance(completed, dict) and completed:
        parked.update(completed)
        completed.clear()
    return len(parked)


def learn_batch_sizes(topic: str, chunks: Iterable[Any]) -> None:
    """Remember ``topic``'s bytes per offset from the batches just fetched (for :func:`size_next_fetch`)."""
    size = offsets = 0
    for chunk in chunks:
        if isinstance(chunk, Batch):
            size += chunk.batch.size_in_bytes
            offsets += chunk.next_offset - chunk.batch.base_offset
    if offsets:
        _BYTES_PER_OFFSET[topic] = size / offsets


_BATCH_CLASS: Any = None  # the fetcher hook class once built; False if the installed kafka-python does not fit it


def install_batches(consumer: Any) -> Optional[Any]:
    """Make ``consumer``'s fetcher hand out whole record batches (:class:`Batch`) instead of
    ``ConsumerRecord``s and return it; ``None`` (nothing changed) when this kafka-python's fetcher
    does not fit."""
    global _BATCH_CLASS
    if _BATCH_CLASS is None:
        try:
            _BATCH_CLASS = make_batch_class()
        except Exception as exc:  # noqa: BLE001 - any mismatch means: use the ConsumerRecord path
            log.info("reading Kafka record by record: kafka-python's fetcher does not fit the batch reader (%s)", exc)
            _BATCH_CLASS = False
    fetcher: Any = getattr(consumer, "_fetcher", None)
    config = getattr(fetcher, "config", None)
    if not _BATCH_CLASS or not hasattr(fetcher, "PartitionRecords") or not isinstance(config, dict) \
            or "max_partition_fetch_bytes" not in config:
        return None
    if fetcher.PartitionRecords is not _BATCH_CLASS:
        fetcher.PartitionRecords = _BATCH_CLASS  # the reader does this before the consumer's first poll
    return fetcher


def make_batch_class() -> Any:
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
    missing += [name for name in ("_maybe_uncompress", "_buffer", "_pos", "first_timestamp", "max_timestamp",
                                  "timestamp_type") if not hasattr(DefaultRecordBatch, name)]
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
                        legacy = Records(batch)
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
                    yield Batch(batch)
                    batch = records.next_batch()
                if last_batch is not None and last_batch.magic == 2:
                    self.next_fetch_offset = last_batch.next_offset
                self.drain()
            except StopIteration:
                raise RuntimeError("StopIteration raised unpacking messageset") from None

    _BatchPartitionRecords.__qualname__ = "_BatchPartitionRecords"
    return _BatchPartitionRecords
