"""Value types for positions in Kafka, with the names Spark 2.4's ``pyspark.streaming.kafka`` had.

An offset stored anywhere by this library is always *the next offset to read* (Kafka's
``position()`` meaning). An :class:`OffsetRange` is half-open: ``[fromOffset, untilOffset)``.
Offsets inside a range need not be contiguous: transaction markers, aborted records and compaction
leave gaps, so ``count()`` is an upper bound on the records a range yields, not an exact count.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import groupby
from operator import attrgetter, sub
from typing import Any, Callable, List, Optional, Protocol, Sequence, Tuple, runtime_checkable

from .._checks import is_int
from ..core._ranges import SourceRange, register_range_kind
from ..errors import DecodeError, OffsetRangeError

__all__ = [
    "Broker",
    "HasOffsetRanges",
    "KafkaMessageAndMetadata",
    "OffsetRange",
    "TopicAndPartition",
    "to_bytes",
    "utf8_decoder",
]

#: A key/value decoder: raw record bytes (``None`` for a null key or value) → anything.
Decoder = Callable[[Optional[bytes]], Any]


def utf8_decoder(s: Optional[bytes]) -> Optional[str]:
    """Decode UTF-8 bytes to ``str``; ``None`` (a null key or tombstone) stays ``None``.

    Bytes that are not UTF-8 raise :class:`~dstream_exactly_once.errors.DecodeError` (a
    ``ValueError``) naming the bad byte, chained to the ``UnicodeDecodeError``."""
    if s is None:
        return None
    try:
        return s.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DecodeError(f"not UTF-8: {exc}") from exc


def to_bytes(value: Any, *, stringify: bool = False) -> Optional[bytes]:
    """A record key/value for a producer: ``None`` and ``bytes`` as they are, ``str`` as UTF-8.

    Anything else raises ``TypeError`` naming its type, unless ``stringify`` (then ``str(value)``
    is encoded, e.g. ints in test data).
    """
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    if stringify:
        return str(value).encode("utf-8")
    raise TypeError(f"Kafka keys/values must be bytes, str or None, got {type(value).__name__}: {value!r:.80}")


def _check_topic(topic: object) -> str:
    if not isinstance(topic, str) or not topic:
        raise OffsetRangeError(f"topic must be a non-empty str, got {topic!r}")
    return topic


def _check_partition(partition: object) -> int:
    if not is_int(partition) or partition < 0:
        raise OffsetRangeError(f"partition must be an int >= 0, got {partition!r}")
    return partition


def _check_offset(name: str, offset: object) -> int:
    if not is_int(offset) or offset < 0:
        raise OffsetRangeError(f"{name} must be an int >= 0, got {offset!r}")
    return offset


@dataclass(frozen=True, order=True)
class TopicAndPartition:
    """A Kafka topic partition; hashable, usable as a dict key (as in Spark 2.4)."""

    topic: str
    partition: int

    def __post_init__(self) -> None:
        _check_topic(self.topic)
        _check_partition(self.partition)
        # planning looks each partition up several times per batch: hash once (never pickled, see __reduce__)
        object.__setattr__(self, "_hash", hash((self.topic, self.partition)))

    def __hash__(self) -> int:
        return self._hash  # type: ignore[no-any-return, attr-defined]

    def __reduce__(self) -> Tuple[Any, Tuple[str, int]]:
        """Pickled as ``(topic, partition)``: a str's hash differs between processes."""
        return (TopicAndPartition, (self.topic, self.partition))

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


_TOPIC, _PARTITION = attrgetter("topic"), attrgetter("partition")
_FROM, _UNTIL = attrgetter("fromOffset"), attrgetter("untilOffset")


