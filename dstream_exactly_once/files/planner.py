"""Driver-side planning of the append-only file source: which bytes of which file each batch reads.

Unit of parallelism: one file identity per range (one RDD partition). Guarantee: with an
exactly-once committer every complete line is delivered exactly once, across restarts and across
rotation by rename, copytruncate and delayed compression, as long as the rotated file stays named
by the pattern until it is read; when it does not, the loss is reported (warning + counters),
never silent. Without a committer, at-least-once.

Each batch scans the pattern once and decides, per tracked identity (its stored position, path,
device/inode, fingerprint of the first bytes and tail hash before the position — see
:mod:`.identity`):

=====================================================  ==========================================
what the scan shows                                    decision
=====================================================  ==========================================
a file no identity claims, first start                 ``starting.offsets``: byte 0, or after its
                                                       last complete line
a file no identity claims, later                       new identity, from byte 0
the identity's file (same dev/inode, fingerprint and   next range ``[offset, offset + bytes.max)``
tail match), possibly under a new name (rename)        cut after its last ``\\n``; a half-written
                                                       line waits; a longer line than
                                                       ``line.max.bytes`` is split (``line.overflow``)
same fingerprint, shorter than the offset, no copy     truncated: new generation key starting at
                                                       its length (a warning, ``truncations``)
fingerprint or tail changed, shorter than the sample   replaced: the file is a new identity from 0
                                                       (``replacements``; ``losses`` if unread bytes)
the identity's bytes are in another file (fingerprint  rotated by copy (copytruncate) or compressed:
and tail at the offset match, plain or gzip)           continue there; the truncated original is a
                                                       new identity from 0
a file whose bytes equal a tracked file's (a copy      not read while it stays equal (a copy in
made before truncation)                                progress); kept as an *alias*; read from 0
                                                       as a new identity once its bytes differ
the identity is nowhere                                stops being planned (``disappearances``;
                                                       ``losses``/``lost_bytes`` if unread bytes)
=====================================================  ==========================================

A position never moves backwards under the store's compare-and-set, so a truncated file continues
under a new key whose document names the key it ``supersedes``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from ..core.ranges import Position, SourceRange
from ..core.source import BatchSource, RangeReader
from ..errors import ConfigurationError, DataLossError, DecodeError
from .identity import FileStat, FileView, content_hash, utf8_cut
from .options import FILE_LOSS_OPTION, FileSourceOptions
from .paths import PathPattern
from .ranges import FILE_KEY_PREFIX, FileRange

log = logging.getLogger(__name__)

__all__ = ["COUNTERS", "FilePlanner"]

#: The event counters :attr:`FilePlanner.counters` reports.
COUNTERS = ("renames", "copies", "compressed", "truncations", "replacements", "disappearances", "losses",
            "lost_bytes")

Node = Tuple[int, int]


@dataclass
class _Track:
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
    def from_position(cls, key: str, pos: Position) -> _Track:
        meta = pos.meta
        if not isinstance(meta, dict):
            raise ConfigurationError(f"stored position {key!r} has no file identity document (got {meta!r}); "
                                     f"the store must keep the position meta written with file ranges")
        try:
            r = FileRange(key[len(FILE_KEY_PREFIX):], meta["path"], pos.offset, pos.offset,
                          meta["fingerprint"], meta["sample_length"], meta["tail"], meta["tail_length"],
                          meta["dev"], meta["inode"], meta.get("host"), bool(meta.get("compressed", False)),
                          tuple(tuple(a) for a in meta.get("aliases", ())), meta.get("supersedes"))
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigurationError(f"stored position {key!r} has a bad file identity document {meta!r} "
                                     f"({exc})") from None
        aliases = {(a[0], a[1]): a[2] for a in r.aliases}
        return cls(key, r.path, r.dev, r.inode, r.fingerprint, r.sample_length, pos.offset, r.tail,
                   r.tail_length, r.compressed, aliases, r.supersedes, r.host, "active", pos.offset, False)


class _Scan:
    """One batch's view of the files: stats, lazily opened views and cached content sizes/hashes."""

    def __init__(self, stats: List[FileStat]) -> None:
        self.stats = stats
        self.by_node: Dict[Node, FileStat] = {st.node: st for st in stats}
        self._views: Dict[Node, FileView] = {}
        self._sizes: Dict[Node, Optional[int]] = {}
        self._hashes: Dict[Tuple[Node, int, int], Optional[str]] = {}

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

    def close(self) -> None:
        for v in self._views.values():
            v.close()


