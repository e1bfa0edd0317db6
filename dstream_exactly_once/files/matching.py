"""Identity matching of the file planner: which scanned file holds the bytes of a tracked identity.

:class:`Track` is one identity as the planner follows it, :class:`Scan` one batch's view of the files
(content sizes and hashes read at most once per batch). :func:`verify` tells whether a file still
holds an identity's bytes up to its position; :func:`still_copy`, :func:`copy_of` and
:func:`repeats` tell a copy (logrotate's ``copytruncate``, maybe still being written in small pieces)
from a file that merely starts with the same bytes. The decisions taken on these answers are the
planner's (:mod:`.planner`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Tuple

from ..core.ranges import Position
from ..errors import ConfigurationError
from .identity import FileStat, FileView
from .ranges import FILE_KEY_PREFIX, FileRange

__all__ = ["HEAD", "Node", "Scan", "Track", "copy_of", "repeats", "still_copy", "verify"]

Node = Tuple[int, int]

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
    """One batch's view of the files: stats, lazily opened views and cached content sizes/hashes."""

    def __init__(self, stats: List[FileStat]) -> None:
        self.stats = stats
        self.by_node: Dict[Node, FileStat] = {st.node: st for st in stats}
        self._views: Dict[Node, FileView] = {}
        self._sizes: Dict[Node, Optional[int]] = {}
        self._hashes: Dict[Tuple[Node, int, int], Optional[str]] = {}
        self._heads: Dict[Node, bytes] = {}

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
        if st.node not in self._heads:
            self._heads[st.node] = self.view(st).read(0, min(HEAD, self.size(st) or 0))
        return self._heads[st.node]

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


def copy_of(tracks: Mapping[str, Track], st: FileStat, scan: Scan, located: Mapping[str, FileStat],
            sample: int) -> Optional[Track]:
    """The located identity ``st`` is a copy of so far (:func:`still_copy`), if any: every identity
    whose file it could be copied from is compared, so files that merely share their first bytes
    (identical headers) never take each other's copies."""
    for key, loc in sorted(located.items()):
        t = tracks[key]
        if loc.node != st.node and still_copy(t, st, scan, located, sample):
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
