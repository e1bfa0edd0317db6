"""KafkaRDD: one Spark partition per :class:`OffsetRange`, read by kafka-python on executors.

Unit of parallelism: one task per offset range (one topic partition's slice of the batch).
Delivery: the RDD is a deterministic function of its ranges — recomputing a partition (task
retry, replayed batch) yields the same records, which is what exactly-once output builds on.
"""

from __future__ import annotations

from itertools import chain
from typing import Any, Callable, Iterable, Iterator, List, Optional, Sequence, Tuple

from pyspark import RDD, SparkContext
from pyspark.rdd import PipelinedRDD

from ..errors import DecodeError
from ..kafka.params import KafkaConfig
from ..kafka.reader import RecordBlock, read_range
from ..offsets import KafkaMessageAndMetadata, OffsetRange, utf8_decoder

__all__ = ["KafkaRDD", "make_kafka_rdd"]

Decoder = Callable[[Optional[bytes]], Any]


class KafkaRDD(PipelinedRDD):
    """An RDD built from explicit offset ranges; partition ``i`` holds ``offsetRanges()[i]``.

    Narrow transformations (``map``, ``filter``, ``mapPartitions``…) are pipelined into the
    same Python task that reads Kafka, so records are not serialized between them.
    """

    def __init__(self, prev: RDD, func: Callable[[int, Iterable[Any]], Iterable[Any]],
                 offset_ranges: Sequence[OffsetRange]) -> None:
        super().__init__(prev, func, preservesPartitioning=False)
        self._offset_ranges = list(offset_ranges)

    def offsetRanges(self) -> List[OffsetRange]:  # noqa: N802 - Spark API name
        """The ranges this RDD reads, in partition order (``HasOffsetRanges``)."""
        return list(self._offset_ranges)


class _Decoding:
    """Applies decoders / the message handler to the reader's record blocks; decoder failures name the record.

    Without a message handler a block's keys and values are decoded list by list (the default UTF-8
    decoder without a Python call per record) and zipped into ``(key, value)`` tuples; if a decoder
    fails, the block is decoded again record by record, so the error names the first bad record and
    the records before it are still yielded first, as a per-record loop would.
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
        topic, partition = block.topic, block.partition
        for offset, key, value, timestamp, timestamp_type, headers in zip(
                block.offsets, block.keys, block.values, block.timestamps, block.timestamp_types, block.headers,
                strict=True):
            m = KafkaMessageAndMetadata(topic, partition, offset, key, value, timestamp, timestamp_type,
                                        [tuple(h) for h in (headers or ())], _checked(kd, topic, partition, offset),
                                        _checked(vd, topic, partition, offset))
            yield handler(m)


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


def _checked(decoder: Decoder, topic: str, partition: int, offset: int) -> Decoder:
    if decoder is utf8_decoder:
        def fast(raw: Optional[bytes]) -> Any:
            try:
                return None if raw is None else raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DecodeError(f"cannot decode the record at {topic}-{partition} offset {offset}: {exc}") from exc
        return fast

    def wrapped(raw: Optional[bytes]) -> Any:
        try:
            return decoder(raw)
        except Exception as exc:  # noqa: BLE001 - re-raised with the record's coordinates
            raise DecodeError(f"cannot decode the record at {topic}-{partition} offset {offset}: "
                              f"{type(exc).__name__}: {exc}") from exc
    return wrapped


def make_kafka_rdd(sc: SparkContext, config: KafkaConfig, ranges: Sequence[OffsetRange], *,
                   key_decoder: Decoder = utf8_decoder, value_decoder: Decoder = utf8_decoder,
                   message_handler: Optional[Callable[[KafkaMessageAndMetadata], Any]] = None,
                   poll_timeout_ms: int = 120000, fail_on_data_loss: bool = True) -> KafkaRDD:
    """Build the RDD of ``ranges`` (no Spark job runs here)."""
    ranges = list(ranges)
    decode = _Decoding(key_decoder, value_decoder, message_handler)

    def read_partition(index: int, _ignored: Iterable[Any]) -> Iterable[Any]:
        if index >= len(ranges):
            return iter(())
        return decode(read_range(config, ranges[index], poll_timeout_ms=poll_timeout_ms,
                                 fail_on_data_loss=fail_on_data_loss, metadata=decode.metadata))

    base = sc.parallelize(range(max(len(ranges), 1)), max(len(ranges), 1))
    return KafkaRDD(base, read_partition, ranges)
