"""Identity matching of the file planner: which scanned file holds the bytes of a tracked identity.

:class:`Track` is one identity as the planner follows it, :class:`Scan` one batch's view of the files
(content sizes and hashes read at most once per batch). :func:`verify` tells whether a file still
holds an identity's bytes up to its position; :func:`still_copy`, :func:`copy_of` and
:func:`repeats` tell a copy (logrotate's ``copytruncate``, maybe still being written in small pieces)
from a file that merely starts with the same bytes. The decisions taken on these answers are the
planner's (:mod:`._planner`).

Work per batch follows what changed: a tracked file whose look is vouched for since its identity was
last checked (:func:`~._identity.unchanged_since`, :attr:`Track.seen`) is ``same`` without being
opened, and the first bytes of unchanged files are kept across batches (:class:`Scan`'s ``heads``), so
finding which tracked file a new file may copy (:class:`LocatedHeads`) reads only the files that changed.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from dataclasses import dataclass, field
from typing import Dict, Generic, List, Mapping, Optional, Sequence, Tuple, TypeVar

from ..core._ranges import Position
from ..errors import ConfigurationError
from ._identity import FileStat, FileView, unchanged_since
from ._ranges import FILE_KEY_PREFIX, FileRange

__all__ = ["HEAD", "HeadIndex", "LocatedHeads", "Node", "Scan", "Track", "copy_of", "repeats", "still_copy",
           "verify"]

Node = Tuple[int, int]
T = TypeVar("T")

#: Bytes of a file's start compared first when looking for the file a new file copies.
HEAD = 64


@dataclass
class Track:
    """One file identity as the planner follows it (the mutable twin of a range's identity document)."""

    key: str
    path: str
    dev: int
    inode: int
    fingerprint: str
    sample_length: int
    offset: int
    tail: str = ""
    tail_length: int = 0
    compressed: bool = False
    aliases: Dict[Node, int] = field(default_factory=dict)  # copies of this file: node -> size
    supersedes: Optional[str] = None
    host: Optional[str] = None
    state: str = "active"  # active | gone | retired
    last_size: int = 0
    dirty: bool = True  # the identity document changed since the last planned range
    #: the look at the identity's file its fields were last checked against (never stored): while the
    #: file is unchanged since (:func:`~._identity.unchanged_since`) it still holds the identity's bytes
    seen: Optional[FileStat] = None

    def same_identity(self, other: Track) -> bool:
        """Whether ``other`` describes the same bytes of the same file (node, fingerprint, position, tail)."""
        return (self.node, self.fingerprint, self.sample_length, self.offset, self.tail, self.tail_length) == (
            other.node, other.fingerprint, other.sample_length, other.offset, other.tail, other.tail_length)

    @property
    def node(self) -> Node:
        return (self.dev, self.inode)

    @classmethod
    def from_position(cls, key: str, pos: Position) -> Track:
        meta = pos.meta
        if not isinstance(meta, dict):
            raise ConfigurationError(f"stored position {key!r} has no file identity document (got {meta!r}); "
                                     f"the store must keep the position meta written with file ranges")
        try:
            r = FileRange(key[len(FILE_KEY_PREFIX):], meta["path"], pos.offset, pos.offset,
                          meta["fingerprint"], meta["sample_length"], meta["tail"], meta["tail_length"],
                          meta["dev"], meta["inode"], meta.get("host"), bool(meta.get("compressed", False)),
                          tuple(tuple(a) for a in meta.get("aliases", ())), meta.get("supersedes"),
                          meta.get("seen_size", 0))
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigurationError(f"stored position {key!r} has a bad file identity document {meta!r} "
                                     f"({exc})") from None
        aliases = {(a[0], a[1]): a[2] for a in r.aliases}
        return cls(key, r.path, r.dev, r.inode, r.fingerprint, r.sample_length, pos.offset, r.tail,
                   r.tail_length, r.compressed, aliases, r.supersedes, r.host, "active",
                   max(pos.offset, r.seen_size), False)


class Scan:
    """One batch's view of the files: stats, lazily opened views and cached content sizes/hashes.

    ``heads``: the first bytes of files from earlier batches, ``{node: (look, bytes)}``, reused for a
    file unchanged since that look and updated here (entries of files not in this scan are dropped)."""

    def __init__(self, stats: List[FileStat], heads: Optional[Dict[Node, Tuple[FileStat, bytes]]] = None) -> None:
        self.stats = stats
        self.by_node: Dict[Node, FileStat] = {st.node: st for st in stats}
        self._views: Dict[Node, FileView] = {}
        self._sizes: Dict[Node, Optional[int]] = {}
        self._hashes: Dict[Tuple[Node, int, int], Optional[str]] = {}
        self._heads: Dict[Node, bytes] = {}
        self._kept = heads if heads is not None else {}
        for node in [n for n in self._kept if n not in self.by_node]:
            del self._kept[node]

    def view(self, st: FileStat) -> FileView:
        v = self._views.get(st.node)
        if v is None:
            v = self._views[st.node] = FileView(st)
        return v

    def size(self, st: FileStat) -> Optional[int]:
        if st.node not in self._sizes:
            self._sizes[st.node] = self.view(st).size
        return self._sizes[st.node]

    def hash(self, st: FileStat, start: int, n: int) -> Optional[str]:
        """Memoised :meth:`FileView.hash` (one read per file and range per batch)."""
        key = (st.node, start, n)
        if key not in self._hashes:
            self._hashes[key] = self.view(st).hash(start, n)
        return self._hashes[key]

    def head(self, st: FileStat) -> bytes:
        """The first :data:`HEAD` bytes of the content as scanned (fewer if shorter), memoised."""
        head = self._heads.get(st.node)
        if head is None:
            kept = self._kept.get(st.node)
            if kept is not None and unchanged_since(kept[0], st):
                head = kept[1]
            else:
                head = self.view(st).read(0, min(HEAD, self.size(st) or 0))
            self._heads[st.node] = head
            self._kept[st.node] = (st, head)
        return head

    def close(self) -> None:
        for v in self._views.values():
            v.close()


def verify(t: Track, scan: Scan, st: FileStat) -> str:
    """``same`` (this file holds the identity's bytes up to its offset), ``truncated`` (same first
    bytes, shorter than the offset) or ``replaced``."""
    size = scan.size(st)
    if size is None:
        return "replaced"
    if t.sample_length and scan.hash(st, 0, t.sample_length) != t.fingerprint:
        return "replaced"
    if size < t.offset:
        return "truncated"
    if t.tail_length and scan.hash(st, t.offset - t.tail_length, t.tail_length) != t.tail:
        return "replaced"
    return "same"


class HeadIndex(Generic[T]):
    """Items by the first bytes of a file (:meth:`Scan.head`), kept sorted: :meth:`starting` finds the
    items whose bytes start with a prefix by bisection, in the order they were added."""

    def __init__(self, pairs: Sequence[Tuple[bytes, T]] = ()) -> None:
        """``pairs``: ``(head, item)`` in the order of :meth:`starting`'s answers."""
        self._entries: List[Tuple[bytes, int]] = sorted((head, i) for i, (head, _) in enumerate(pairs))
        self._items: List[T] = [item for _, item in pairs]

    def add(self, head: bytes, item: T) -> None:
        insort(self._entries, (head, len(self._items)))
        self._items.append(item)

    def starting(self, prefix: bytes) -> List[T]:
        """The items whose head starts with ``prefix`` (every item for ``b""``), in the order added."""
        found, entries = [], self._entries
        i = bisect_left(entries, (prefix, -1))
        while i < len(entries) and entries[i][0].startswith(prefix):
            found.append(entries[i][1])
            i += 1
        return [self._items[n] for n in sorted(found)]


class LocatedHeads:
    """The located identities' keys by the first bytes (:meth:`Scan.head`) of their files, for
    :func:`copy_of`, kept across batches: :meth:`update` reads the first bytes only of files whose look
    changed (the same look object means an unchanged file, see :mod:`._paths`) and moves only their
    entries."""

    def __init__(self) -> None:
        self._entries: List[Tuple[bytes, str]] = []  # sorted
        self._of: Dict[str, Tuple[FileStat, bytes]] = {}  # key -> (the look indexed, its first bytes)

    def update(self, scan: Scan, located: Mapping[str, FileStat]) -> None:
        """Index exactly the keys of ``located``, each by its file's first bytes in ``scan``."""
        of = self._of
        for key in [k for k in of if k not in located]:
            self._remove(key, of.pop(key)[1])
        for key, st in located.items():
            indexed = of.get(key)
            if indexed is not None and indexed[0] is st:
                continue
            head = scan.head(st)
            of[key] = (st, head)
            if indexed is not None:
                if indexed[1] == head:
                    continue
                self._remove(key, indexed[1])
            insort(self._entries, (head, key))

    def _remove(self, key: str, head: bytes) -> None:
        i = bisect_left(self._entries, (head, key))
        if i < len(self._entries) and self._entries[i] == (head, key):
            del self._entries[i]

    def starting(self, prefix: bytes) -> List[str]:
        """The keys whose file starts with ``prefix`` (every key for ``b""``), sorted."""
        found, entries = [], self._entries
        i = bisect_left(entries, (prefix, ""))
        while i < len(entries) and entries[i][0].startswith(prefix):
            found.append(entries[i][1])
            i += 1
        return sorted(found)


def copy_of(tracks: Mapping[str, Track], st: FileStat, scan: Scan, located: Mapping[str, FileStat],
            sample: int, heads: Optional[LocatedHeads] = None) -> Optional[Track]:
    """The located identity ``st`` is a copy of so far (:func:`still_copy`), if any, the first by key:
    every identity whose file it could be copied from is compared, so files that merely share their
    first bytes (identical headers) never take each other's copies. ``heads`` (updated to ``located``)
    narrows the comparison to the files whose first bytes are ``st``'s (a copy's first
    ``min(size, sample)`` bytes are its original's)."""
    size = scan.size(st)
    if heads is None:
        keys = sorted(located)
    elif not size or sample <= 0:
        return None  # still_copy is false for an empty file, repeats for no sample
    else:
        keys = heads.starting(scan.head(st)[:min(size, sample)])
    for key in keys:
        t = tracks[key]
        if located[key].node != st.node and still_copy(t, st, scan, located, sample):
            return t
    return None


def still_copy(t: Track, st: FileStat, scan: Scan, located: Mapping[str, FileStat], sample: int) -> bool:
    """Whether ``st`` still holds only bytes of identity ``t``: while ``t``'s own file is here to compare,
    ``st`` is no longer than it and has the same first and last ``min(size, sample)`` bytes (a copy
    still shorter than the sample — written in small pieces — is compared with as many bytes of
    the file); otherwise ``st`` is a recorded copy of unchanged size."""
    size = scan.size(st)
    loc = located.get(t.key)
    if loc is None:  # the identity's file is gone: only a recorded, unchanged copy is recognised
        head = min(t.sample_length, size or 0)
        return (t.aliases.get(st.node) == size and head > 0
                and (head < t.sample_length or scan.hash(st, 0, head) == t.fingerprint))
    if not t.sample_length or not size:
        return False
    if size >= t.sample_length and scan.hash(st, 0, t.sample_length) != t.fingerprint:
        return False  # decided without reading the identity's file
    return repeats(st, loc, scan, sample)


def repeats(st: FileStat, original: FileStat, scan: Scan, sample: int) -> bool:
    """Whether ``st`` holds ``original``'s first bytes so far (a copy, maybe still being written): it
    is not empty, no longer (a copy of a growing file never is), and its first and last
    ``min(size, sample)`` bytes (``sample``: ``md5.sample.length``) are the original's at the same
    offsets."""
    size, original_size = scan.size(st), scan.size(original)
    n = min(size or 0, sample)
    if not n or size is None or original_size is None or size > original_size:
        return False
    return (scan.hash(st, 0, n) == scan.hash(original, 0, n)
            and scan.hash(st, size - n, n) == scan.hash(original, size - n, n))
