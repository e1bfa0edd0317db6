"""The ``aof`` source's offsets: the file planner's position documents as one JSON object.

Spark keeps one offset per micro-batch in the query's checkpoint (``offsets/<batch id>``); for the
``aof`` source it is::

    {"v": 1,
     "files": {"file:<id>": {"from": 0, "until": 4096, "meta": {<FileRange.position_meta()>}},
               "file:<id2>": {"from": 80, "until": 80, "meta": {...}, "gone": true}},
     "events": {"renames": 1, "lost_bytes": 0, ...}}

- ``files``: every file identity the planner follows. ``until`` is the next byte to read;
  ``from``/``until`` of an entry are the range of the batch that last changed it, so the ranges of
  a batch are exactly the entries that differ between its start and end offsets
  (:func:`ranges_between`). ``gone``: the identity's file disappeared (reported once).
- ``events``: the planner's event counters (:data:`~dstream_exactly_once.files._planner.COUNTERS`:
  renames, copies, compressed, truncations, replacements, disappearances, losses, lost_bytes,
  unreadable) summed over the query's batches; they appear in each query progress's
  ``sources[0].endOffset``.

Nothing here imports Spark.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence

from ...core._ranges import Position
from ...errors import ConfigurationError, OffsetRangeError
from .._ranges import FileRange

__all__ = ["DOC_VERSION", "admit", "advance", "doc_from_positions", "empty_doc", "entry_range", "gone_keys",
           "positions_of", "ranges_between"]

#: Version of the offset document.
DOC_VERSION = 1


def empty_doc() -> Dict[str, Any]:
    """The offset of a query that has read nothing (``starting.offsets`` applies to the files found)."""
    return {"v": DOC_VERSION, "files": {}, "events": {}}


def doc_from_positions(positions: Mapping[str, Position]) -> Dict[str, Any]:
    """The offset continuing after stored ``positions`` (``{"file:<id>": Position(next byte, meta)}``)."""
    files: Dict[str, Any] = {}
    for key, pos in sorted(positions.items()):
        if FileRange.parse_position_key(key) is None:
            raise ConfigurationError(f"stored position {key!r} is not a file position (want 'file:<id>'); the "
                                     f"app named by starting.positions.app reads another source")
        if not isinstance(pos.meta, dict):
            raise ConfigurationError(f"stored position {key!r} has no file identity document (got {pos.meta!r})")
        files[key] = {"from": pos.offset, "until": pos.offset, "meta": dict(pos.meta)}
    return {"v": DOC_VERSION, "files": files, "events": {}}


def _files(doc: Any) -> Dict[str, Any]:
    if not isinstance(doc, dict) or doc.get("v") != DOC_VERSION or not isinstance(doc.get("files"), dict):
        raise ConfigurationError(f"offset {doc!r} is not an aof offset document (version {DOC_VERSION}); was the "
                                 f"checkpoint written by another source?")
    return doc["files"]


def entry_range(key: str, entry: Any) -> FileRange:
    """The range (``from``/``until``, with the file's identity document) the offset entry ``key`` holds."""
    if not isinstance(entry, dict) or not isinstance(entry.get("meta"), dict):
        raise ConfigurationError(f"aof offset entry {key!r} is malformed: {entry!r}")
    file_id = FileRange.parse_position_key(key)
    if file_id is None:
        raise ConfigurationError(f"aof offset key {key!r} is not a file position key (want 'file:<id>')")
    body = {k: v for k, v in entry["meta"].items() if k != "v"}
    body.update(file_id=file_id, from_byte=entry.get("from"), until_byte=entry.get("until"))
    try:
        return FileRange.from_json_obj(body)
    except OffsetRangeError as exc:
        raise ConfigurationError(f"aof offset entry {key!r} is malformed: {exc}") from None


def positions_of(doc: Any) -> Dict[str, Position]:
    """``{position_key: Position(next byte, identity document)}`` of every identity in ``doc``."""
    return {key: Position(r.until_byte, r.position_meta()) for key, r in
            ((key, entry_range(key, entry)) for key, entry in sorted(_files(doc).items()))}


def gone_keys(doc: Any) -> List[str]:
    """The identities ``doc`` marks as gone (their disappearance was reported)."""
    return sorted(k for k, e in _files(doc).items() if isinstance(e, dict) and e.get("gone"))


def ranges_between(start: Any, end: Any) -> List[FileRange]:
    """The ranges of the batch from offset ``start`` to ``end``: the entries of ``end`` that differ from
    ``start``'s (each holds the range that changed it), without the empty ones."""
    before, after = _files(start), _files(end)
    out: List[FileRange] = []
    for key, entry in sorted(after.items()):
        if before.get(key) == entry:
            continue
        r = entry_range(key, entry)
        if r.until_byte > r.from_byte:
            out.append(r)
    return out


def advance(start: Dict[str, Any], ranges: Sequence[FileRange], gone: Iterable[str] = (),
            retired: Iterable[str] = (), events: Optional[Mapping[str, int]] = None) -> Dict[str, Any]:
    """The offset after ``start``: ``ranges`` applied, identities in ``gone`` marked, ``retired`` ones
    (superseded by a new generation, never matched again) dropped, ``events`` added to the counters."""
    files = {k: dict(v) for k, v in _files(start).items()}
    for key in retired:
        files.pop(key, None)
    for key in gone:
        if key in files:
            files[key]["gone"] = True
    for r in ranges:
        files[r.position_key] = {"from": r.from_byte, "until": r.until_byte, "meta": r.position_meta()}
    counters = dict(start.get("events") or {})
    for name, n in (events or {}).items():
        if n:
            counters[name] = counters.get(name, 0) + n
    return {"v": DOC_VERSION, "files": dict(sorted(files.items())), "events": dict(sorted(counters.items()))}


def admit(ranges: Sequence[FileRange], max_bytes: Optional[int] = None, max_files: Optional[int] = None,
          target: Optional[Mapping[str, int]] = None) -> List[FileRange]:
    """The ranges a batch takes, in planning order: whole ranges while the bytes stay within ``max_bytes``
    and the non-empty ranges within ``max_files`` (at least one range, so the query always moves); with
    ``target`` (``Trigger.AvailableNow``: ``{position_key: size}`` when the run began) only ranges of those
    identities that start below that size. Ranges without bytes (a renamed file's new path) always go."""
    out: List[FileRange] = []
    total = files = 0
    for r in ranges:
        n = r.until_byte - r.from_byte
        if target is not None and (r.position_key not in target or (n and r.from_byte >= target[r.position_key])):
            continue
        if n and files and ((max_bytes is not None and total + n > max_bytes)
                            or (max_files is not None and files + 1 > max_files)):
            continue
        if n:
            total, files = total + n, files + 1
        out.append(r)
    return out

