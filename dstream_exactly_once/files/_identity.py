"""File identity: content fingerprints, device/inode hints, and reads of a file's content.

A file's identity is the hash of its first ``min(sample, size)`` bytes *together with that length*:
a file shorter than the sample that grows keeps its identity, because the hash over the stored
length still matches (the planner lengthens the fingerprint as the file grows). Device/inode are
only a hint (inodes are reused). Two files that merely start with the same bytes are told apart by
a second hash, of the bytes just before the stored position (the *tail*): only a true copy holds
the very bytes that were read (``FileRange`` documents both).

A look at a file (:class:`FileStat`) vouches for the bytes read after it while a later look shows the
same device, inode, size, mtime and ctime, provided the file had not changed for a margin when the
first look was taken (:func:`unchanged_since`): the planner then neither opens nor hashes an idle file
again. The margin covers timestamps coarser than the writes (a rewrite of the same size within one
clock tick leaves mtime and ctime as they were): :data:`SETTLED_NS` (Linux stamps files with a clock
of 1-10 ms ticks), or :data:`COARSE_SETTLED_NS` for a file whose mtime is a whole second (a
filesystem with 1 s or 2 s timestamps: FAT, ext3, HFS+). ctime cannot be set back by a program, so a
file whose mtime is restored still looks changed. It assumes the clocks of this host and of a network
filesystem's server agree within the margin; a file written through a shared memory map (which updates
mtime late) is not a log file this source reads.

Content is what a reader sees: the bytes on disk, or the decompressed stream of a gzip file
(recognised by its magic bytes, not its name), so a rotated log that logrotate compressed keeps
its identity.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import stat as stat_mod
import threading
import time
import zlib
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Dict, Mapping, Optional, Tuple

__all__ = ["COARSE_SETTLED_NS", "SETTLED_NS", "FileStat", "FileView", "content_hash", "file_stat", "reanchor_document",
           "stat_file", "unchanged_since", "utf8_cut"]

GZIP_MAGIC = b"\x1f\x8b"
_BLOCK = 1 << 16
_AHEAD = 1 << 13  # a short read of a plain file reads this much, for the reads next to it

#: Nanoseconds a file must have stayed unchanged (mtime and ctime) before a look at it, for that look to
#: vouch for its bytes while its stat stays the same (:func:`unchanged_since`)...
SETTLED_NS = 100_000_000
#: ... or, when its mtime is a whole second (a filesystem with coarse timestamps), this many.
COARSE_SETTLED_NS = 2_000_000_000


def content_hash(data: bytes) -> str:
    """The fingerprint of ``data``: BLAKE2b with a 128-bit digest, as hex (``""`` for no data)."""
    if not data:
        return ""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


@dataclass(frozen=True)
class FileStat:
    """One regular file as seen by a directory scan: where it is, how big it is on disk, when it last
    changed (``mtime_ns``, ``ctime_ns``) and when this look was taken (``seen_ns``, wall clock; 0:
    unknown). ``settled``: the file had not changed for the margin of :func:`unchanged_since` when this
    look was taken, so the look vouches for the bytes read after it while the file's stat stays."""

    path: str
    dev: int
    inode: int
    disk_size: int
    mtime_ns: int
    compressed: bool
    ctime_ns: int = 0
    seen_ns: int = 0
    #: ``(dev, inode)``
    node: Tuple[int, int] = field(init=False, repr=False, compare=False)
    settled: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "node", (self.dev, self.inode))
        margin = COARSE_SETTLED_NS if self.mtime_ns % 1_000_000_000 == 0 else SETTLED_NS
        object.__setattr__(self, "settled", max(self.mtime_ns, self.ctime_ns) < self.seen_ns - margin)


def unchanged_since(old: FileStat, new: FileStat) -> bool:
    """Whether ``new``, a later look at a file, shows the bytes ``old`` showed without reading them: the
    same device, inode, size, mtime and ctime, and when ``old`` was taken the file had not changed for
    :data:`SETTLED_NS` (:data:`COARSE_SETTLED_NS` if its mtime is a whole second), so a change after it
    cannot have kept its timestamps (see the module docstring)."""
    return old.settled and (old is new or (old.inode == new.inode and old.dev == new.dev
                                           and old.disk_size == new.disk_size and old.mtime_ns == new.mtime_ns
                                           and old.ctime_ns == new.ctime_ns))


def file_stat(path: str, st: os.stat_result, compressed: bool, seen_ns: int) -> FileStat:
    """The :class:`FileStat` of ``path`` from its ``os.stat`` result, looked at at ``seen_ns``."""
    return FileStat(path, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, compressed, st.st_ctime_ns, seen_ns)


def stat_file(path: str) -> Optional[FileStat]:
    """The :class:`FileStat` of ``path``, or ``None`` if it is gone or not a regular file."""
    seen = time.time_ns()
    try:
        st = os.stat(path)
        if not stat_mod.S_ISREG(st.st_mode):
            return None
        with open(path, "rb") as f:
            magic = f.read(2)
    except OSError:
        return None
    return file_stat(path, st, magic == GZIP_MAGIC, seen)


# (dev, inode, disk size, mtime) -> decompressed size; a compressed file never changes once written.
_GZ_SIZES: Dict[Tuple[int, int, int, int], int] = {}
_GZ_LOCK = threading.Lock()