@register_range_kind
@dataclass(frozen=True, order=True)
class OffsetRange(SourceRange):
    """Offsets ``[fromOffset, untilOffset)`` of one topic partition: what one RDD partition reads.

    ``fromOffset`` is the first offset to read (inclusive); ``untilOffset`` is exclusive and is the
    next offset to read once this range has been consumed. Equal ranges are equal and hash alike.
    As a :class:`~dstream_exactly_once.core._ranges.SourceRange` (kind ``"kafka"``) its position key
    is ``"topic/partition"`` and ``start``/``end`` are ``fromOffset``/``untilOffset``.
    """

    kind = "kafka"
    counts_records = True  # an upper bound: offsets may have gaps
    legacy_list_encoding = True  # offset logs hold Kafka ranges as [topic, partition, from, until]
    position_unit = "offset"
    start_name = "fromOffset"
    end_name = "untilOffset"

    topic: str
    partition: int
    fromOffset: int  # noqa: N815 - Spark 2.4 API name
    untilOffset: int  # noqa: N815 - Spark 2.4 API name

    def __post_init__(self) -> None:
        _check_topic(self.topic)
        _check_partition(self.partition)
        _check_offset("fromOffset", self.fromOffset)
        _check_offset("untilOffset", self.untilOffset)
        if self.fromOffset > self.untilOffset:
            raise OffsetRangeError(
                f"fromOffset {self.fromOffset} > untilOffset {self.untilOffset} "
                f"for {self.topic}-{self.partition}"
            )
        # the store key, asked for several times per range by every commit: made once (not a field,
        # so equality, ordering, hashing and repr are unchanged)
        object.__setattr__(self, "_position_key", f"{self.topic}/{self.partition}")

    @classmethod
    def create(
        cls, topic: str, partition: int, fromOffset: int, untilOffset: int  # noqa: N803
    ) -> OffsetRange:
        """Spark 0-10's ``OffsetRange.create``."""
        return cls(topic, partition, fromOffset, untilOffset)

    def topicPartition(self) -> TopicAndPartition:  # noqa: N802 - Spark API name
        """The :class:`TopicAndPartition` this range belongs to."""
        return TopicAndPartition(self.topic, self.partition)

    def count(self) -> int:
        """``untilOffset - fromOffset``: the most records this range can yield."""
        return self.untilOffset - self.fromOffset

    def toTuple(self) -> Tuple[str, int, int, int]:  # noqa: N802 - Spark API name
        """``(topic, partition, fromOffset, untilOffset)``; stable, JSON-friendly."""
        return (self.topic, self.partition, self.fromOffset, self.untilOffset)

    # ---------------------------------------------------------------- SourceRange
    # read by attrgetter (C) rather than a Python getter: a commit reads them once or twice per range
    #: the store key ``"topic/partition"`` (made in ``__post_init__``)
    position_key = property(attrgetter("_position_key"))  # type: ignore[assignment]
    #: ``fromOffset``
    start = property(attrgetter("fromOffset"))  # type: ignore[assignment]
    #: ``untilOffset``
    end = property(attrgetter("untilOffset"))  # type: ignore[assignment]

    def to_json_obj(self) -> Any:
        return list(self.toTuple())

    @classmethod
    def from_json_obj(cls, obj: Any) -> OffsetRange:
        topic, partition, from_offset, until_offset = obj
        return cls(topic, int(partition), int(from_offset), int(until_offset))

    @classmethod
    def encode_many(cls, ranges: Sequence[SourceRange]) -> List[List[Any]]:
        """Columns per run of consecutive ranges of one topic (one run per topic for a batch planned
        topic by topic): ``[[topic, partitions, fromOffsets, lengths], …]`` with ``lengths`` =
        ``untilOffset - fromOffset``, and ``partitions`` written ``{"first": p, "count": n}`` when they
        are ``p, p + 1, …, p + n - 1`` with ``n > 1`` (every partition of a topic, in order)."""
        topics: List[str] = list(map(_TOPIC, ranges))
        if topics.count(topics[0]) == len(topics):  # one topic: columns straight from the ranges
            groups: List[Tuple[str, Sequence[SourceRange]]] = [(topics[0], ranges)]
        else:
            groups = [(topic, list(run)) for topic, run in groupby(ranges, key=_TOPIC)]
        runs: List[List[Any]] = []
        for topic, run in groups:
            partitions: List[int] = list(map(_PARTITION, run))
            froms: List[int] = list(map(_FROM, run))
            first = partitions[0]
            runs.append([topic, {"first": first, "count": len(partitions)}
                         if len(partitions) > 1 and partitions == list(range(first, first + len(partitions)))
                         else partitions,
                         froms, list(map(sub, map(_UNTIL, run), froms))])
        return runs

    @classmethod
    def decode_many(cls, obj: Any) -> List[SourceRange]:
        out: List[SourceRange] = []
        if not isinstance(obj, list):
            raise OffsetRangeError(f"Kafka ranges in the offset log must be a list of topic runs, got {obj!r:.200}")
        for run in obj:
            parts = run[1] if isinstance(run, list) and len(run) == 4 else None
            if isinstance(parts, dict) and set(parts) == {"first", "count"} and all(map(is_int, parts.values())):
                parts = range(parts["first"], parts["first"] + parts["count"])
            if not (isinstance(parts, (list, range)) and isinstance(run[2], list) and isinstance(run[3], list)
                    and len(parts) == len(run[2]) == len(run[3]) and all(map(is_int, run[3]))):
                raise OffsetRangeError(f"a Kafka topic run in the offset log must be [topic, partitions, fromOffsets, "
                                       f"lengths] with columns of one length, got {run!r:.200}")
            topic = run[0]
            out.extend(cls(topic, p, f, f + n) for p, f, n in zip(parts, run[2], run[3], strict=True))
        return out

    def describe(self) -> str:
        return f"{self.topic}-{self.partition} [{self.fromOffset} -> {self.untilOffset})"

    @classmethod
    def parse_position_key(cls, key: str) -> Optional[TopicAndPartition]:
        """The :class:`TopicAndPartition` a ``"topic/partition"`` position key names (else ``None``)."""
        topic, sep, partition = key.rpartition("/")
        if not sep or not topic or ":" in topic or not partition.isdigit():
            return None
        return TopicAndPartition(topic, int(partition))

    def __str__(self) -> str:
        return (
            f"OffsetRange(topic: '{self.topic}', partition: {self.partition}, "
            f"range: [{self.fromOffset} -> {self.untilOffset}])"
        )


