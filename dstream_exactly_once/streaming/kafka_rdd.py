"""KafkaRDD: one Spark partition per :class:`OffsetRange`, read on executors by kafka-python (default)
or confluent-kafka (``spark.streaming.kafka.reader``, :mod:`dstream_exactly_once.kafka.reader_choice`).

Unit of parallelism: one task per offset range (one topic partition's slice of the batch).
Delivery: the RDD is a deterministic function of its ranges — recomputing a partition (task
retry, replayed batch) yields the same records, which is what exactly-once output builds on.
With ``failOnDataLoss=False`` offsets deleted before they were read are skipped on the executor;
:meth:`KafkaRDD.data_loss_skipped` counts them on the driver.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from itertools import chain, repeat
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from pyspark import SparkContext
from pyspark.accumulators import Accumulator, AccumulatorParam

from ..core.loss import DataLoss, LossCallback
from ..core.ranges import SourceRange
from ..core.source import RangeReader
from ..errors import DecodeError
from ..kafka.offsets import Decoder, KafkaMessageAndMetadata, OffsetRange, utf8_decoder
from ..kafka.params import KafkaConfig
from ..kafka.reader_choice import DEFAULT_READER, range_reader
from ..kafka.records import RecordBlock
from .range_rdd import RangeRDD, make_range_rdd
from .task_context import remember_current

__all__ = ["KafkaRDD", "KafkaRangeReader", "make_kafka_rdd"]

# {(KafkaRDD key, partition index): offsets skipped reading that partition}
_Skips = Dict[Tuple[int, int], int]


class _MaxPerPartition(AccumulatorParam[_Skips]):
    """Merges skip counts by maximum per (RDD, partition): a partition computed again (a second
    action, a recomputed stage) is counted once. Builds a new dict (the driver reads it while
    Spark's accumulator thread merges)."""

    def zero(self, value: _Skips) -> _Skips:
        return {}

    def addInPlace(self, value1: _Skips, value2: _Skips) -> _Skips:  # noqa: N802 - PySpark API name
        out = dict(value1)
        for k, n in value2.items():
            if n > out.get(k, 0):
                out[k] = n
        return out


_SKIPS: weakref.WeakKeyDictionary[SparkContext, Accumulator[_Skips]] = weakref.WeakKeyDictionary()
_SKIPS_LOCK = threading.Lock()
_RDD_KEYS = itertools.count()


def _skips_accumulator(sc: SparkContext) -> Accumulator[_Skips]:
    """One accumulator per SparkContext for every KafkaRDD's skips (entries appear only on data
    loss), not one per RDD: PySpark never forgets an accumulator, and a stream makes an RDD per batch."""
    with _SKIPS_LOCK:
        acc = _SKIPS.get(sc)
        if acc is None:
            acc = _SKIPS[sc] = sc.accumulator({}, _MaxPerPartition())
        return acc


class KafkaRDD(RangeRDD):
    """An RDD built from explicit offset ranges; partition ``i`` holds ``offsetRanges()[i]``.

    Narrow transformations (``map``, ``filter``, ``mapPartitions``…) are pipelined into the
    same Python task that reads Kafka, so records are not serialized between them.
    """

    _skips: Optional[Accumulator[_Skips]] = None
    _key: int = -1

    def offsetRanges(self) -> List[OffsetRange]:  # noqa: N802 - Spark API name
        """The ranges this RDD reads, in partition order (``HasOffsetRanges``)."""
        return [r for r in self._offset_ranges if isinstance(r, OffsetRange)]

    def data_loss_skipped(self) -> int:
        """Offsets of this RDD's ranges that were deleted before they were read and skipped
        (``failOnDataLoss=False``), counted on the driver.

        Valid after an action on this RDD (or on an RDD derived from it in the same stage) has
        completed; 0 before. Each partition counts once however often it is computed: a partition
        read again later counts what that read skipped if it skipped more (retention moved on).
        With ``failOnDataLoss=True`` nothing is skipped (the read raises ``DataLossError``).
        """
        if self._skips is None:
            return 0
        key = self._key
        return sum(n for (k, _), n in self._skips.value.items() if k == key)


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
    """Reads one :class:`OffsetRange` in a Spark task and decodes its records (``(key, value)`` or the
    message handler's result): the Kafka source's executor side. Pickled into each task.

    Each read records its range for :func:`~.task_context.current_offset_range`, passes the task's
    attempt number (a retry gets a fresh consumer) and, under ``fail_on_data_loss=False``, adds the
    offsets it had to skip to the driver-side count (:meth:`KafkaRDD.data_loss_skipped`) and reports
    each lost part to ``reporter`` (recorded beside the exactly-once commits).
    ``reader`` names the executor reader (checked on the driver, resolved in the task).
    """

    def __init__(self, config: KafkaConfig, *, key_decoder: Decoder = utf8_decoder,
                 value_decoder: Decoder = utf8_decoder,
                 message_handler: Optional[Callable[[KafkaMessageAndMetadata], Any]] = None,
                 poll_timeout_ms: int = 120000, fail_on_data_loss: bool = True,
                 skips: Optional[Accumulator[_Skips]] = None, key: int = -1,
                 reader: str = DEFAULT_READER, reporter: Optional[LossCallback] = None) -> None:
        self.config = config
        self.reporter = reporter
        self.reader = reader
        self.decode = _Decoding(key_decoder, value_decoder, message_handler)
        self.poll_timeout_ms = poll_timeout_ms
        self.fail_on_data_loss = fail_on_data_loss
        self.skips = skips
        self.key = key
        self.indexes: Dict[str, int] = {}

    def read(self, r: SourceRange) -> Iterable[Any]:
        assert isinstance(r, OffsetRange), r
        attempt = remember_current(r)
        on_data_loss = None
        skips, reporter = self.skips, self.reporter
        if skips is not None or reporter is not None:
            entry = (self.key, self.indexes.get(r.position_key, -1))
            skipped = [0]

            def on_data_loss(loss: DataLoss) -> None:
                skipped[0] += loss.lost
                if skips is not None:
                    skips.add({entry: skipped[0]})
                if reporter is not None:
                    reporter(loss)

        read_range = range_reader(self.reader)
        return self.decode(read_range(self.config, r, poll_timeout_ms=self.poll_timeout_ms,
                                      fail_on_data_loss=self.fail_on_data_loss, metadata=self.decode.metadata,
                                      attempt=attempt, on_data_loss=on_data_loss))


def make_kafka_rdd(sc: SparkContext, config: KafkaConfig, ranges: Sequence[OffsetRange], *,
                   key_decoder: Decoder = utf8_decoder, value_decoder: Decoder = utf8_decoder,
                   message_handler: Optional[Callable[[KafkaMessageAndMetadata], Any]] = None,
                   poll_timeout_ms: int = 120000, fail_on_data_loss: bool = True,
                   reader: str = DEFAULT_READER, reporter: Optional[LossCallback] = None) -> KafkaRDD:
    """Build the RDD of ``ranges`` (no Spark job runs here): a :class:`KafkaRangeReader` per task,
    reading with the executor reader named ``reader`` (already checked on the driver); lost offsets
    are reported to ``reporter`` under ``fail_on_data_loss=False``."""
    ranges = list(ranges)
    skips = None if fail_on_data_loss else _skips_accumulator(sc)
    task_reader = KafkaRangeReader(config, key_decoder=key_decoder, value_decoder=value_decoder,
                              message_handler=message_handler, poll_timeout_ms=poll_timeout_ms,
                              fail_on_data_loss=fail_on_data_loss, skips=skips, key=next(_RDD_KEYS),
                              reader=reader, reporter=None if fail_on_data_loss else reporter)
    task_reader.indexes = {r.position_key: i for i, r in enumerate(ranges)}
    rdd = make_range_rdd(sc, ranges, task_reader, KafkaRDD)
    rdd._skips, rdd._key = skips, task_reader.key
    return rdd
