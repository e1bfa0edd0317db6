"""Source ranges: what one RDD partition reads, whatever the source.

A batch is a list of ranges of one source. Every range names a *stream partition* by a string
``position_key`` (Kafka: ``"topic/partition"``; files: ``"file:<id>"``) and covers the half-open
interval ``[start, end)`` of that partition's positions (Kafka offsets, file bytes). A stored
position is always *the next position to read*, so committing a range stores ``end``.

The store's compare-and-set works on these three values only: stored position
absent or ``== start`` → apply; ``== end`` → already committed (idempotent replay); anything else →
refuse. A source may attach a small JSON document to a position (:meth:`SourceRange.position_meta`,
e.g. a file's fingerprint and path); it is written beside ``end`` in the same transaction.

Range types are registered by *kind* (:func:`register_range_kind`) so the offset log can decode
them without importing their source: each source's range module registers its type when imported
(importing the source's package is enough). What the core needs to know about a kind is carried by
its class: whether ``end - start`` counts records (:attr:`SourceRange.counts_records`), whether it is
the kind stored as bare JSON lists (:attr:`SourceRange.legacy_list_encoding`), how a batch's ranges are
stored together in the offset log (:meth:`SourceRange.encode_many`, :meth:`SourceRange.decode_many`),
and the document a position reset by an operator keeps (:meth:`SourceRange.reanchor_position`); the
whole contract is listed in :mod:`._source`. How progress records and the CLI show a kind's positions
is its display (:mod:`._range_display`), and where its live log starts and ends is asked of the source
through :mod:`._live_log`: both are registered per kind by the source's package.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Type

from ..errors import ConfigurationError

__all__ = [
    "Position",
    "SourceRange",
    "check_ranges",
    "decode_range",
    "decode_ranges",
    "encode_range",
    "encode_ranges",
    "legacy_range_type",
    "range_kind",
    "range_kind_of_key",
    "register_range_kind",
]


class Position(NamedTuple):
    """A stored position: the next position to read, and the source's document kept beside it."""

    offset: int
    meta: Optional[Dict[str, Any]] = None


class SourceRange(ABC):
    """The part of a source one RDD partition reads: positions ``[start, end)`` of one stream partition.

    Implementations are small frozen values (hashable, comparable for equality, picklable).
    """

    #: The registry name of this range type (``"kafka"``, ``"file"``).
    kind: ClassVar[str] = ""

    #: Whether ``end - start`` counts the records a range yields (as an upper bound: Kafka offsets);
    #: ``False`` when positions are not records (file bytes), so progress reports no row count.
    counts_records: ClassVar[bool] = False

    #: Whether ranges of this kind are stored in the offset log as bare JSON lists (the encoding of
    #: offset logs written before ranges carried a kind); at most one registered kind may say so.
    legacy_list_encoding: ClassVar[bool] = False

    #: What a position counts, in messages: ``"offset"``, ``"byte"``.
    position_unit: ClassVar[str] = "position"

    #: How messages name ``start`` and ``end`` (Kafka: ``fromOffset``/``untilOffset``).
    start_name: ClassVar[str] = "start"
    end_name: ClassVar[str] = "end"

    @property
    @abstractmethod
    def position_key(self) -> str:
        """The stream partition this range belongs to, as the store names it."""

    @property
    @abstractmethod
    def start(self) -> int:
        """The first position of the range (inclusive)."""

    @property
    @abstractmethod
    def end(self) -> int:
        """The position after the range: what is stored once the range is committed."""

    def count(self) -> int:
        """``end - start``: an upper bound of what the range yields (records, bytes)."""
        return self.end - self.start

    def position_meta(self) -> Optional[Dict[str, Any]]:
        """A JSON document stored beside ``end`` when the range commits (``None``: nothing)."""
        return None

    @abstractmethod
    def to_json_obj(self) -> Any:
        """This range as JSON-compatible data; :meth:`from_json_obj` reads it back."""

    @classmethod
    @abstractmethod
    def from_json_obj(cls, obj: Any) -> SourceRange:
        """The range encoded by :meth:`to_json_obj`."""

    @classmethod
    def encode_many(cls, ranges: Sequence[SourceRange]) -> Any:
        """``ranges`` (all of this kind, in batch order) as one JSON value: how the offset log keeps a
        batch's ranges; :meth:`decode_many` reads it back in the same order. The default is the list of
        :meth:`to_json_obj`; a kind whose batches hold many ranges stores them as columns (Kafka:
        partitions, ``fromOffset`` and ``untilOffset`` as integer arrays per topic)."""
        return [r.to_json_obj() for r in ranges]

    @classmethod
    def decode_many(cls, obj: Any) -> List[SourceRange]:
        """The ranges :meth:`encode_many` stored as ``obj``, in their order."""
        if not isinstance(obj, list):
            raise ConfigurationError(f"cannot decode {cls.kind!r} ranges from {obj!r:.200}: expected a JSON array")
        return [cls.from_json_obj(o) for o in obj]

    def describe(self) -> str:
        """How messages name this range."""
        return f"{self.position_key} [{self.start} -> {self.end})"

    @classmethod
    def parse_position_key(cls, key: str) -> Any:
        """The source's own name of the partition a position key of this kind denotes (Kafka: a
        ``TopicAndPartition``), or ``None`` if ``key`` is not one of this kind's keys."""
        return None

    @classmethod
    def reanchor_position(cls, key: str, document: Optional[Mapping[str, Any]], new: int) -> Optional[Dict[str, Any]]:
        """The document to store beside the position of ``key`` (a key of this kind) when an operator
        resets it to ``new``, from the ``document`` stored now and the live source as this host sees
        it; ``None``: the position keeps no document. A position that cannot be moved to ``new``
        raises :class:`~dstream_exactly_once.errors.ConfigurationError` naming ``key``."""
        return None


