"""The Kafka source's executor side: reads offset ranges and decodes their records.

:class:`KafkaRangeReader` is the :class:`~dstream_exactly_once.core._source.RangeReader` of the Kafka
source: picklable configuration (kafkaParams, decoders, the executor reader's name, the data-loss
policy) that reads one range with the reader named in :mod:`._reader_choice` (kafka-python or
confluent-kafka) and decodes each record into ``(key, value)`` or the message handler's result.
What runs around a read is injected, as :mod:`dstream_exactly_once.files._hosts` injects its runner:
``on_data_loss`` is told of each lost part of a range under ``fail_on_data_loss=False``, and
``task_attempt`` says which attempt of the running task reads the range (a retry gets a fresh
consumer). Nothing here imports Spark.

Unit of parallelism: one read per range (one topic partition's slice of a batch), or — for a task
the planner packed or split (:mod:`dstream_exactly_once.core._tasks`) — one read of the task's pieces
with ONE consumer (:meth:`KafkaRangeReader.read_pieces`, the many-range readers of
:mod:`._multi_reader` and :mod:`._multi_reader_confluent`). A piece of a range is the offsets
``[start, end)`` of it; a loss found in a piece is reported against the whole range. Delivery: a
read is a deterministic function of its range or pieces (the same records every time, or an error),
which is what exactly-once output builds on.
"""

from __future__ import annotations

import copy
import dataclasses
from itertools import chain, repeat
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from ..core._loss import DataLoss, LossCallback
from ..core._ranges import SourceRange
from ..core._source import RangeReader
from ..core._tasks import Piece
from ..errors import ConfigurationError, DecodeError
from ._offsets import Decoder, KafkaMessageAndMetadata, OffsetRange, utf8_decoder
from ._params import KafkaConfig
from ._reader_choice import DEFAULT_READER, range_reader, ranges_reader
from ._records import RecordBlock

__all__ = ["SPLIT_FLOOR", "KafkaRangeReader", "TaskAttempt"]

#: The smallest default split size of a Kafka range, in records: a task costs tens of milliseconds
#: whatever it reads, about what reading this many records costs, so smaller pieces cost more than
#: they save (``tasks.split.size`` set explicitly may go below it).
SPLIT_FLOOR = 100_000

#: ``task_attempt(r)``: the attempt number of the task about to read ``r`` (0: first attempt)
TaskAttempt = Callable[[OffsetRange], int]


def _first_attempt(r: OffsetRange) -> int:
    return 0


