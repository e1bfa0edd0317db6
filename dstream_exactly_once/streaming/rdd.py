"""KafkaRDD: one Spark partition per :class:`OffsetRange`, read by kafka-python on executors.

Unit of parallelism: one task per offset range (one topic partition's slice of the batch).
Delivery: the RDD is a deterministic function of its ranges — recomputing a partition (task
retry, replayed batch) yields the same records, which is what exactly-once output builds on.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, List, Optional, Sequence

from pyspark import RDD, SparkContext
from pyspark.rdd import PipelinedRDD

from ..errors import DecodeError
from ..kafka.params import KafkaConfig
from ..kafka.reader import read_range
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
    """Applies decoders / the message handler; decoder failures name the record."""

    def __init__(self, key_decoder: Decoder, value_decoder: Decoder,
                 message_handler: Optional[Callable[[KafkaMessageAndMetadata], Any]]) -> None:
        self.key_decoder = key_decoder
        self.value_decoder = value_decoder
        self.message_handler = message_handler

    def __call__(self, records: Iterable[Any]) -> Iterator[Any]:
        kd, vd, handler = self.key_decoder, self.value_decoder, self.message_handler
        if handler is None:
            for rec in records:
                try:
                    yield (kd(rec.key), vd(rec.value))
                except Exception as exc:  # noqa: BLE001 - re-raised with the record's coordinates
                    raise DecodeError(f"cannot decode the record at {rec.topic}-{rec.partition} offset "
                                      f"{rec.offset}: {type(exc).__name__}: {exc}") from exc
            return
        for rec in records:
            m = KafkaMessageAndMetadata(rec.topic, rec.partition, rec.offset, rec.key, rec.value,
                                        rec.timestamp, rec.timestamp_type,
                                        [tuple(h) for h in (rec.headers or ())], _checked(kd, rec),
                                        _checked(vd, rec))
            yield handler(m)


def _checked(decoder: Decoder, rec: Any) -> Decoder:
    if decoder is utf8_decoder:
        def fast(raw: Optional[bytes]) -> Any:
            try:
                return None if raw is None else raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DecodeError(f"cannot decode the record at {rec.topic}-{rec.partition} offset "
                                  f"{rec.offset}: {exc}") from exc
        return fast

    def wrapped(raw: Optional[bytes]) -> Any:
        try:
            return decoder(raw)
        except Exception as exc:  # noqa: BLE001 - re-raised with the record's coordinates
            raise DecodeError(f"cannot decode the record at {rec.topic}-{rec.partition} offset {rec.offset}: "
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
                                 fail_on_data_loss=fail_on_data_loss))

    base = sc.parallelize(range(max(len(ranges), 1)), max(len(ranges), 1))
    return KafkaRDD(base, read_partition, ranges)