class FilePlanner(BatchSource):
    """Plans byte ranges of the files named by ``path`` (an absolute glob or, with ``path.syntax=regex``,
    a regular expression over the file names of one directory). See the module docstring for the
    decision table; :attr:`counters` counts the reported events."""

    kind = "file"
    data_loss_unit = "bytes"
    data_loss_option = FILE_LOSS_OPTION

    def __init__(self, path: str, options: Optional[FileSourceOptions] = None, host: Optional[str] = None) -> None:
        self.options = options if options is not None else FileSourceOptions()
        if not isinstance(self.options, FileSourceOptions):
            raise ConfigurationError(f"options must be FileSourceOptions, got {self.options!r}")
        self.pattern = PathPattern.of(path, self.options)
        self.host = host
        self._tracks: Dict[str, _Track] = {}
        self._started = False
        self._first_start = True
        self._counters: Dict[str, int] = dict.fromkeys(COUNTERS, 0)

    # ---------------------------------------------------------------- BatchSource
    def describe(self) -> str:
        return f"files {self.pattern.path} ({self.pattern.syntax})"

    def start(self, positions: Mapping[str, Position]) -> None:
        self.pattern.check()
        tracks: Dict[str, _Track] = {}
        for key, pos in sorted(positions.items()):
            if FileRange.parse_position_key(key) is None:
                raise ConfigurationError(f"stored position {key!r} is not a file position (want 'file:<id>'); "
                                         f"is this app_id used by another source?")
            tracks[key] = _Track.from_position(key, pos)
        self._tracks = tracks
        self._retire_superseded()
        self._first_start = not tracks
        self._started = True

    def advance(self, ranges: Sequence[SourceRange]) -> None:
        for r in ranges:
            if not isinstance(r, FileRange):
                raise ConfigurationError(f"a file source cannot advance past {r!r} (not a FileRange)")
            self._tracks[r.position_key] = _Track.from_position(r.position_key, Position(r.end, r.position_meta()))
        self._retire_superseded()
        if self._tracks:
            self._first_start = False

    def reader(self) -> RangeReader:
        from .reader import FileRangeReader

        return FileRangeReader(self.pattern.path, self.options)

    def latest_positions(self) -> Mapping[str, int]:
        return {k: t.last_size for k, t in self._tracks.items() if t.state == "active"}

    @property
    def counters(self) -> Dict[str, int]:
        """Counts of reported events since this planner started: ``renames``, ``copies`` (continued in
        a copy), ``compressed`` (continued in a gzip file), ``truncations``, ``replacements``,
        ``disappearances``, ``losses`` (identities whose unread bytes are gone) and ``lost_bytes``
        (at least that many)."""
        return dict(self._counters)

    def data_loss_skips(self) -> int:
        return self._counters["lost_bytes"]

    def tracked(self) -> Dict[str, Tuple[str, str, int]]:
        """``{position_key: (state, path, next offset)}`` of every identity known (for tests, monitoring)."""
        return {k: (t.state, t.path, t.offset) for k, t in sorted(self._tracks.items())}

    def plan(self, time: Optional[datetime] = None) -> List[SourceRange]:
        if not self._started:
            raise ConfigurationError("FilePlanner.plan() before start(); call start(positions) first")
        scan = _Scan(self.pattern.scan())
        try:
            return self._plan(scan)
        finally:
            scan.close()
            self._first_start = False

    # ---------------------------------------------------------------- one batch
    def _plan(self, scan: _Scan) -> List[SourceRange]:
        live = [t for _, t in sorted(self._tracks.items()) if t.state != "retired"]
        claimed: Dict[Node, str] = {}
        located: Dict[str, FileStat] = {}
        in_place: Dict[str, Tuple[str, FileStat]] = {}
        for t in live:  # 1. the identity's own file (maybe renamed)
            st = scan.by_node.get(t.node)
            if st is None or st.node in claimed:
                continue
            verdict = self._verify(t, scan, st)
            if verdict == "same":
                located[t.key] = st
                claimed[st.node] = t.key
                if t.state == "gone":
                    log.warning("%s (%s) is back at %s", t.path, t.key, st.path)
                    t.state, t.dirty = "active", True
            elif t.state == "active":
                in_place[t.key] = (verdict, st)
        for t in live:  # 2. continued in a copy or a compressed file
            if t.key not in located and t.sample_length > 0:
                st2 = self._find_continuation(t, scan, claimed)
                if st2 is not None:
                    located[t.key] = st2
                    claimed[st2.node] = t.key
        new_files: List[Tuple[FileStat, int, Optional[str]]] = []
        for key, (verdict, st) in in_place.items():  # 3. what happened to an identity's own file
            t = self._tracks[key]
            if st.node in claimed:
                continue
            claimed[st.node] = key
            if key in located:
                log.warning("%s was rotated by copy (copytruncate); its new content is a new file read from 0", st.path)
                new_files.append((st, 0, None))
            elif verdict == "truncated":
                size = scan.size(st) or 0
                log.warning("%s was truncated to %d bytes below its position %d; continuing at %d as a new "
                            "generation of %s", st.path, size, t.offset, size, key)
                self._counters["truncations"] += 1
                t.state = "retired"
                new_files.append((st, size, key))
            else:
                self._counters["replacements"] += 1
                log.warning("%s was replaced (its first bytes changed); reading the new file from 0", st.path)
                new_files.append((st, 0, None))
        self._classify_unclaimed(scan, claimed, located, new_files)
        for t in live:  # 5. identities nowhere to be found
            if t.state == "active" and t.key not in located:
                self._gone(t)
        for st, offset, supersedes in new_files:
            if scan.size(st) or not self.options.md5_check_enabled:  # an empty file has no identity yet
                located[self._new_track(scan, st, offset, supersedes)] = st
        return self._ranges(scan, located)

    def _classify_unclaimed(self, scan: _Scan, claimed: Dict[Node, str], located: Dict[str, FileStat],
                            new_files: List[Tuple[FileStat, int, Optional[str]]]) -> None:
        """4. Each file no identity claimed: a copy of a tracked file (alias, not read while equal) or new."""
        owners = {a: t for t in self._tracks.values() if t.state != "retired" for a in t.aliases}
        for st in scan.stats:
            if st.node in claimed or scan.size(st) is None:
                continue
            t = owners.get(st.node) or self._copy_of(st, scan, located)
            if t is not None and self._still_copy(t, st, scan, located):
                claimed[st.node] = t.key
                if st.node not in t.aliases:
                    log.info("%s holds a copy of %s (%s); not read while its bytes stay equal", st.path,
                             t.path, t.key)
                if t.aliases.get(st.node) != scan.size(st):
                    t.aliases[st.node] = scan.size(st) or 0
                    t.dirty = True
                continue
            if t is not None and st.node in t.aliases:
                del t.aliases[st.node]
                t.dirty = True
            claimed[st.node] = ""
            new_files.append((st, self._start_offset(scan, st), None))
        for t in self._tracks.values():  # forget aliases that left the scan
            gone = [a for a in t.aliases if a not in scan.by_node]
            if gone and t.state == "active":
                for a in gone:
                    del t.aliases[a]
                t.dirty = True

    # ---------------------------------------------------------------- identity checks
    def _verify(self, t: _Track, scan: _Scan, st: FileStat) -> str:
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

    def _find_continuation(self, t: _Track, scan: _Scan, claimed: Dict[Node, str]) -> Optional[FileStat]:
        order = sorted(scan.stats, key=lambda s: (s.node not in t.aliases, s.compressed, s.path))
        for st in order:
            if st.node == t.node or claimed.get(st.node, t.key) != t.key:
                continue
            size = scan.size(st)
            if size is None or size < t.offset or self._verify(t, scan, st) != "same":
                continue
            kind = "compressed" if st.compressed else "copies"
            self._counters[kind] += 1
            log.warning("%s (%s) continues in %s (%s) from byte %d", t.path, t.key, st.path,
                        "decompressed" if st.compressed else "a copy", t.offset)
            t.path, t.dev, t.inode, t.compressed = st.path, st.dev, st.inode, st.compressed
            t.aliases.pop(st.node, None)
            t.state, t.dirty = "active", True
            return st
        return None

    def _copy_of(self, st: FileStat, scan: _Scan, located: Dict[str, FileStat]) -> Optional[_Track]:
        """The located identity whose first bytes ``st`` repeats (a copy candidate), if any."""
        for key, loc in sorted(located.items()):
            t = self._tracks[key]
            if t.sample_length and loc.node != st.node and scan.hash(st, 0, t.sample_length) == t.fingerprint:
                return t
        return None

    def _still_copy(self, t: _Track, st: FileStat, scan: _Scan, located: Dict[str, FileStat]) -> bool:
        """Whether ``st`` still holds only bytes of identity ``t``: the same first bytes, and — while ``t``'s
        own file is here to compare — the same bytes up to the shorter of the two."""
        size = scan.size(st)
        loc = located.get(t.key)
        if loc is None:  # the identity's file is gone: only a recorded, unchanged copy is recognised
            head = min(t.sample_length, size or 0)
            return (t.aliases.get(st.node) == size and head > 0
                    and (head < t.sample_length or scan.hash(st, 0, head) == t.fingerprint))
        if not t.sample_length or scan.hash(st, 0, t.sample_length) != t.fingerprint:
            return False
        loc_size = scan.size(loc)
        if size is None or loc_size is None or size > loc_size:
            return False  # a copy of a growing file is never longer than the file
        n = min(size, t.sample_length)
        return scan.hash(st, size - n, n) == scan.hash(loc, size - n, n)

    # ---------------------------------------------------------------- changes of identity
    def _gone(self, t: _Track) -> None:
        unread = t.last_size - t.offset
        if unread > 0 and self.options.fail_on_data_loss:
            raise DataLossError(f"{t.path} ({t.key}) disappeared with at least {unread} unread bytes [{t.offset}, "
                                f"{t.last_size}) that no file named by {self.pattern.path} holds; the stream stops "
                                f"(fail.on.data.loss=true): restart it with {FILE_LOSS_OPTION} to continue without "
                                f"them (the loss is then logged and counted)")
        # an identity without content (an empty file) has nothing to continue: it is never matched again
        t.state = "gone" if t.sample_length or not self.options.md5_check_enabled else "retired"
        self._counters["disappearances"] += 1
        if unread > 0:
            self._counters["losses"] += 1
            self._counters["lost_bytes"] += unread
            log.warning("%s (%s) disappeared with at least %d unread bytes [%d, %d): LOST (no file named by %s "
                        "holds them)", t.path, t.key, unread, t.offset, t.last_size, self.pattern.path)
        else:
            log.warning("%s (%s) disappeared after byte %d; no longer planned", t.path, t.key, t.offset)

    def _start_offset(self, scan: _Scan, st: FileStat) -> int:
        if not self._first_start or self.options.starting_offsets == "earliest":
            return 0
        size = scan.size(st) or 0
        return size if st.compressed else scan.view(st).last_newline(0, size) + 1

    def _new_track(self, scan: _Scan, st: FileStat, offset: int, supersedes: Optional[str]) -> str:
        size = scan.size(st) or 0
        n = min(self.options.sample_length, size)
        fp = scan.view(st).hash(0, n) or ""
        seed = f"{st.path}\0{st.dev}\0{st.inode}\0{fp}\0{n}\0{offset}\0{supersedes}"
        if self.host is not None:  # per-host planners: the same path and inode on two hosts are two files
            seed += f"\0{self.host}"
        file_id = content_hash(seed.encode())[:16]
        i = 1
        while FILE_KEY_PREFIX + file_id in self._tracks:
            file_id = content_hash(f"{seed}\0{i}".encode())[:16]
            i += 1
        key = FILE_KEY_PREFIX + file_id
        tn = min(self.options.sample_length, offset)
        tail = scan.view(st).hash(offset - tn, tn) or ""
        if st.path != self.pattern.path and not self._first_start:
            log.info("new file %s (%s) from byte %d", st.path, key, offset)
        self._tracks[key] = _Track(key, st.path, st.dev, st.inode, fp, n, offset, tail, tn, st.compressed,
                                   {}, supersedes, self.host, "active", size, True)
        return key

    def _retire_superseded(self) -> None:
        for t in list(self._tracks.values()):
            old = self._tracks.get(t.supersedes) if t.supersedes else None
            if old is not None:
                old.state = "retired"

    # ---------------------------------------------------------------- ranges
    def _ranges(self, scan: _Scan, located: Dict[str, FileStat]) -> List[SourceRange]:
        out: List[SourceRange] = []
        for key, st in sorted(located.items()):
            t = self._tracks[key]
            size = scan.size(st)
            if size is None or t.state != "active":
                continue
            if st.path != t.path:
                log.info("%s (%s) was renamed to %s", t.path, key, st.path)
                self._counters["renames"] += 1
                t.path, t.dirty = st.path, True
            t.last_size = size
            start = t.offset
            until = self._cut(t, scan.view(st), size, final=st.compressed)
            if until == start and not t.dirty:
                continue
            want = min(self.options.sample_length, size)
            if want > t.sample_length:  # the file grew past the fingerprinted length: lengthen it
                t.fingerprint, t.sample_length = scan.view(st).hash(0, want) or "", want
            tn = min(self.options.sample_length, until)
            t.tail, t.tail_length = scan.view(st).hash(until - tn, tn) or "", tn
            t.offset, t.dirty = until, False
            out.append(FileRange(key[len(FILE_KEY_PREFIX):], t.path, start, until, t.fingerprint, t.sample_length,
                                 t.tail, t.tail_length, t.dev, t.inode, t.host, t.compressed,
                                 tuple(sorted((*a, n) for a, n in t.aliases.items())), t.supersedes))
        return out

    def _cut(self, t: _Track, view: FileView, size: int, final: bool) -> int:
        """The end of the next range: after the last ``\\n`` within ``bytes.max``; a half-written line
        waits (unless the file is final: compressed); a line longer than ``line.max.bytes`` is split."""
        start, line_max = t.offset, self.options.line_max_bytes
        wend = min(start + self.options.bytes_max, size)
        if wend <= start:
            return start
        if final and wend == size:
            return size
        nl = view.last_newline(start, wend)
        if nl >= 0:
            return nl + 1
        if wend - start > line_max:
            if self.options.line_overflow == "fail":
                raise DecodeError(f"{t.path} ({t.key}): the line at byte {start} is longer than line.max.bytes="
                                  f"{line_max} (line.overflow=fail); raise line.max.bytes or set line.overflow=split")
            return start + utf8_cut(view.read(start, line_max + 1), line_max)
        return start
