"""``FileRange``: bytes ``[from_byte, until_byte)`` of one identified file (range kind ``"file"``).

A file's stream partition is its *identity* (``position_key`` ``"file:<file_id>"``), not its path:
a renamed file keeps its key, a replaced or truncated one gets a new key (a new generation),
because a stored position never moves backwards under the store's compare-and-set. The range also
carries what the executor needs to check it reads the planned file, and what the planner needs
after a restart to recognise it again: :meth:`FileRange.position_meta` is stored beside
``until_byte`` in the commit transaction.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, fields
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from .._checks import is_int
from ..core._ranges import SourceRange, register_range_kind
from ..errors import OffsetRangeError

__all__ = ["FILE_KEY_PREFIX", "FileRange"]

#: Position keys of file ranges start with this.
FILE_KEY_PREFIX = "file:"

#: Version of the identity document (:meth:`FileRange.position_meta`).
META_VERSION = 1


def _int(name: str, v: object, low: int) -> int:
    if not is_int(v) or v < low:
        raise OffsetRangeError(f"FileRange {name} must be an int >= {low}, got {v!r}")
    return v


@register_range_kind
@dataclass(frozen=True)
class FileRange(SourceRange):
    """Bytes ``[from_byte, until_byte)`` of the file identified as ``file_id``: what one RDD partition reads.

    ``until_byte`` is the next byte to read once the range is consumed; ranges start and end on line
    boundaries (after a ``\\n``), except where a line longer than ``line.max.bytes`` is split. Read it
    like an ``OffsetRange``: :attr:`path`, :attr:`fromOffset`, :attr:`untilOffset`, :meth:`count`.

    Identity fields (written beside the position, checked by the executor):

    - ``fingerprint``: BLAKE2b-128 hex of the file's first ``sample_length`` bytes (``""``/0 when
      fingerprints are off); for ``compressed`` files, of the decompressed stream.
    - ``tail``: hash of the ``tail_length`` bytes just before ``until_byte`` — together with the
      fingerprint it tells a copy of this file (``copytruncate``) from another file that merely
      starts with the same bytes.
    - ``dev``/``inode``: where the file was when planned (a hint: inodes are reused).
    - ``host``: the host whose local file this is (``None``: local mode or a shared filesystem).
    - ``aliases``: ``(dev, inode, size)`` of files known to be copies of this one (nothing is read
      from them; a copy never changes, so a different size means another file).
    - ``supersedes``: the position key of the earlier generation this one replaces after a truncation.
    - ``seen_size``: the file's content size when the range was planned (0: not known); bytes in
      ``[until_byte, seen_size)`` existed then, so a restarted planner that finds the file gone
      reports them as lost.
    """

    kind = "file"
    position_unit = "byte"
    start_name = "from byte"
    end_name = "until byte"

    file_id: str
    path: str
    from_byte: int
    until_byte: int
    fingerprint: str = ""
    sample_length: int = 0
    tail: str = ""
    tail_length: int = 0
    dev: int = -1
    inode: int = -1
    host: Optional[str] = None
    compressed: bool = False
    aliases: Tuple[Tuple[int, int, int], ...] = ()
    supersedes: Optional[str] = None
    seen_size: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.file_id, str) or not self.file_id or "/" in self.file_id:
            raise OffsetRangeError(f"FileRange file_id must be a non-empty str without '/', got {self.file_id!r}")
        if not isinstance(self.path, str) or not self.path.startswith("/"):
            raise OffsetRangeError(f"FileRange path must be an absolute path, got {self.path!r}")
        _int("from_byte", self.from_byte, 0)
        _int("until_byte", self.until_byte, 0)
        if self.from_byte > self.until_byte:
            raise OffsetRangeError(f"FileRange from_byte {self.from_byte} > until_byte {self.until_byte} "
                                   f"for {self.path}")
        _int("sample_length", self.sample_length, 0)
        _int("tail_length", self.tail_length, 0)
        if self.tail_length > self.until_byte:
            raise OffsetRangeError(f"FileRange tail_length {self.tail_length} > until_byte {self.until_byte}")
        for name in ("fingerprint", "tail"):
            if not isinstance(getattr(self, name), str):
                raise OffsetRangeError(f"FileRange {name} must be a hex str, got {getattr(self, name)!r}")
        _int("seen_size", self.seen_size, 0)
        _int("dev", self.dev, -1)
        _int("inode", self.inode, -1)
        if self.host is not None and (not isinstance(self.host, str) or not self.host):
            raise OffsetRangeError(f"FileRange host must be None or a non-empty str, got {self.host!r}")
        if self.supersedes is not None and not str(self.supersedes).startswith(FILE_KEY_PREFIX):
            raise OffsetRangeError(f"FileRange supersedes must be a file position key, got {self.supersedes!r}")
        aliases = tuple(tuple(a) for a in self.aliases)
        if not all(len(a) == 3 and all(isinstance(x, int) for x in a) for a in aliases):
            raise OffsetRangeError(f"FileRange aliases must be (dev, inode, size) int triples, got {self.aliases!r}")
        object.__setattr__(self, "aliases", tuple(sorted(aliases)))  # type: ignore[arg-type]

    # ---------------------------------------------------------------- OffsetRange-like accessors
    @property
    def fromOffset(self) -> int:  # noqa: N802 - named like OffsetRange.fromOffset
        """The first byte of the range (``from_byte``)."""
        return self.from_byte

    @property
    def untilOffset(self) -> int:  # noqa: N802 - named like OffsetRange.untilOffset
        """The byte after the range (``until_byte``): the next byte to read once it is consumed."""
        return self.until_byte

    # ---------------------------------------------------------------- SourceRange
    @property
    def position_key(self) -> str:
        return FILE_KEY_PREFIX + self.file_id

    @property
    def start(self) -> int:
        return self.from_byte

    @property
    def end(self) -> int:
        return self.until_byte

    def position_meta(self) -> Dict[str, Any]:
        """The identity document stored beside ``until_byte``: what a restarted planner needs to find
        this file again (fingerprint, tail hash at ``until_byte``, path, dev/inode, copies, lineage) and
        how big it was then."""
        return {
            "v": META_VERSION,
            "path": self.path,
            "dev": self.dev,
            "inode": self.inode,
            "fingerprint": self.fingerprint,
            "sample_length": self.sample_length,
            "tail": self.tail,
            "tail_length": self.tail_length,
            "compressed": self.compressed,
            "aliases": [list(a) for a in self.aliases],
            "supersedes": self.supersedes,
            "host": self.host,
            "seen_size": self.seen_size,
        }

    def to_json_obj(self) -> Dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["aliases"] = [list(a) for a in self.aliases]
        return out

    @classmethod
    def from_json_obj(cls, obj: Any) -> FileRange:
        if not isinstance(obj, dict):
            raise OffsetRangeError(f"a file range must be encoded as a JSON object, got {obj!r}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(obj) - known)
        if unknown:
            raise OffsetRangeError(f"unknown fields {unknown} in a file range {obj!r}")
        body = dict(obj)
        body["aliases"] = tuple(tuple(a) for a in body.get("aliases", ()))
        try:
            return cls(**body)
        except TypeError as exc:
            raise OffsetRangeError(f"cannot decode a file range from {obj!r}: {exc}") from None

    @classmethod
    def encode_many(cls, ranges: Sequence[SourceRange]) -> Dict[str, Any]:
        """Columns: ``{"n": count, field: [value of each range], …}`` for every field, leaving out the
        columns in which every range holds the field's default (no fingerprints, no host, …)."""
        out: Dict[str, Any] = {"n": len(ranges)}
        for name in _FIELDS:
            column = [getattr(r, name) for r in ranges]
            if name in _DEFAULTS and all(v == _DEFAULTS[name] for v in column):
                continue
            out[name] = [[list(a) for a in v] for v in column] if name == "aliases" else column
        return out

    @classmethod
    def decode_many(cls, obj: Any) -> List[SourceRange]:
        n = obj.get("n") if isinstance(obj, dict) else None
        if not is_int(n) or n < 0 or set(obj) - {"n", *_FIELDS}:
            raise OffsetRangeError(f"file ranges in the offset log must be {{'n': count, field: column, …}} with "
                                   f"fields of {_FIELDS}, got {obj!r:.200}")
        columns = {name: obj[name] for name in _FIELDS if name in obj}
        if any(not isinstance(c, list) or len(c) != n for c in columns.values()):
            raise OffsetRangeError(f"every column of file ranges in the offset log must hold {n} values, got "
                                   f"{obj!r:.200}")
        return [cls.from_json_obj({name: column[i] for name, column in columns.items()}) for i in range(n)]

    def describe(self) -> str:
        return f"{self.path} ({self.position_key}) [{self.from_byte} -> {self.until_byte})"

    @classmethod
    def reanchor_position(cls, key: str, document: Optional[Mapping[str, Any]], new: int) -> Dict[str, Any]:
        """The identity document at byte ``new``: the tail hash re-taken there, after checking that the
        file at the document's path (read on this host) still starts with this identity's bytes."""
        from ._identity import reanchor_document

        return reanchor_document(key, document, new)

    @classmethod
    def parse_position_key(cls, key: str) -> Optional[str]:
        """The file id a ``"file:<id>"`` position key names (else ``None``)."""
        if key.startswith(FILE_KEY_PREFIX) and len(key) > len(FILE_KEY_PREFIX) and "/" not in key:
            return key[len(FILE_KEY_PREFIX):]
        return None

    def __str__(self) -> str:
        return f"FileRange(path: '{self.path}', id: {self.file_id}, range: [{self.from_byte} -> {self.until_byte}])"


_FIELDS = tuple(f.name for f in fields(FileRange))
#: The fields with a default, and the default (a column holding only it is left out of the log).
_DEFAULTS = {f.name: f.default for f in fields(FileRange) if f.default is not MISSING}