class FileView:
    """Reads of one file's content (decompressed for gzip); opened lazily, closed by :meth:`close`.

    ``size`` is the content size: the on-disk size of a plain file as scanned (later growth is not
    seen, so one plan works on one consistent snapshot), or the decompressed length of a gzip file
    (``None`` while the gzip file is incomplete, e.g. still being written).
    """

    def __init__(self, st: FileStat) -> None:
        self.stat = st
        self._f: Optional[BinaryIO] = None
        self._block: Tuple[int, bytes] = (0, b"")  # the last plain read, at least _AHEAD bytes: (start, bytes)

    def _open(self) -> BinaryIO:
        if self._f is None:
            raw: BinaryIO = open(self.stat.path, "rb")
            self._f = gzip.GzipFile(fileobj=raw, mode="rb") if self.stat.compressed else raw  # type: ignore[assignment]
        assert self._f is not None
        return self._f

    @property
    def size(self) -> Optional[int]:
        st = self.stat
        if not st.compressed:
            return st.disk_size
        key = (st.dev, st.inode, st.disk_size, st.mtime_ns)
        with _GZ_LOCK:
            known = _GZ_SIZES.get(key)
        if known is not None:
            return known
        try:
            total = 0
            with gzip.open(st.path, "rb") as f:
                while True:
                    block = f.read(_BLOCK)
                    if not block:
                        break
                    total += len(block)
        except (OSError, EOFError, zlib.error):
            return None
        with _GZ_LOCK:
            _GZ_SIZES[key] = total
        return total

    def read(self, start: int, n: int) -> bytes:
        """Up to ``n`` bytes of content from ``start`` (fewer at the end)."""
        if n <= 0:
            return b""
        at, block = self._block
        if at <= start and start + n <= at + len(block):  # the first bytes, fingerprint and tail of a small file
            return block[start - at:start - at + n]
        f = self._open()
        f.seek(start)
        if self.stat.compressed or n >= _AHEAD:
            return f.read(n)
        self._block = (start, f.read(_AHEAD))
        return self._block[1][:n]

    def hash(self, start: int, n: int) -> Optional[str]:
        """:func:`content_hash` of content ``[start, start + n)``, or ``None`` if the file is shorter."""
        if n <= 0:
            return ""
        data = self.read(start, n)
        return content_hash(data) if len(data) == n else None

    def last_newline(self, start: int, end: int) -> int:
        """The offset of the last ``\\n`` in content ``[start, end)``, or -1."""
        if self.stat.compressed:  # forward only: seeking backwards in gzip re-decompresses
            f, pos, last = self._open(), start, -1
            f.seek(start)
            while pos < end:
                block = f.read(min(_BLOCK, end - pos))
                if not block:
                    break
                i = block.rfind(b"\n")
                if i >= 0:
                    last = pos + i
                pos += len(block)
            return last
        hi = end
        while hi > start:
            lo = max(start, hi - _BLOCK)
            i = self.read(lo, hi - lo).rfind(b"\n")
            if i >= 0:
                return lo + i
            hi = lo
        return -1

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None

    def __enter__(self) -> FileView:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def utf8_cut(data: bytes, k: int) -> int:
    """A cut position ``<= k`` in ``data`` that does not fall inside a UTF-8 character.

    ``data[k]`` (the first byte after the cut) must be present to tell; continuation bytes
    (``10xxxxxx``) are skipped backwards, at most three. Invalid UTF-8 cuts at ``k``.
    """
    if k >= len(data):
        return k
    i = k
    while i > 0 and k - i < 3 and data[i] & 0xC0 == 0x80:
        i -= 1
    return i if i > 0 and data[i] & 0xC0 != 0x80 else k


def reanchor_document(key: str, meta: Optional[Mapping[str, Any]], new: int) -> Dict[str, Any]:
    """The identity document ``meta`` of position ``key`` re-anchored at byte ``new`` (the tail hash
    re-taken there), read from the file at the document's path on this host. Raises
    :class:`~dstream_exactly_once.errors.ConfigurationError` naming ``key`` when there is no document,
    the file is gone, no longer starts with this identity's bytes, or is shorter than ``new``."""
    from ..errors import ConfigurationError

    if not isinstance(meta, Mapping) or not isinstance(meta.get("path"), str):
        raise ConfigurationError(f"{key}: the stored position has no file identity document; cannot re-anchor it")
    path = meta["path"]
    st = stat_file(path)
    if st is None:
        raise ConfigurationError(f"{key}: file {path!r} is gone; cannot re-anchor its position")
    view = FileView(st)
    try:
        sample = int(meta.get("sample_length") or 0)
        if sample and view.hash(0, sample) != meta.get("fingerprint"):
            raise ConfigurationError(f"{key}: {path!r} no longer starts with the bytes of this identity (rotated or "
                                     f"replaced); start the app once so it follows the file, then reset")
        tn = min(max(sample, int(meta.get("tail_length") or 0)), new)
        tail = view.hash(new - tn, tn)
    except OSError as exc:
        raise ConfigurationError(f"{key}: cannot read {path!r}: {exc}") from exc
    finally:
        view.close()
    if tail is None:
        raise ConfigurationError(f"{key}: {path!r} is shorter than the new position {new}")
    return {**meta, "tail": tail, "tail_length": tn}