class _Decoding:
    """Applies decoders / the message handler to the reader's record blocks; decoder failures name the record.

    Without a message handler a block's keys and values are decoded list by list (the default UTF-8
    decoder without a Python call per record) and zipped into ``(key, value)`` tuples; if a decoder
    fails, the block is decoded again record by record, so the error names the first bad record and
    the records before it are still yielded first, as a per-record loop would.

    With a message handler each record becomes a :class:`KafkaMessageAndMetadata` (one of the two
    subclasses below, built by ``map`` without a generator frame per record): with the default
    decoders and a block that decodes, keys and values are decoded list by list up front; otherwise
    they decode lazily on access and a failure names the record.
    """

    def __init__(self, key_decoder: Decoder, value_decoder: Decoder,
                 message_handler: Optional[Callable[[KafkaMessageAndMetadata], Any]]) -> None:
        self.key_decoder = key_decoder
        self.value_decoder = value_decoder
        self.message_handler = message_handler

    @property
    def metadata(self) -> bool:
        """Whether the reader must fill timestamps and headers (only a message handler sees them)."""
        return self.message_handler is not None

    def __call__(self, blocks: Iterable[RecordBlock]) -> Iterator[Any]:
        per_block = self._pairs if self.message_handler is None else self._handled
        return chain.from_iterable(map(per_block, blocks))

    def _pairs(self, block: RecordBlock) -> Iterator[Tuple[Any, Any]]:
        try:
            keys = _decode_all(self.key_decoder, block.keys)
            values = _decode_all(self.value_decoder, block.values)
        except Exception:  # noqa: BLE001 - decoded again record by record to name the failing one
            return self._pairs_one_by_one(block)
        return zip(keys, values, strict=True)

    def _pairs_one_by_one(self, block: RecordBlock) -> Iterator[Tuple[Any, Any]]:
        kd, vd = self.key_decoder, self.value_decoder
        for offset, key, value in zip(block.offsets, block.keys, block.values, strict=True):
            try:
                yield (kd(key), vd(value))
            except Exception as exc:  # noqa: BLE001 - re-raised with the record's coordinates
                raise DecodeError(f"cannot decode the record at {block.topic}-{block.partition} offset "
                                  f"{offset}: {type(exc).__name__}: {exc}") from exc

    def _handled(self, block: RecordBlock) -> Iterator[Any]:
        kd, vd, handler = self.key_decoder, self.value_decoder, self.message_handler
        assert handler is not None and block.timestamps is not None and block.timestamp_types is not None \
            and block.headers is not None, "message handler blocks are read with metadata=True"
        offsets = block.offsets
        n = len(offsets)
        assert len(block.keys) == len(block.values) == len(block.timestamps) == len(block.timestamp_types) \
            == len(block.headers) == n, "a record block's lists have one item per record"
        topics, partitions = repeat(block.topic, n), repeat(block.partition, n)
        # One message object per record, built and handed to the handler by map() (no generator frame).
        # With the default UTF-8 decoders, a block whose keys and values all decode gets them decoded
        # list-wise up front (decoding cannot fail later, so doing it early changes nothing); otherwise
        # each message decodes lazily and a failure names the record.
        if kd is utf8_decoder and vd is utf8_decoder:
            try:
                keys, values = _decode_all(kd, block.keys), _decode_all(vd, block.values)
            except UnicodeDecodeError:
                pass
            else:
                return map(handler, map(_DecodedMessage, topics, partitions, offsets, block.keys, block.values,
                                        block.timestamps, block.timestamp_types, block.headers, keys, values))
        return map(handler, map(_CheckedMessage, topics, partitions, offsets, block.keys, block.values,
                                block.timestamps, block.timestamp_types, block.headers, repeat(kd, n), repeat(vd, n)))


class _DecodedMessage(KafkaMessageAndMetadata):
    """A message whose ``key`` and ``message`` were decoded already (default UTF-8 decoders, and the
    whole block decodes): plain slots instead of the decoding properties."""

    __slots__ = ("key", "message")

    def __init__(self, topic: str, partition: int, offset: int, raw_key: Optional[bytes],
                 raw_message: Optional[bytes], timestamp: int, timestamp_type: int,
                 headers: List[Tuple[str, Optional[bytes]]], key: Optional[str], message: Optional[str]) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self._rawKey = raw_key
        self._rawMessage = raw_message
        self.timestamp = timestamp
        self.timestampType = timestamp_type
        self.headers = headers
        self._keyDecoder = utf8_decoder
        self._valueDecoder = utf8_decoder
        self.key = key  # type: ignore[misc]  # the slot shadows the base class's decoding property
        self.message = message  # type: ignore[misc]


class _CheckedMessage(KafkaMessageAndMetadata):
    """A message decoding lazily whose decoder failures raise :class:`DecodeError` naming the record."""

    __slots__ = ()

    @property
    def key(self) -> Any:
        try:
            return self._keyDecoder(self._rawKey)
        except Exception as exc:  # noqa: BLE001 - re-raised with the record's coordinates
            raise self._error(self._keyDecoder, exc) from exc

    @property
    def message(self) -> Any:
        try:
            return self._valueDecoder(self._rawMessage)
        except Exception as exc:  # noqa: BLE001 - re-raised with the record's coordinates
            raise self._error(self._valueDecoder, exc) from exc

    def _error(self, decoder: Decoder, exc: Exception) -> DecodeError:
        what = str(exc) if decoder is utf8_decoder else f"{type(exc).__name__}: {exc}"
        return DecodeError(f"cannot decode the record at {self.topic}-{self.partition} offset {self.offset}: {what}")


