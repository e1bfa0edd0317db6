"""Executor-side reading of one :class:`~._ranges.FileRange`: exactly its bytes, as lines.

Before reading, the reader checks that the file holds the planned bytes: its first bytes hash to
the range's fingerprint and the bytes before ``until_byte`` to its tail hash, and it is at least
``until_byte`` long. The planned path is tried first; if that file is no longer the planned one
(renamed, rotated, compressed since planning) the identity is looked up among the pattern's files
(same device/inode or a known copy first), listing the pattern again on a miss, since a file renamed
while a directory is listed is under neither name the listing saw (:mod:`._locate`). It never reads
another file.

If no listing finds a file holding the bytes (a copytruncate truncated bytes no copy holds, the file
was deleted or compressed out of the pattern, a compressed file cannot be read), or the file shrinks
while it is read, the option ``fail.on.data.loss`` decides: ``true`` fails the task with a
:class:`~dstream_exactly_once.errors.DataLossError` naming the range; ``false`` yields what was read
and reports the rest as a :class:`~dstream_exactly_once.core._loss.DataLoss` to the injected
``on_data_loss`` callback (the Spark side records it beside the commit), or — without a callback —
logs it at WARN.

Records (deterministic: the same range always yields the same records):

- a line without its ``\\n`` (a ``\\r`` before it is kept), as ``str`` (``line.decoding`` ``strict``
  or ``replace``) or ``bytes`` (``bytes``);
- a line longer than ``line.max.bytes`` becomes several records of at most that many bytes, cut
  before a UTF-8 character's first byte (``line.overflow=split``; the planner enforces ``fail``);
- with ``include.file.name`` and/or ``include.byte.offset``: a tuple ``(path, line)``,
  ``(offset, line)`` or ``(path, offset, line)`` — ``path`` is the path the range was planned from,
  ``offset`` the byte offset of the record's first byte.

Two paths give the same records. The general path splits and decodes line by line. With the
default record shape (``str`` lines under ``strict`` or ``replace``, no file name or byte offset)
a fast path decodes up to 64 KiB of whole lines at once and splits the text on ``"\\n"``; a chunk
that holds a line longer than ``line.max.bytes`` or bytes that are not UTF-8 goes through the
general path (so a split line, a U+FFFD and a decode error's file and byte are exactly as there),
and so does the rest of the range after a read block (1 MiB) that ends inside such a long line.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import replace
from itertools import chain
from typing import Any, Iterable, Iterator, Optional

from ..core._loss import DataLoss, LossCallback
from ..core._ranges import SourceRange
from ..core._source import RangeReader
from ..errors import ConfigurationError, DataLossError, DecodeError
from ._identity import FileView, utf8_cut
from ._locate import locate_range
from ._options import FileSourceOptions
from ._paths import PathPattern
from ._ranges import FileRange

log = logging.getLogger(__name__)

__all__ = ["FileRangeReader"]

_BLOCK = 1 << 20
_CHUNK = 1 << 16  # bytes the fast path decodes at once (see FileRangeReader._blocks)


class FileRangeReader(RangeReader):
    """Reads :class:`FileRange` s of the files named by ``path`` (picklable: holds only configuration).

    ``on_data_loss`` (picklable) is told of each lost part of a range under ``fail.on.data.loss=false``.
    """

    def __init__(self, path: str, options: Optional[FileSourceOptions] = None,
                 on_data_loss: Optional[LossCallback] = None) -> None:
        self.options = options if options is not None else FileSourceOptions()
        self.pattern = PathPattern.of(path, self.options)
        self.on_data_loss = on_data_loss

    def reporting_to(self, on_data_loss: Optional[LossCallback]) -> FileRangeReader:
        """A copy of this reader that reports lost bytes to ``on_data_loss``."""
        out = copy.copy(self)
        out.on_data_loss = on_data_loss
        return out

    def read(self, r: SourceRange) -> Iterator[Any]:
        if not isinstance(r, FileRange):
            raise ConfigurationError(f"FileRangeReader reads FileRange values, got {r!r}")
        if r.until_byte == r.from_byte:
            return iter(())
        if self._fast_path_applies():
            return chain.from_iterable(self._blocks(r))
        return self._records(r)

    def can_split(self, r: SourceRange) -> bool:
        """Uncompressed files split at any byte (:meth:`read_part` finds the lines); compressed never."""
        return isinstance(r, FileRange) and not r.compressed

    def read_part(self, r: SourceRange, start: int, end: int) -> Iterator[Any]:
        """The records of the lines of ``r`` that *start* in ``[start, end)`` (Hadoop's
        LineRecordReader rule): a piece starting inside a line skips to the next line, and a piece
        reads past ``end`` to finish its last line. The pieces of a range together yield each of its
        records once. The whole file is checked as for :meth:`read`; a loss is reported as the
        piece's part of ``r``."""
        if not isinstance(r, FileRange):
            raise ConfigurationError(f"FileRangeReader reads FileRange values, got {r!r}")
        if (start, end) == (r.from_byte, r.until_byte):
            return self.read(r)
        if r.compressed or not r.from_byte <= start <= end <= r.until_byte:
            raise ConfigurationError(f"cannot read bytes [{start} -> {end}) of {r.describe()} as a piece "
                                     f"(compressed files are read whole; a piece lies inside its range)")
        return self._part(r, start, end)

    def _part(self, r: FileRange, start: int, end: int) -> Iterator[Any]:
        piece = _piece(r, start, end)
        located = self._located(r, piece)
        if located is None:
            return
        with located as view:
            first = _line_start(view, start, r)
            last = _line_start(view, end, r)
            if first >= last:
                return
            yield from self._records_from(view, _piece(r, first, last), first, b"", r)

    def _fast_path_applies(self) -> bool:
        """Whether records are bare ``str`` lines, which the block-wise fast path produces."""
        o = self.options
        return o.line_decoding != "bytes" and not o.include_file_name and not o.include_byte_offset

    # ---------------------------------------------------------------- locating the file
    def locate(self, r: FileRange) -> FileView:
        """An open view of the file that holds ``r``'s bytes (the caller closes it): the planned path,
        else any file the pattern names, listed again on a miss (:func:`~._locate.locate_range`)."""
        return locate_range(r, self.pattern)

    # ---------------------------------------------------------------- data loss
    def _located(self, r: FileRange, piece: Optional[FileRange] = None) -> Optional[FileView]:
        """:meth:`locate`, or ``None`` when no file holds the range and the loss policy skips it
        (reported as the loss of ``piece``, by default all of ``r``)."""
        try:
            return self.locate(r)
        except DataLossError as exc:
            if self.options.fail_on_data_loss:
                raise
            part = piece if piece is not None else r
            self._lost(part, part.from_byte, str(exc), r)
            return None

    def _shrunk(self, r: FileRange, pos: int, partial: int, whole: Optional[FileRange] = None) -> None:
        """The file ended at ``pos`` while reading (``partial`` bytes of an unfinished line before it)."""
        message = f"{r.describe()}: the file ended at byte {pos} while reading (shrunk after it was checked)"
        if self.options.fail_on_data_loss:
            raise DataLossError(message)
        self._lost(r, pos - partial, message, whole)

    def _lost(self, r: FileRange, start: int, reason: str, whole: Optional[FileRange] = None) -> None:
        """Report bytes ``[start, until_byte)`` of ``r`` (a range, or a piece of the range ``whole``) as
        lost (``fail.on.data.loss=false``)."""
        w = whole if whole is not None else r
        loss = DataLoss(w.position_key, w.from_byte, w.until_byte, start, r.until_byte, "bytes", r.path, reason)
        if self.on_data_loss is None:
            log.warning("data loss (fail.on.data.loss=false): skipping %s", loss.describe())
            return
        log.info("data loss (fail.on.data.loss=false): skipping %s", loss.describe())
        self.on_data_loss(loss)

    # ---------------------------------------------------------------- fast path
    def _blocks(self, r: FileRange) -> Iterator[Iterable[Any]]:
        """The records of ``r`` as one iterable per chunk of whole lines (a ``list`` of lines when fast).

        Reads exactly as the general path does (the same blocks, strictly forward: a gzip view
        re-decompresses on a backward seek) and yields the same records before any error. Decodes
        ``_CHUNK`` bytes at a time: a larger text falls out of the CPU cache (one 4-byte character
        makes the whole decoded text 4 bytes per character), which costs more than the calls saved.
        """
        line_max = self.options.line_max_bytes
        located = self._located(r)
        if located is None:
            return
        with located as view:
            pos, end = r.from_byte, r.until_byte
            buf = b""  # the start of a line cut by the previous block; it begins at pos - len(buf)
            while pos < end:
                block = view.read(pos, min(_BLOCK, end - pos))
                if not block:
                    self._shrunk(r, pos, len(buf))
                    return
                i, n = 0, len(block)
                while i < n:
                    j = block.rfind(b"\n", i, i + _CHUNK) + 1
                    if j == 0:  # no whole line in the next _CHUNK bytes: up to the end of the line
                        j = block.find(b"\n", i + _CHUNK) + 1
                        if j == 0:
                            break
                    if buf:
                        yield self._chunk_records(r, buf + block[i:j], pos - len(buf), line_max)
                        buf = b""
                    else:
                        yield self._chunk_records(r, block[i:j], pos + i, line_max)
                    i = j
                buf = buf + block[i:] if buf else block[i:]
                pos += n
                if len(buf) > line_max:  # the general path emits such a line's pieces before reading on
                    yield self._records_from(view, r, pos, buf)
                    return
            if buf:  # the range ends inside a line: a compressed file's last line
                yield self._careful(r, buf + b"\n", pos - len(buf), line_max)

    def _chunk_records(self, r: FileRange, chunk: bytes, start: int, line_max: int) -> Iterable[Any]:
        """The records of ``chunk`` (whole lines, each ending in ``\\n``; its first byte at ``start``)."""
        if len(chunk) - 1 > line_max and max(map(len, chunk.split(b"\n"))) > line_max:
            return self._careful(r, chunk, start, line_max)
        try:
            lines = chunk.decode("utf-8").split("\n")
        except UnicodeDecodeError:
            return self._careful(r, chunk, start, line_max)
        lines.pop()  # the empty text after the chunk's last newline
        return lines

    def _careful(self, r: FileRange, chunk: bytes, start: int, line_max: int) -> Iterator[Any]:
        """The general path's records of ``chunk`` (whole lines), line by line."""
        segs = chunk.split(b"\n")
        segs.pop()
        for seg in segs:
            for offset, raw in _pieces(seg, start, line_max):
                yield self._record(r, offset, raw)
            start += len(seg) + 1

    # ---------------------------------------------------------------- general path
    def _records(self, r: FileRange) -> Iterator[Any]:
        located = self._located(r)
        if located is None:
            return
        with located as view:
            yield from self._records_from(view, r, r.from_byte, b"")

    def _records_from(self, view: FileView, r: FileRange, pos: int, buf: bytes,
                      whole: Optional[FileRange] = None) -> Iterator[Any]:
        for offset, raw in self._lines(view, r, pos, buf, whole):
            yield self._record(r, offset, raw)

    def _lines(self, view: FileView, r: FileRange, pos: int, buf: bytes,
               whole: Optional[FileRange] = None) -> Iterator[tuple[int, bytes]]:
        """``(offset, bytes)`` of each record of ``r`` from ``pos`` on, after ``buf`` (the bytes just before
        ``pos`` that start a line): lines, split when longer than ``line.max.bytes``."""
        line_max = self.options.line_max_bytes
        end = r.until_byte
        buf_start = pos - len(buf)
        while True:
            while len(buf) > line_max:  # a long line: emit its pieces as soon as they are known
                k = utf8_cut(buf, line_max)
                yield buf_start, buf[:k]
                buf, buf_start = buf[k:], buf_start + k
            if pos >= end:
                break
            block = view.read(pos, min(_BLOCK, end - pos))
            if not block:
                self._shrunk(r, pos, len(buf), whole)
                return
            pos += len(block)
            *lines, buf = (buf + block).split(b"\n")
            for seg in lines:
                yield from _pieces(seg, buf_start, line_max)
                buf_start += len(seg) + 1
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


def _line_start(view: FileView, pos: int, r: FileRange) -> int:
    """The first line start at or after ``pos`` within ``r`` (``pos`` itself when a line starts there;
    ``r.until_byte`` when none does before it)."""
    if pos <= r.from_byte or pos >= r.until_byte:
        return min(max(pos, r.from_byte), r.until_byte)
    at = pos - 1
    while at < r.until_byte:
        block = view.read(at, min(_CHUNK, r.until_byte - at))
        if not block:
            return r.until_byte
        k = block.find(b"\n")
        if k >= 0:
            return at + k + 1
        at += len(block)
    return r.until_byte


def _piece(r: FileRange, start: int, end: int) -> FileRange:
    """``r`` narrowed to bytes ``[start, end)`` (for reading and messages; its identity is checked on ``r``)."""
    return replace(r, from_byte=start, until_byte=end, tail="", tail_length=0)