@dataclass(frozen=True)
class Broker:
    """A broker address, accepted for Spark 2.4's ``createRDD(leaders=...)`` compatibility.

    Leaders are looked up by kafka-python on every read, so the value is only validated.
    """

    host: str
    port: int

    def __post_init__(self) -> None:
        if not isinstance(self.host, str) or not self.host:
            raise OffsetRangeError(f"Broker host must be a non-empty str, got {self.host!r}")
        if not is_int(self.port) or not 0 < self.port < 65536:
            raise OffsetRangeError(f"Broker port must be an int in 1..65535, got {self.port!r}")



class KafkaMessageAndMetadata:
    """One Kafka record as handed to a ``messageHandler``.

    ``key`` and ``message`` apply the stream's decoders lazily to the raw bytes; pickling keeps
    the raw bytes, so records travel between processes undecoded. Beyond Spark 2.4 (Kafka 0.8):
    ``timestamp`` (ms), ``timestampType`` (0 create time, 1 log append time, -1 none) and
    ``headers`` (a list of ``(str, bytes)``). Two messages are equal when their coordinates, raw
    bytes, timestamps and headers are (decoders are not compared); messages are not hashable.
    """

    # A slots class (not a dataclass) because a stream builds one per record: the reader's own
    # subclasses (kafka/spark/_rdd.py) must construct cheaply.
    __slots__ = ("topic", "partition", "offset", "_rawKey", "_rawMessage", "timestamp", "timestampType", "headers",
                 "_keyDecoder", "_valueDecoder")
    __match_args__ = ("topic", "partition", "offset", "_rawKey", "_rawMessage", "timestamp", "timestampType", "headers",
                      "_keyDecoder", "_valueDecoder")
    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value (as the dataclass it was)

    def __init__(self, topic: str, partition: int, offset: int, _rawKey: Optional[bytes],  # noqa: N803
                 _rawMessage: Optional[bytes], timestamp: int = -1, timestampType: int = -1,  # noqa: N803
                 headers: Sequence[Tuple[str, Optional[bytes]]] = (), _keyDecoder: Decoder = utf8_decoder,  # noqa: N803
                 _valueDecoder: Decoder = utf8_decoder) -> None:  # noqa: N803
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self._rawKey = _rawKey
        self._rawMessage = _rawMessage
        self.timestamp = timestamp
        self.timestampType = timestampType
        self.headers = headers
        self._keyDecoder = _keyDecoder
        self._valueDecoder = _valueDecoder

    @property
    def key(self) -> Any:
        """The record key, decoded by the key decoder."""
        return self._keyDecoder(self._rawKey)

    @property
    def message(self) -> Any:
        """The record value, decoded by the value decoder."""
        return self._valueDecoder(self._rawMessage)

    def offsetRange(self) -> OffsetRange:  # noqa: N802
        """The single-record range ``[offset, offset + 1)``."""
        return OffsetRange(self.topic, self.partition, self.offset, self.offset + 1)

    def _fields(self) -> Tuple[Any, ...]:
        return (self.topic, self.partition, self.offset, self._rawKey, self._rawMessage, self.timestamp,
                self.timestampType, self.headers)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, KafkaMessageAndMetadata):
            return NotImplemented
        return self._fields() == other._fields()

    def __reduce__(self) -> Any:
        return (KafkaMessageAndMetadata, self._fields())

    def __repr__(self) -> str:
        return (f"KafkaMessageAndMetadata(topic={self.topic!r}, partition={self.partition!r}, offset={self.offset!r}, "
                f"timestamp={self.timestamp!r}, timestampType={self.timestampType!r}, headers={self.headers!r})")

    def __str__(self) -> str:
        return (
            f"KafkaMessageAndMetadata(topic: {self.topic}, partition: {self.partition}, "
            f"offset: {self.offset}, key and message...)"
        )


@runtime_checkable
class HasOffsetRanges(Protocol):
    """Anything that knows the offset ranges it was built from (a KafkaRDD, a batch RDD)."""

    def offsetRanges(self) -> list[OffsetRange]:  # noqa: N802 - Spark API name
        ...