_utf8 = bytes.decode  # UTF-8, strict: what utf8_decoder does for bytes


def _decode_all(decoder: Decoder, raw: List[Optional[bytes]]) -> List[Any]:
    """``[decoder(b) for b in raw]``; for the default UTF-8 decoder without a Python call per item."""
    if decoder is not utf8_decoder:
        return list(map(decoder, raw))
    nulls = raw.count(None)
    if not nulls:
        return list(map(_utf8, raw))  # type: ignore[arg-type]
    if nulls == len(raw):
        return raw  # all null: decoded as they are (null keys are the common case)
    return [None if b is None else _utf8(b) for b in raw]


class KafkaRangeReader(RangeReader):
    """Reads one :class:`OffsetRange` and decodes its records (``(key, value)`` or the message
    handler's result). Holds only configuration, so it can be pickled into each task.

    ``reader`` names the executor reader (checked on the driver, resolved where the read runs).
    ``on_data_loss`` (picklable) is told of each part of a range whose offsets were gone under
    ``fail_on_data_loss=False``; with ``fail_on_data_loss=True`` such a read raises
    :class:`~dstream_exactly_once.errors.DataLossError`. ``task_attempt`` (picklable) returns the
    attempt number of the running task for the range it is about to read.
    """

    def __init__(self, config: KafkaConfig, *, key_decoder: Decoder = utf8_decoder,
                 value_decoder: Decoder = utf8_decoder,
                 message_handler: Optional[Callable[[KafkaMessageAndMetadata], Any]] = None,
                 poll_timeout_ms: int = 120000, fail_on_data_loss: bool = True,
                 reader: str = DEFAULT_READER, on_data_loss: Optional[LossCallback] = None,
                 task_attempt: TaskAttempt = _first_attempt) -> None:
        self.config = config
        self.reader = reader
        self.decode = _Decoding(key_decoder, value_decoder, message_handler)
        self.poll_timeout_ms = poll_timeout_ms
        self.fail_on_data_loss = fail_on_data_loss
        self.on_data_loss = on_data_loss
        self.task_attempt = task_attempt

    def reporting_to(self, on_data_loss: Optional[LossCallback],
                     task_attempt: Optional[TaskAttempt] = None) -> KafkaRangeReader:
        """A copy of this reader that reports lost offsets to ``on_data_loss`` (and, if given, asks
        ``task_attempt`` for the attempt number)."""
        out = copy.copy(self)
        out.on_data_loss = on_data_loss
        if task_attempt is not None:
            out.task_attempt = task_attempt
        return out

    def read(self, r: SourceRange) -> Iterable[Any]:
        if not isinstance(r, OffsetRange):
            raise ConfigurationError(f"KafkaRangeReader reads OffsetRange values, got {r!r}")
        attempt = self.task_attempt(r)
        on_data_loss = None if self.fail_on_data_loss else self.on_data_loss
        read_range = range_reader(self.reader)
        return self.decode(read_range(self.config, r, poll_timeout_ms=self.poll_timeout_ms,
                                      fail_on_data_loss=self.fail_on_data_loss, metadata=self.decode.metadata,
                                      attempt=attempt, on_data_loss=on_data_loss))

    def can_split(self, r: SourceRange) -> bool:
        """Kafka ranges split by offsets: a piece ``[start, end)`` reads those offsets."""
        return isinstance(r, OffsetRange)

    def read_part(self, r: SourceRange, start: int, end: int) -> Iterable[Any]:
        if not isinstance(r, OffsetRange):
            raise ConfigurationError(f"KafkaRangeReader reads OffsetRange values, got {r!r}")
        return self.read_pieces([Piece(0, r, start, end)])

    #: a task's pieces are read together (one consumer), see :meth:`read_pieces`
    reads_pieces_together = True

    def read_pieces(self, pieces: Sequence[Piece]) -> Iterable[Any]:
        """The records of ``pieces`` (a planned task), piece after piece, each in offset order, read
        with one consumer assigned to all of their partitions. Pieces of one partition that follow
        each other are read as one; a partition that comes back after another one starts a new read
        (two ranges of one partition, as ``createRDD`` allows). Reads lazily."""
        for p in pieces:
            if not isinstance(p.range, OffsetRange):
                raise ConfigurationError(f"KafkaRangeReader reads OffsetRange values, got {p.range!r}")
        return chain.from_iterable(map(self._read_group, _groups(pieces)))

    def read_blocks(self, pieces: Sequence[Piece], *, metadata: bool = True) -> Iterator[RecordBlock]:
        """The undecoded :class:`RecordBlock` s of ``pieces``, read as :meth:`read_pieces` reads them
        (one consumer; timestamps and headers filled when ``metadata``). For callers that build
        their own output from the raw bytes (e.g. Arrow record batches). Reads lazily."""
        for p in pieces:
            if not isinstance(p.range, OffsetRange):
                raise ConfigurationError(f"KafkaRangeReader reads OffsetRange values, got {p.range!r}")
        return chain.from_iterable(self._group_blocks(group, metadata) for group in _groups(pieces))

    def _read_group(self, group: List[Tuple[OffsetRange, OffsetRange]]) -> Iterator[Any]:
        return self.decode(self._group_blocks(group, self.decode.metadata))

    def _group_blocks(self, group: List[Tuple[OffsetRange, OffsetRange]], metadata: bool) -> Iterator[RecordBlock]:
        attempt = self.task_attempt(group[0][1])
        on_data_loss = None if self.fail_on_data_loss else self.on_data_loss
        if on_data_loss is not None and any(part != whole for part, whole in group):
            on_data_loss = _WholeRangeLosses(on_data_loss, {part.position_key: whole for part, whole in group})
        read_ranges = ranges_reader(self.reader)
        return read_ranges(self.config, [part for part, _ in group], poll_timeout_ms=self.poll_timeout_ms,
                           fail_on_data_loss=self.fail_on_data_loss, metadata=metadata, attempt=attempt,
                           on_data_loss=on_data_loss)


