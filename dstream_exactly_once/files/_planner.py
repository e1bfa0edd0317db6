"""Driver-side planning of the append-only file source: which bytes of which file each batch reads.

Unit of parallelism: one file identity per range (one RDD partition). Guarantee: with an
exactly-once committer every complete line is delivered exactly once, across restarts and across
rotation by rename, copytruncate and delayed compression, as long as the rotated file stays named
by the pattern until it is read; when it does not, the loss is reported (warning + counters),
never silent. Without a committer, at-least-once.

Each batch scans the pattern once (again, a few times with short pauses, while a followed identity's
file is in no listing: a file renamed while the directory is listed is under neither name the listing
saw, which is not a disappearance) and decides, per tracked identity (its stored position, path,
device/inode, fingerprint of the first bytes and tail hash before the position — see
:mod:`._identity`; the checks behind each row are in :mod:`._matching`):

=====================================================  ==========================================
what the scan shows                                    decision
=====================================================  ==========================================
a file no identity claims, first start                 ``starting.offsets``: byte 0, or after its
                                                       last complete line (unless a copy, below)
a file no identity claims, later                       new identity, from byte 0 (unless a copy)
the identity's file (same dev/inode, fingerprint and   next range ``[offset, offset + bytes.max)``
tail match), possibly under a new name (rename)        cut after its last ``\\n``; a half-written
                                                       line waits; a longer line than
                                                       ``line.max.bytes`` is split (``line.overflow``)
the identity's dev/inode under its name, same          truncated: new generation key starting at
fingerprint, shorter than the offset, no copy          its length (a warning, ``truncations``)
the identity's dev/inode under its name, fingerprint   replaced (``replacements``): the file is one
or tail changed                                        no identity claims; the identity is nowhere
                                                       (last row)
the identity's dev/inode under *another* name,         a new file on a deleted file's reused inode
fingerprint or tail changed or shorter than the        (a renamed file keeps its bytes; an info
offset                                                 log): a file no identity claims; the
                                                       identity is nowhere (last row)
the identity's bytes are in another file (fingerprint  rotated by copy (copytruncate) or compressed:
and tail at the offset match, plain or gzip)           continue there; the truncated original is a
                                                       file no identity claims
a file no identity claims whose bytes so far equal     not read while it stays equal (a copy in
the start of a tracked file, or of a longer file new   progress, also one written in pieces smaller
in this batch: first and last ``min(size, sample)``    than the sample); kept as an *alias* of the
bytes, no longer than that file                        identity whose bytes it repeats (never of
                                                       another file with the same first bytes);
                                                       read from 0 as a new identity once its
                                                       bytes differ
the identity is nowhere                                stops being planned (``disappearances``;
                                                       ``losses``/``lost_bytes`` if bytes below the
                                                       size last seen were unread; that size is
                                                       stored, so a restarted driver reports them)
=====================================================  ==========================================

Inodes are reused as soon as a file is deleted, so a file on a tracked inode under another name is
a new file, never a truncation: its first lines are read, not skipped (a file renamed *and*
truncated between two scans looks the same and is read again from 0). A copy is told from a new
file by its bytes alone: a new file holding nothing but another file's first bytes (a shared
header, say) waits with it until its bytes differ.

A position never moves backwards under the store's compare-and-set, so a truncated file continues
under a new key whose document names the key it ``supersedes``.

State stays bounded by the files that exist. An identity that is ``gone`` (no copy of it left either)
or ``retired`` (a superseded generation, an empty file) is offered in :meth:`FilePlanner.retired_positions`;
the committer deletes its stored position in the transaction of a commit once no batch kept in the
offset log (``retain_batches``) reads it, and the planner then forgets it. Until then a gone file
that comes back is recognised and continues; once forgotten, a file holding its bytes is a new file
read from byte 0 (after a deletion that is what it is: inodes are reused and first lines repeat).
A new key includes the batch time of the plan that first saw the file, so a forgotten key is never
given to a later file with the same path, inode and first bytes.

The scan itself never blocks a batch on one entry (:meth:`~._paths.PathPattern.scan_report`): a matched
entry that cannot be read (permissions, a FIFO, a dangling link, a directory that cannot be listed)
is skipped, logged once and counted (``unreadable``) while every other file is planned; a name that
is not valid UTF-8 is planned like any other.

Work per batch grows with what changed, not with the files tracked: the scan stats every file and
opens only new or changed ones, an identity whose file is unchanged since it was last checked
(same device, inode, size, mtime and ctime, settled: :func:`~._identity.unchanged_since`) is ``same``
without reading it, and a file no identity claims is compared only with the tracked files that
start with its first bytes (:class:`~._matching.LocatedHeads`).
"""

