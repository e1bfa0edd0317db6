"""The files behind stored file positions as the host running ``dstream-eo`` sees them now.

A stored position's identity document names the file's path, device/inode, fingerprint and the tail
hash before the position (:mod:`._identity`). Here each identity is looked for where the planner would
find it: at its path, else — rotated by rename, by copy or compressed — among the files of the same
directory, recognised by its bytes (the fingerprint and the tail hash at the stored position) or, with
fingerprints off, by its device/inode. The live lag is the content size found less the position.
A file at a tracked path that no identity claims (the new file after a rotation) is unread as a whole.

What cannot be measured here says why: a file node-local to another host, or not found (gone, or
not visible from this host); the row then keeps the size the driver recorded.
"""

from __future__ import annotations

import os
import socket
from typing import Any, Dict, Iterable, List, Mapping, Optional, Set, Tuple

from ..core._range_display import RangeDisplay, register_range_display
from ..core._ranges import Position
from ._identity import FileStat, FileView, stat_file

__all__ = ["FileRangeDisplay", "live_rows"]

#: at most this many files of a directory are looked at for a rotated identity
MAX_CANDIDATES = 1000

Node = Tuple[int, int]


def _holds(st: FileStat, meta: Mapping[str, Any], offset: int) -> bool:
    """Whether ``st`` holds the identity's bytes up to ``offset`` (fingerprint and tail hash; with
    fingerprints off, the same device/inode and at least ``offset`` bytes)."""
    view = FileView(st)
    try:
        size = view.size
        if size is None or size < offset:
            return False
        sample = int(meta.get("sample_length") or 0)
        if not sample:
            return st.node == (meta.get("dev"), meta.get("inode"))
        if view.hash(0, sample) != meta.get("fingerprint"):
            return False
        tail_n = int(meta.get("tail_length") or 0)
        return not meta.get("tail") or view.hash(offset - tail_n, tail_n) == meta.get("tail")
    except (OSError, EOFError, ValueError):
        return False
    finally:
        view.close()


def _siblings(path: str) -> List[FileStat]:
    """The regular files beside ``path`` (its rotated names), those sharing its name's start first."""
    directory, base = os.path.split(path)
    try:
        names = sorted(os.listdir(directory), key=lambda n: (not n.startswith(base), n))[:MAX_CANDIDATES]
    except OSError:
        return []
    found = (stat_file(os.path.join(directory, n)) for n in names if os.path.join(directory, n) != path)
    return [st for st in found if st is not None]


def locate(meta: Mapping[str, Any], offset: int) -> Optional[FileStat]:
    """The file holding the identity of ``meta`` up to ``offset`` on this host, or ``None``."""
    path = meta.get("path")
    if not isinstance(path, str):
        return None
    here = stat_file(path)
    if here is not None and _holds(here, meta, offset):
        return here
    siblings = _siblings(path)
    node = (meta.get("dev"), meta.get("inode"))
    for st in sorted(siblings, key=lambda s: s.node != node):  # a rename keeps the inode: try it first
        if _holds(st, meta, offset):
            return st
    return None


def _content_size(st: FileStat) -> Optional[int]:
    view = FileView(st)
    try:
        return view.size
    finally:
        view.close()


def _unreadable(meta: Mapping[str, Any], here: str) -> Optional[str]:
    host = meta.get("host")
    if isinstance(host, str) and host != here:
        return f"not measured: the file is node-local to host {host} (run dstream-eo there for its live size)"
    return None


def live_rows(positions: Mapping[str, Position]) -> Dict[str, Dict[str, Any]]:
    """Per stored file position: ``latest`` (the content size now), ``lag``, ``live``, ``live_path``
    and ``lag_note`` — or, where it cannot be measured here, ``live`` false and ``live_note`` saying why
    (the row keeps what the store knows); plus a row keyed ``new:<path>`` for each unclaimed file at a tracked path."""
    here = socket.gethostname()
    out: Dict[str, Dict[str, Any]] = {}
    claimed: Set[Node] = set()
    tracked: Set[str] = set()
    for key, pos in positions.items():
        meta = pos.meta if isinstance(pos.meta, dict) else {}
        path = meta.get("path")
        if not isinstance(path, str):
            continue
        why = _unreadable(meta, here)
        if why is not None:
            out[key] = {"live": False, "live_note": why}
            continue
        tracked.add(path)
        st = locate(meta, pos.offset)
        size = None if st is None else _content_size(st)
        if st is None or size is None:
            out[key] = {"live": False, "live_note": f"not measured: {path} holds another file or none, and no file "
                                                    f"beside it holds this one's bytes (gone, or not visible from "
                                                    f"host {here})"}
            continue
        claimed.add(st.node)
        row: Dict[str, Any] = {"live": True, "latest": size, "lag": max(size - pos.offset, 0), "live_path": st.path,
                               "lag_note": "live: the file's size now, read on this host"}
        if st.path != path:
            row["rotated"] = True
            row["lag_note"] = f"live: rotated, now {st.path}; its size now, read on this host"
        out[key] = row
    for path in sorted(tracked):
        out.update(_new_file(path, claimed))
    return out


def _new_file(path: str, claimed: Iterable[Node]) -> Dict[str, Dict[str, Any]]:
    """A row for the file at ``path`` when no stored identity is that file (it replaced a rotated one)."""
    st = stat_file(path)
    if st is None or st.node in set(claimed):
        return {}
    size = _content_size(st)
    if not size:
        return {}
    return {f"new:{path}": {"source": "file", "path": path, "position": None, "earliest": 0, "latest": size,
                            "lag": size, "live": True, "live_path": path,
                            "lag_note": "live: a file no stored position covers yet (after a rotation): all unread"}}


class FileRangeDisplay(RangeDisplay):
    """How the CLI shows stored file positions (progress records keep them flat, by position key)."""

    kind = "file"

    def position_row(self, key: str, position: Position) -> Dict[str, Any]:
        """A stored file position: the path, the next byte, and the lag against the content size the
        driver recorded when it planned (``seen_size`` in the position document), from the store alone;
        :meth:`live_rows` measures the file itself where this host can read it."""
        meta = position.meta if isinstance(position.meta, dict) else {}
        path, seen = meta.get("path"), meta.get("seen_size")
        row: Dict[str, Any] = {"source": self.kind, "path": path if isinstance(path, str) else None,
                               "position": position.offset, "earliest": 0}
        if isinstance(seen, int) and not isinstance(seen, bool) and seen > 0:
            latest = max(seen, position.offset)
            row.update(latest=latest, lag=latest - position.offset,
                       lag_note="against the size the driver recorded when it last planned this file")
        else:
            row.update(latest=None, lag=None, lag_note="not known: the store holds no size the driver recorded")
        return row

    def live_rows(self, positions: Mapping[str, Position]) -> Dict[str, Dict[str, Any]]:
        """Each position's file as this host sees it now: its current content size and the lag
        against it, following a rename or a copy (rotation) by identity, and a row for each file at a
        tracked path that no position claims yet (written after a rotation): :func:`live_rows`."""
        return live_rows(positions)


register_range_display(FileRangeDisplay())