def _groups(pieces: Sequence[Piece]) -> List[List[Tuple[OffsetRange, OffsetRange]]]:
    """``pieces`` as reads of at most one range per partition: ``[(part read, whole range)]`` lists,
    in order; a piece that continues the previous one of its range is merged into it."""
    out: List[List[Tuple[OffsetRange, OffsetRange]]] = []
    group: List[Tuple[OffsetRange, OffsetRange]] = []
    for p in pieces:
        whole = p.range
        assert isinstance(whole, OffsetRange)
        if p.size <= 0:
            continue
        if group and group[-1][1] == whole and group[-1][0].untilOffset == p.start:
            group[-1] = (dataclasses.replace(group[-1][0], untilOffset=p.end), whole)
            continue
        if any(part.position_key == whole.position_key for part, _ in group):
            out.append(group)
            group = []
        part = whole if p.whole else OffsetRange(whole.topic, whole.partition, p.start, p.end)
        group.append((part, whole))
    if group:
        out.append(group)
    return out


class _WholeRangeLosses:
    """Hands on a loss found reading a piece as a loss of the piece's whole range (the batch's range,
    which the commits and progress records name). Picklable."""

    def __init__(self, on_data_loss: LossCallback, wholes: Dict[str, OffsetRange]) -> None:
        self.on_data_loss = on_data_loss
        self.wholes = wholes

    def __call__(self, loss: DataLoss) -> None:
        whole = self.wholes.get(loss.position_key)
        if whole is not None:
            loss = dataclasses.replace(loss, range_start=whole.fromOffset, range_end=whole.untilOffset)
        self.on_data_loss(loss)