_KINDS: Dict[str, Type[SourceRange]] = {}


def register_range_kind(cls: Type[SourceRange]) -> Type[SourceRange]:
    """Register ``cls`` under ``cls.kind`` (usable as a class decorator); re-registering is a no-op."""
    kind = cls.kind
    if not isinstance(kind, str) or not kind:
        raise ConfigurationError(f"range type {cls.__name__} needs a non-empty str kind, got {kind!r}")
    known = _KINDS.get(kind)
    if known is not None and known is not cls and known.__qualname__ != cls.__qualname__:
        raise ConfigurationError(f"range kind {kind!r} is already registered by {known.__qualname__}")
    if cls.legacy_list_encoding:
        other = legacy_range_type()
        if other is not None and other.kind != kind:
            raise ConfigurationError(f"range kind {kind!r} claims the bare-list offset-log encoding, which "
                                     f"{other.kind!r} holds; only one kind may")
    _KINDS[kind] = cls
    return cls


def legacy_range_type() -> Optional[Type[SourceRange]]:
    """The registered range type stored as bare JSON lists (:attr:`SourceRange.legacy_list_encoding`)."""
    for cls in _KINDS.values():
        if cls.legacy_list_encoding:
            return cls
    return None


def range_kind_of_key(key: str) -> Optional[Type[SourceRange]]:
    """The registered range type whose :meth:`~SourceRange.parse_position_key` accepts ``key``."""
    for cls in _KINDS.values():
        if cls.parse_position_key(key) is not None:
            return cls
    return None


def range_kind(kind: str) -> Type[SourceRange]:
    """The range type registered as ``kind``."""
    cls = _KINDS.get(kind)
    if cls is None:
        raise ConfigurationError(f"unknown range kind {kind!r} in the offset log; known kinds: {sorted(_KINDS)} "
                                 f"(is the source's package installed and imported?)")
    return cls


def encode_range(r: SourceRange) -> Any:
    """``r`` as stored in the offset log: a kind-tagged object, or a bare list for legacy Kafka ranges."""
    obj = r.to_json_obj()
    if isinstance(obj, dict):
        return {"kind": r.kind, **obj}
    if not r.legacy_list_encoding:
        raise ConfigurationError(f"range kind {r.kind!r} must encode as a JSON object, got {obj!r}")
    return obj


