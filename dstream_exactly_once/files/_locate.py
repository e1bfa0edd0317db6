"""Finding the file that holds a planned range's bytes, wherever rotation moved them (executor side).

A range names the path it was planned from, the file's device/inode (and known copies) and the
hashes of its first bytes and of the bytes just before its end (:mod:`._identity`). Between planning
and reading — a replayed batch may be read long after its plan, by another driver — rotation may
have renamed the file several times, copied it (copytruncate) or compressed it. :func:`locate_range`
tries the planned path first, then every file the pattern names (the planned device/inode and its
known copies first, plain files before compressed ones), and returns the first whose content holds
the range's bytes (a gzip file is read decompressed).

One listing of a directory is not a snapshot: a file renamed between the listing and its ``stat``
(``service.log.3`` becoming ``service.log.4`` while the names are read) is under neither name the
listing saw. So a miss is not yet a loss: the pattern is listed again, up to :data:`LISTINGS` times
with short pauses, each listing examining only the files it has not examined unchanged. Only when no
listing finds the bytes is :class:`~dstream_exactly_once.errors.DataLossError` raised, naming the
range, the pattern, how many listings were made and every file examined with why it does not hold
the bytes (shorter, other first bytes, other bytes before the range's end, or a compressed file whose
content cannot be read, e.g. one still being written).
"""

from __future__ import annotations

import time
from typing import Callable, Dict, List, Optional, Tuple

from ..errors import DataLossError
from ._identity import FileStat, FileView, stat_file
from ._paths import PathPattern
from ._ranges import FileRange

__all__ = ["LISTINGS", "locate_range"]

#: How many times the pattern is listed before a range's bytes are declared lost.
LISTINGS = 4
#: Seconds before the second listing; doubled before each further one (0.05 + 0.1 + 0.2 in all).
RELIST_PAUSE = 0.05
#: Files named in a loss message (the rest are counted).
_NAMED = 12


def locate_range(r: FileRange, pattern: PathPattern, *, listings: int = LISTINGS,
                 pause: float = RELIST_PAUSE, sleep: Callable[[float], None] = time.sleep) -> FileView:
    """An open view of the file holding ``r``'s bytes (the caller closes it); raises
    :class:`DataLossError` naming where it looked when no listing of ``pattern`` finds one."""
    looked: Dict[Tuple[str, int, int, int, int], str] = {}  # (path, dev, inode, size, mtime) -> why not
    known = {(r.dev, r.inode), *((a[0], a[1]) for a in r.aliases)}
    first = stat_file(r.path)
    if first is not None:
        view = _holding(r, first, looked)
        if view is not None:
            return view
    made = 0
    for made in range(1, max(1, listings) + 1):
        if made > 1:
            sleep(pause * 2 ** (made - 2))
        fresh = [st for st in pattern.scan() if _look(st) not in looked]
        fresh.sort(key=lambda st: (st.node not in known, st.compressed, st.path))
        for st in fresh:
            view = _holding(r, st, looked)
            if view is not None:
                return view
    raise DataLossError(_message(r, pattern, made, first, looked))


def _look(st: FileStat) -> Tuple[str, int, int, int, int]:
    return (st.path, st.dev, st.inode, st.disk_size, st.mtime_ns)


def _holding(r: FileRange, st: FileStat, looked: Dict[Tuple[str, int, int, int, int], str]) -> Optional[FileView]:
    """An open view of ``st`` if it holds ``r``'s bytes; otherwise records why not in ``looked``."""
    if not r.sample_length and st.node != (r.dev, r.inode):
        looked[_look(st)] = "another device/inode (a range without a fingerprint is known by its inode only)"
        return None
    v = FileView(st)
    size = v.size
    why = None
    if size is None:
        why = "a compressed file whose content cannot be read (damaged, or still being written)"
    elif size < r.until_byte:
        why = f"{size} bytes{' decompressed' if st.compressed else ''}, shorter than byte {r.until_byte}"
    elif v.hash(0, r.sample_length) != r.fingerprint:
        why = "other first bytes (fingerprint differs)"
    elif v.hash(r.until_byte - r.tail_length, r.tail_length) != r.tail:
        why = f"other bytes before byte {r.until_byte} (tail hash differs)"
    if why is None:
        return v
    v.close()
    looked[_look(st)] = why
    return None


def _message(r: FileRange, pattern: PathPattern, listings: int, first: Optional[FileStat],
             looked: Dict[Tuple[str, int, int, int, int], str]) -> str:
    where: List[str] = [] if first is not None else [f"{r.path}: gone"]
    where.extend(f"{path}: {why}" for (path, *_), why in sorted(looked.items()))
    named = "; ".join(where[:_NAMED]) + (f"; and {len(where) - _NAMED} more" if len(where) > _NAMED else "")
    return (f"cannot read {r.describe()}: the file at {r.path} is not the planned one and no file named by "
            f"{pattern.path} holds those bytes ({listings} listing{'s' if listings != 1 else ''} of the pattern; "
            f"looked at {named or 'no file: the pattern names none'})")