from __future__ import annotations

import logging
import time
from datetime import datetime
from typing import Collection, Dict, List, Mapping, Optional, Sequence, Set, Tuple

from ..core._ranges import Position, SourceRange
from ..core._source import BatchSource, RangeReader
from ..errors import ConfigurationError, DataLossError, DecodeError
from ._identity import FileStat, FileView, content_hash, unchanged_since, utf8_cut
from ._locate import LISTINGS, RELIST_PAUSE
from ._matching import HeadIndex, LocatedHeads, Node, Scan, Track, copy_of, repeats, still_copy, verify
from ._options import FILE_LOSS_OPTION, FileSourceOptions
from ._paths import PathPattern
from ._ranges import FILE_KEY_PREFIX, FileRange

log = logging.getLogger(__name__)

__all__ = ["COUNTERS", "FilePlanner"]

#: The event counters :attr:`FilePlanner.counters` reports.
COUNTERS = ("renames", "copies", "compressed", "truncations", "replacements", "disappearances", "losses",
            "lost_bytes", "unreadable")

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
        self._tracks: Dict[str, Track] = {}
        self._started = False
        self._first_start = True
        self._counters: Dict[str, int] = dict.fromkeys(COUNTERS, 0)
        self._unreadable: Dict[str, str] = {}  # matched entries reported as unreadable: path -> reason
        self._plan_time: Optional[datetime] = None  # the batch time of the plan in progress
        self._known: Dict[str, FileStat] = {}  # the last scan's files by path (unchanged ones are not opened)
        self._heads: Dict[Node, Tuple[FileStat, bytes]] = {}  # first bytes of files, kept while unchanged
        self._located_heads = LocatedHeads()  # the located identities by their files' first bytes

    # ---------------------------------------------------------------- BatchSource
    def describe(self) -> str:
        return f"files {self.pattern.path} ({self.pattern.syntax})"

    def start(self, positions: Mapping[str, Position]) -> None:
        self.pattern.check()
        tracks: Dict[str, Track] = {}
        for key, pos in sorted(positions.items()):
            if FileRange.parse_position_key(key) is None:
                raise ConfigurationError(f"stored position {key!r} is not a file position (want 'file:<id>'); "
                                         f"is this app_id used by another source?")
            tracks[key] = Track.from_position(key, pos)
        self._tracks = tracks
        self._retire_superseded()
        self._first_start = not tracks
        self._started = True

    def advance(self, ranges: Sequence[SourceRange]) -> None:
        for r in ranges:
            if not isinstance(r, FileRange):
                raise ConfigurationError(f"a file source cannot advance past {r!r} (not a FileRange)")
            t = Track.from_position(r.position_key, Position(r.end, r.position_meta()))
            old = self._tracks.get(r.position_key)
            if old is not None and old.same_identity(t):
                t.seen = old.seen  # the planned range's identity: still checked against that look
            self._tracks[r.position_key] = t
        self._retire_superseded()
        if self._tracks:
            self._first_start = False

    def mark_gone(self, keys: Sequence[str]) -> None:
        """Identities whose disappearance was reported before this planner started (e.g. in a stored
        offset document): followed again if their file comes back, never reported as gone twice."""
        for key in keys:
            t = self._tracks.get(key)
            if t is not None and t.state == "active":
                t.state = "gone"

    def reader(self) -> RangeReader:
        from ._reader import FileRangeReader

        return FileRangeReader(self.pattern.path, self.options)

    def latest_positions(self) -> Mapping[str, int]:
        return {k: t.last_size for k, t in self._tracks.items() if t.state == "active"}

    def retired_positions(self) -> List[str]:
        """Keys of identities that are never read again: ``gone`` (no file named by the pattern holds
        them; read to the end, or their loss reported) with no copy left to recognise, and ``retired``
        (superseded generations, empty files). The committer drops them (see the module docstring)."""
        return [k for k, t in sorted(self._tracks.items())
                if t.state == "retired" or (t.state == "gone" and not t.aliases)]

    def forget_positions(self, keys: Collection[str]) -> None:
        """Forget the identities of ``keys``: their stored positions were deleted with a commit."""
        for k in keys:
            self._tracks.pop(k, None)

    @property
    def counters(self) -> Dict[str, int]:
        """Counts of reported events since this planner started: ``renames``, ``copies`` (continued in
        a copy), ``compressed`` (continued in a gzip file), ``truncations``, ``replacements``,
        ``disappearances``, ``losses`` (identities whose unread bytes are gone), ``lost_bytes``
        (at least that many) and ``unreadable`` (matched files or directories found unreadable: a
        permission, a FIFO, a dangling symbolic link; each counted and logged once until it is readable
        again)."""
        return dict(self._counters)

    def event_counters(self) -> Dict[str, int]:
        """:attr:`counters` (for the progress records)."""
        return self.counters

    def unreadable(self) -> Dict[str, str]:
        """``{path: reason}`` of the matched entries the last scan could not read (not planned meanwhile)."""
        return dict(self._unreadable)

    def data_loss_skips(self) -> int:
        return self._counters["lost_bytes"]

    def tracked(self) -> Dict[str, Tuple[str, str, int]]:
        """``{position_key: (state, path, next offset)}`` of every identity known (for tests, monitoring)."""
        return {k: (t.state, t.path, t.offset) for k, t in sorted(self._tracks.items())}

    def plan(self, time: Optional[datetime] = None) -> List[SourceRange]:
        if not self._started:
            raise ConfigurationError("FilePlanner.plan() before start(); call start(positions) first")
        stats, problems = self._listing()
        self._known = {st.path: st for st in stats}
        self._report_unreadable(problems)
        scan = Scan(stats, self._heads)
        self._plan_time = time
        try:
            return self._plan(scan)
        finally:
            scan.close()
            self._first_start = False

    def _listing(self) -> Tuple[List[FileStat], List[Tuple[str, str]]]:
        """The pattern's files now: listed again (up to :data:`~._locate.LISTINGS` times, with short pauses)
        while a followed identity's file is in none of them, since a file renamed while the directory is
        listed is under neither name the listing saw; an identity still nowhere is then truly gone."""
        for listing in range(1, LISTINGS + 1):
            stats, problems = self.pattern.scan_report(self._known)
            nodes = {st.node for st in stats}
            if listing == LISTINGS or all(t.node in nodes for t in self._tracks.values() if t.state == "active"):
                return stats, problems
            time.sleep(RELIST_PAUSE * 2 ** (listing - 1))
        raise AssertionError("unreachable")

    def _report_unreadable(self, problems: Sequence[Tuple[str, str]]) -> None:
        """Log each matched entry that cannot be read once (WARN, counter ``unreadable``) while it stays so;
        every other file is planned as usual."""
        now = dict(problems)
        for path, reason in sorted(now.items()):
            if self._unreadable.get(path) != reason:
                self._counters["unreadable"] += 1
                log.warning("%s is named by %s but cannot be read (%s); skipped, every other file is read; it is "
                            "read once it can be", path, self.pattern.path, reason)
        for path in sorted(set(self._unreadable) - set(now)):
            log.info("%s is no longer unreadable (readable again or gone)", path)
        self._unreadable = now

    # ---------------------------------------------------------------- one batch
    def _plan(self, scan: Scan) -> List[SourceRange]:
        tracks = self._tracks
        live = [t for t in map(tracks.__getitem__, sorted(tracks)) if t.state != "retired"]  # by key
        claimed: Dict[Node, str] = {}
        located: Dict[str, FileStat] = {}
        in_place: Dict[str, Tuple[str, FileStat]] = {}
        idle: Set[str] = set()  # read to the end of a file that is the very look of the last plan
        for t in live:  # 1. the identity's own file (maybe renamed)
            st = scan.by_node.get(t.node)
            if st is None or st.node in claimed:
                continue
            seen = t.seen
            verdict = "same" if seen is not None and unchanged_since(seen, st) else verify(t, scan, st)
            if verdict == "same":
                located[t.key] = st
                claimed[st.node] = t.key
                if (seen is st and not t.dirty and t.offset >= st.disk_size and not st.compressed
                        and st.path == t.path and t.state == "active"):
                    idle.add(t.key)
                if t.state == "gone":
                    log.warning("%s (%s) is back at %s", t.path, t.key, st.path)
                    t.state, t.dirty = "active", True
            elif t.state == "active":
                in_place[t.key] = (verdict, st)
        free: Optional[List[FileStat]] = None  # the files unclaimed after step 1
        for t in live:  # 2. continued in a copy or a compressed file
            if t.key not in located and t.sample_length > 0:
                if free is None:
                    free = [s for s in scan.stats if s.node not in claimed]
                st2 = self._find_continuation(t, scan, claimed, free)
                if st2 is not None:
                    located[t.key] = st2
                    claimed[st2.node] = t.key
        new_files: List[Tuple[FileStat, int, Optional[str]]] = []
        for key, (verdict, st) in in_place.items():  # 3. what happened to an identity's own file
            t = self._tracks[key]
            if st.node in claimed:
                continue
            # a file that no longer holds its identity's bytes is classified in step 4 like any file no
            # identity claims: new (from 0), or a copy in progress of a tracked file
            if key in located:
                log.warning("%s was rotated by copy (copytruncate); its new content is a new file", st.path)
            elif st.path != t.path:  # renamed files keep their bytes: this one took a deleted file's inode
                log.info("%s is a new file on the inode of %s (%s), which was deleted %s", st.path, t.path, key,
                         self._read_so_far(t))
            elif verdict == "truncated":
                size = scan.size(st) or 0
                log.warning("%s was truncated to %d bytes below its position %d; continuing at %d as a new "
                            "generation of %s", st.path, size, t.offset, size, key)
                self._counters["truncations"] += 1
                t.state = "retired"
                claimed[st.node] = key
                new_files.append((st, size, key))
            else:
                self._counters["replacements"] += 1
                log.warning("%s is a new file on the inode of the earlier %s (%s), which was deleted (or rewritten "
                            "in place) %s; its first bytes differ, so it is read as a new file", st.path, t.path,
                            key, self._read_so_far(t))
        copies = self._classify_unclaimed(scan, claimed, located, new_files)
        for t in live:  # 5. identities nowhere to be found
            if t.state == "active" and t.key not in located:
                self._gone(t)
        new_keys: Dict[Node, str] = {}
        for st, offset, supersedes in new_files:
            if scan.size(st) or not self.options.md5_check_enabled:  # an empty file has no identity yet
                new_keys[st.node] = self._new_track(scan, st, offset, supersedes)
                located[new_keys[st.node]] = st
        for node, (original, size) in copies.items():  # copies of files new in this batch
            self._tracks[new_keys[original]].aliases[node] = size
        return self._ranges(scan, located, idle)

    def _classify_unclaimed(self, scan: Scan, claimed: Dict[Node, str], located: Dict[str, FileStat],
                            new_files: List[Tuple[FileStat, int, Optional[str]]]) -> Dict[Node, Tuple[Node, int]]:
        """4. Each file no identity claimed: a copy of a tracked file (alias, not read while equal), a copy
        of a file new in this batch (returned as ``{copy: (original, size)}``; the longer file is the
        original) or new."""
        owners = {a: t for t in self._tracks.values() if t.state != "retired" for a in t.aliases}
        fresh: HeadIndex[FileStat] = HeadIndex()  # new files by their first bytes
        tracked: Optional[LocatedHeads] = None  # located identities by their files' first bytes, when needed
        for f, _, _ in new_files:
            fresh.add(scan.head(f), f)
        copies: Dict[Node, Tuple[Node, int]] = {}
        unclaimed = [s for s in scan.stats if s.node not in claimed]
        for st in sorted(unclaimed, key=lambda s: (-(scan.size(s) or 0), s.path)):
            if st.node in claimed or scan.size(st) is None:
                continue
            t = owners.get(st.node)
            if t is not None and not still_copy(t, st, scan, located, self.options.sample_length):
                del t.aliases[st.node]  # no longer a copy of its identity; maybe of another one
                t.dirty, t = True, None
            if t is None:
                if tracked is None:
                    tracked = self._located_heads
                    tracked.update(scan, located)
                t = copy_of(self._tracks, st, scan, located, self.options.sample_length, tracked)
            if t is not None:
                claimed[st.node] = t.key
                if st.node not in t.aliases:
                    log.info("%s holds a copy of %s (%s); not read while its bytes stay equal", st.path,
                             t.path, t.key)
                if t.aliases.get(st.node) != scan.size(st):
                    t.aliases[st.node] = scan.size(st) or 0
                    t.dirty = True
                continue
            claimed[st.node] = ""
            # the LONGER new files whose first bytes start with st's (all of st's first HEAD bytes, or fewer if
            # shorter): a new file as long as another, with the same bytes, is a file of its own (read once)
            size = scan.size(st) or 0
            candidates = [f for f in fresh.starting(scan.head(st)) if (scan.size(f) or 0) > size]
            original = next((f for f in candidates if repeats(st, f, scan, self.options.sample_length)), None)
            if original is not None:
                log.info("%s holds a copy of %s (new too); not read while its bytes stay equal", st.path,
                         original.path)
                copies[st.node] = (original.node, scan.size(st) or 0)
                continue
            new_files.append((st, self._start_offset(scan, st), None))
            fresh.add(scan.head(st), st)
        for t in self._tracks.values():  # forget aliases that left the scan
            gone = [a for a in t.aliases if a not in scan.by_node]
            if gone and t.state in ("active", "gone"):
                for a in gone:
                    del t.aliases[a]
                t.dirty = True
        return copies

    # ---------------------------------------------------------------- continued elsewhere
    def _find_continuation(self, t: Track, scan: Scan, claimed: Dict[Node, str],
                           free: List[FileStat]) -> Optional[FileStat]:
        """The file ``t`` continues in, among ``free`` (no identity claimed them in step 1; nor, of those,
        one claimed since): its aliases first, then plain files, by path."""
        candidates = [s for s in free if s.node != t.node and s.node not in claimed]
        for st in sorted(candidates, key=lambda s: (s.node not in t.aliases, s.compressed, s.path)):
            size = scan.size(st)
            if size is None or size < t.offset or verify(t, scan, st) != "same":
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

    # ---------------------------------------------------------------- changes of identity
    def _gone(self, t: Track) -> None:
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
        else:  # read to its end, then deleted: what logrotate does to the oldest file, every rotation
            log.info("%s (%s) disappeared after being read to its end (byte %d); no longer planned",
                     t.path, t.key, t.offset)

    @staticmethod
    def _read_so_far(t: Track) -> str:
        """How much of identity ``t`` was read: ``after being read to its end (byte N)``, or the bytes
        not read of the size last seen."""
        if t.offset >= t.last_size:
            return f"after being read to its end (byte {t.offset})"
        return f"with bytes [{t.offset}, {t.last_size}) not read"

    def _start_offset(self, scan: Scan, st: FileStat) -> int:
        if not self._first_start or self.options.starting_offsets == "earliest":
            return 0
        size = scan.size(st) or 0
        return size if st.compressed else scan.view(st).last_newline(0, size) + 1

    def _new_track(self, scan: Scan, st: FileStat, offset: int, supersedes: Optional[str]) -> str:
        size = scan.size(st) or 0
        n = min(self.options.sample_length, size)
        fp = scan.hash(st, 0, n) or ""
        seed = f"{st.path}\0{st.dev}\0{st.inode}\0{fp}\0{n}\0{offset}\0{supersedes}"
        if self.host is not None:  # per-host planners: the same path and inode on two hosts are two files
            seed += f"\0{self.host}"
        if self._plan_time is not None:  # a forgotten identity's key is never given to a later file
            seed += f"\0{self._plan_time.isoformat()}"
        file_id = content_hash(seed.encode("utf-8", "surrogateescape"))[:16]  # a name may not be UTF-8
        i = 1
        while FILE_KEY_PREFIX + file_id in self._tracks:
            file_id = content_hash(f"{seed}\0{i}".encode("utf-8", "surrogateescape"))[:16]
            i += 1
        key = FILE_KEY_PREFIX + file_id
        tn = min(self.options.sample_length, offset)
        tail = scan.hash(st, offset - tn, tn) or ""
        if st.path != self.pattern.path and not self._first_start:
            log.info("new file %s (%s) from byte %d", st.path, key, offset)
        self._tracks[key] = Track(key, st.path, st.dev, st.inode, fp, n, offset, tail, tn, st.compressed,
                                   {}, supersedes, self.host, "active", size, True)
        return key

    def _retire_superseded(self) -> None:
        for t in list(self._tracks.values()):
            old = self._tracks.get(t.supersedes) if t.supersedes else None
            if old is not None:
                old.state = "retired"

    # ---------------------------------------------------------------- ranges
    def _ranges(self, scan: Scan, located: Dict[str, FileStat], idle: Set[str]) -> List[SourceRange]:
        """The ranges of the located identities; ``idle`` ones (read to the end of an unchanged file, see
        step 1) have nothing to plan unless their document changed meanwhile."""
        out: List[SourceRange] = []
        tracks = self._tracks
        for key in sorted(k for k in located if k not in idle or tracks[k].dirty):
            st, t = located[key], tracks[key]
            size = scan.size(st)
            if size is None or t.state != "active":
                continue
            if st.path != t.path:
                log.info("%s (%s) was renamed to %s", t.path, key, st.path)
                self._counters["renames"] += 1
                t.path, t.dirty = st.path, True
            t.last_size = size
            t.seen = st  # its fields hold (or are taken from) the bytes of this look
            start = t.offset
            if start >= size and not t.dirty:
                continue  # nothing new (what _cut would find without reading)
            until = self._cut(t, scan.view(st), size, final=st.compressed)
            if until == start and not t.dirty:
                continue
            want = min(self.options.sample_length, size)
            if want > t.sample_length:  # the file grew past the fingerprinted length: lengthen it
                t.fingerprint, t.sample_length = scan.hash(st, 0, want) or "", want
            tn = min(self.options.sample_length, until)
            t.tail, t.tail_length = scan.hash(st, until - tn, tn) or "", tn
            t.offset, t.dirty = until, False
            out.append(FileRange(key[len(FILE_KEY_PREFIX):], t.path, start, until, t.fingerprint, t.sample_length,
                                 t.tail, t.tail_length, t.dev, t.inode, t.host, t.compressed,
                                 tuple(sorted((*a, n) for a, n in t.aliases.items())), t.supersedes, size))
        return out

    def _cut(self, t: Track, view: FileView, size: int, final: bool) -> int:
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