def decode_range(obj: Any) -> SourceRange:
    """The range stored as ``obj`` by :func:`encode_range`."""
    if isinstance(obj, list):
        legacy = legacy_range_type()
        if legacy is None:
            raise ConfigurationError(f"the offset log holds a range stored as a bare list {obj!r}, and no "
                                     f"registered range kind reads that encoding (is the source's package "
                                     f"installed and imported?); known kinds: {sorted(_KINDS)}")
        return legacy.from_json_obj(obj)
    if isinstance(obj, dict) and isinstance(obj.get("kind"), str):
        body = {k: v for k, v in obj.items() if k != "kind"}
        return range_kind(obj["kind"]).from_json_obj(body)
    raise ConfigurationError(f"cannot decode an offset-log range from {obj!r}")


#: The key of a batch's ranges under their kind in :func:`encode_ranges`' object.
_MANY = "many"


def encode_ranges(ranges: Sequence[SourceRange]) -> Any:
    """A batch's ranges (one kind) as the offset log stores them: ``{"kind": k, "many": …}`` with the
    kind's :meth:`~SourceRange.encode_many`; ``[]`` for no ranges."""
    if not ranges:
        return []
    cls = type(ranges[0])
    if len(set(map(type, ranges))) != 1:
        raise ConfigurationError(f"the ranges of one offset-log entry must be of one kind, got "
                                 f"{sorted({r.kind for r in ranges})}")
    return {"kind": cls.kind, _MANY: cls.encode_many(ranges)}


def decode_ranges(obj: Any) -> Tuple[SourceRange, ...]:
    """The ranges stored as ``obj``: :func:`encode_ranges`' object, or a JSON array of ranges each
    encoded by :func:`encode_range` (the per-range encoding of older offset-log entries)."""
    if isinstance(obj, list):
        return tuple(decode_range(r) for r in obj)
    if isinstance(obj, dict) and isinstance(obj.get("kind"), str) and _MANY in obj and len(obj) == 2:
        cls = range_kind(obj["kind"])
        out = tuple(cls.decode_many(obj[_MANY]))
        wrong = [r for r in out if not isinstance(r, cls)]
        if wrong:
            raise ConfigurationError(f"decode_many of range kind {cls.kind!r} returned {wrong[0]!r}, not a "
                                     f"{cls.__name__}")
        return out
    raise ConfigurationError(f"cannot decode offset-log ranges from {obj!r:.200}")


def check_ranges(ranges: Sequence[SourceRange], what: str, *, one_per_partition: bool = True) -> List[SourceRange]:
    """``ranges`` as a list, refusing non-ranges, mixed kinds and ranges that would read a record twice.

    With ``one_per_partition`` (a batch: the store keeps one position per partition) two ranges of
    one partition are refused whatever their offsets; without it (``createRDD``, as in Spark)
    disjoint ranges of a partition are fine and only duplicate or overlapping ones are refused.
    Either way the error names both ranges.
    """
    out = list(ranges)
    types = set(map(type, out))
    if len(types) == 1 and issubclass(next(iter(types)), SourceRange):  # one kind: only duplicates can be wrong
        keys = [r.position_key for r in out]
        if len(set(keys)) == len(keys):
            return out
    by_key: Dict[str, List[SourceRange]] = {}
    kinds = set()
    for r in out:
        if not isinstance(r, SourceRange):
            raise ConfigurationError(f"{what} must contain source ranges (e.g. OffsetRange), got {r!r}")
        kinds.add(r.kind)
        for other in by_key.get(r.position_key, ()):
            if one_per_partition:
                raise ConfigurationError(f"{what} hold two ranges of {r.position_key}: {other.describe()} and "
                                         f"{r.describe()}; each partition may appear once (merge them into one range)")
            if other == r or (r.start < other.end and other.start < r.end):
                raise ConfigurationError(f"{what} hold overlapping ranges of {r.position_key}: {other.describe()} and "
                                         f"{r.describe()}; the records they share would be read twice")
        by_key.setdefault(r.position_key, []).append(r)
    if len(kinds) > 1:
        raise ConfigurationError(f"{what} mix range kinds {sorted(kinds)}; a batch reads one source")
    return out
