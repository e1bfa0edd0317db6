"""Executor-side reading of one :class:`~.ranges.FileRange`: exactly its bytes, as lines.

Before reading, the reader checks that the file holds the planned bytes: its first bytes hash to
the range's fingerprint and the bytes before ``until_byte`` to its tail hash, and it is at least
``until_byte`` long. The planned path is tried first; if that file is no longer the planned one
(renamed, rotated, compressed since planning) the identity is looked up among the pattern's files
(same device/inode or a known copy first). If no file holds the bytes, the task fails with a
:class:`~dstream_exactly_once.errors.DataLossError` naming the range — it never reads another file.

Records (deterministic: the same range always yields the same records):

- a line without its ``\\n`` (a ``\\r`` before it is kept), as ``str`` (``line.decoding`` ``strict``
  or ``replace``) or ``bytes`` (``bytes``);
- a line longer than ``line.max.bytes`` becomes several records of at most that many bytes, cut
  before a UTF-8 character's first byte (``line.overflow=split``; the planner enforces ``fail``);
- with ``include.file.name`` and/or ``include.byte.offset``: a tuple ``(path, line)``,
  ``(offset, line)`` or ``(path, offset, line)`` — ``path`` is the path the range was planned from,
  ``offset`` the byte offset of the record's first byte.
"""

from __future__ import annotations

from typing import Any, Iterator, List, Optional

from ..core.ranges import SourceRange
from ..core.source import RangeReader
from ..errors import ConfigurationError, DataLossError, DecodeError
from .identity import FileStat, FileView, stat_file, utf8_cut
from .options import FileSourceOptions
from .paths import PathPattern
from .ranges import FileRange

__all__ = ["FileRangeReader"]

_BLOCK = 1 << 20


class FileRangeReader(RangeReader):
    """Reads :class:`FileRange` s of the files named by ``path`` (picklable: holds only configuration)."""

    def __init__(self, path: str, options: Optional[FileSourceOptions] = None) -> None:
        self.options = options if options is not None else FileSourceOptions()
        self.pattern = PathPattern.of(path, self.options)

    def read(self, r: SourceRange) -> Iterator[Any]:
        if not isinstance(r, FileRange):
            raise ConfigurationError(f"FileRangeReader reads FileRange values, got {r!r}")
        if r.until_byte == r.from_byte:
            return iter(())
        return self._records(r)

    # ---------------------------------------------------------------- locating the file
    def locate(self, r: FileRange) -> FileView:
        """An open view of the file that holds ``r``'s bytes (the caller closes it)."""
        first = stat_file(r.path)
        candidates: List[FileStat] = [first] if first is not None else []
        view = self._first_holding(r, candidates)
        if view is None:
            known = {(r.dev, r.inode), *((a[0], a[1]) for a in r.aliases)}
            others = [st for st in self.pattern.scan() if first is None or st.node != first.node]
            others.sort(key=lambda st: (st.node not in known, st.compressed, st.path))
            view = self._first_holding(r, others)
        if view is None:
            raise DataLossError(f"cannot read {r.describe()}: the file at {r.path} is not the planned one "
                                f"(fingerprint, tail or length differ, or it is gone) and no file named by "
                                f"{self.pattern.path} holds those bytes")
        return view

    @staticmethod
    def _first_holding(r: FileRange, candidates: List[FileStat]) -> Optional[FileView]:
        for st in candidates:
            if not r.sample_length and st.node != (r.dev, r.inode):
                continue  # without fingerprints only the device/inode identifies a file
            v = FileView(st)
            size = v.size
            if (size is not None and size >= r.until_byte
                    and v.hash(0, r.sample_length) == r.fingerprint
                    and v.hash(r.until_byte - r.tail_length, r.tail_length) == r.tail):
                return v
            v.close()
        return None

    # ---------------------------------------------------------------- lines
    def _records(self, r: FileRange) -> Iterator[Any]:
        with self.locate(r) as view:
            for offset, raw in self._lines(view, r):
                yield self._record(r, offset, raw)

    def _lines(self, view: FileView, r: FileRange) -> Iterator[tuple[int, bytes]]:
        """``(offset, bytes)`` of each record of ``r``: lines, split when longer than ``line.max.bytes``."""
        line_max = self.options.line_max_bytes
        pos, end = r.from_byte, r.until_byte
        buf, buf_start = b"", pos
        while pos < end:
            block = view.read(pos, min(_BLOCK, end - pos))
            if not block:
                raise DataLossError(f"{r.describe()}: the file ended at byte {pos} while reading (shrunk after "
                                    f"it was checked)")
            pos += len(block)
            *lines, buf = (buf + block).split(b"\n")
            for seg in lines:
                yield from _pieces(seg, buf_start, line_max)
                buf_start += len(seg) + 1
            while len(buf) > line_max:  # a long line: emit its pieces as soon as they are known
                k = utf8_cut(buf, line_max)
                yield buf_start, buf[:k]
                buf, buf_start = buf[k:], buf_start + k
        if buf:  # the range ends inside a line: a split long line, or a compressed file's last line
            yield from _pieces(buf, buf_start, line_max)

    def _record(self, r: FileRange, offset: int, raw: bytes) -> Any:
        mode = self.options.line_decoding
        line: Any
        if mode == "bytes":
            line = raw
        else:
            try:
                line = raw.decode("utf-8", errors=mode)
            except UnicodeDecodeError as exc:
                raise DecodeError(f"{r.path}: undecodable UTF-8 at byte {offset + exc.start} (line at byte "
                                  f"{offset}, {r.position_key}); set line.decoding=replace or bytes to accept "
                                  f"it") from None
        o = self.options
        if o.include_file_name and o.include_byte_offset:
            return (r.path, offset, line)
        if o.include_file_name:
            return (r.path, line)
        if o.include_byte_offset:
            return (offset, line)
        return line


def _pieces(seg: bytes, offset: int, line_max: int) -> Iterator[tuple[int, bytes]]:
    while len(seg) > line_max:
        k = utf8_cut(seg, line_max)
        yield offset, seg[:k]
        seg, offset = seg[k:], offset + k
    yield offset, seg
