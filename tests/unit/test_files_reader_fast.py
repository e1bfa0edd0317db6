"""The reader's block-wise fast path gives exactly the general path's records and errors.

``FileRangeReader.read`` takes the fast path for ``str`` lines without file name or offset; the
general path is ``FileRangeReader._records``. Random files (multi-byte UTF-8, empty lines, CRLF,
long lines, bad UTF-8), random ranges (starting and ending anywhere, even inside a character),
small read blocks and decoded chunks and small ``line.max.bytes`` are read both ways and compared: the records, and
the error (type and message) with the records yielded before it.
"""

from __future__ import annotations

import dataclasses
import gzip
import itertools
import random
from typing import Any, List, Optional, Tuple

import pytest

from dstream_exactly_once.files import FilePlanner, FileRange, FileRangeReader, FileSourceOptions
from dstream_exactly_once.files import _reader as reader_mod
from dstream_exactly_once.files._identity import FileView

_TOKENS = (b"a", b"abc", b"log line ", b" ", b"\n", b"\n", b"\n\n", b"\r\n", b"\r", "é".encode(),
           "日本語".encode(), "😀".encode(), "€".encode())
_BAD = (b"\xff", b"\x80", b"\xe2\x82", b"\xf0\x9f\x98", b"\xc3")

Outcome = Tuple[List[Any], Optional[Tuple[type, str]]]


def _content(rng: random.Random, n_tokens: int, bad: bool) -> bytes:
    parts: List[bytes] = []
    for _ in range(n_tokens):
        x = rng.random()
        if bad and x < 0.02:
            parts.append(rng.choice(_BAD))
        elif x < 0.04:
            parts.append(rng.choice(_TOKENS[5:]) * rng.randrange(5, 60))  # a long line
        else:
            parts.append(rng.choice(_TOKENS))
    return b"".join(parts)


def _outcome(records: Any) -> Outcome:
    """The records an iterator yields and the error it stops with (type, message), if any."""
    out: List[Any] = []
    try:
        for rec in records:
            out.append(rec)
    except Exception as exc:  # noqa: BLE001 - the error is part of what is compared
        return out, (type(exc), str(exc))
    return out, None


def _planned(path: str, data: bytes) -> FileRange:
    with open(path, "wb") as f:
        f.write(data + b"\n")  # the planner reads up to the last complete line
    planner = FilePlanner(path, FileSourceOptions())
    planner.start({})
    (r,) = planner.plan()
    planner.close()
    return r


def _range(base: FileRange, lo: int, hi: int) -> FileRange:
    return dataclasses.replace(base, from_byte=lo, until_byte=hi, tail="", tail_length=0)


def _both(reader: FileRangeReader, r: FileRange) -> Tuple[Outcome, Outcome]:
    fast = reader.read(r)
    assert isinstance(fast, itertools.chain) or r.from_byte == r.until_byte  # the fast path is taken
    return _outcome(fast), _outcome(reader._records(r))


@pytest.mark.parametrize("seed", range(8))
def test_fast_path_equals_general_path_on_random_files_and_ranges(tmp_path, monkeypatch, seed):
    rng = random.Random(seed)
    bad = seed % 3 != 0
    data = _content(rng, rng.randrange(50, 1500), bad)
    path = str(tmp_path / "app.log")
    base = _planned(path, data)
    size = len(data) + 1
    compared = errors = 0
    sizes = ((1, 1), (2, 1), (7, 3), (16, 5), (61, 16), (256, 7), (256, 1 << 16), (1 << 20, 50), (1 << 20, 1 << 16))
    for block, chunk in sizes:  # read block, decoded chunk
        monkeypatch.setattr(reader_mod, "_BLOCK", block)
        monkeypatch.setattr(reader_mod, "_CHUNK", chunk)
        for decoding, line_max in itertools.product(("strict", "replace"), (4, 5, 8, 40, 1 << 20)):
            opts = FileSourceOptions(line_decoding=decoding, line_max_bytes=line_max)
            reader = FileRangeReader(path, opts)
            ranges = [_range(base, 0, size)]
            for _ in range(3):
                lo = rng.randrange(size)
                ranges.append(_range(base, lo, rng.randrange(lo, size + 1)))
            for r in ranges:
                fast, general = _both(reader, r)
                assert fast == general, (seed, block, chunk, decoding, line_max, r.from_byte, r.until_byte)
                compared += 1
                errors += general[1] is not None
    assert compared == len(sizes) * 10 * 4
    if bad:
        assert errors > 0  # strict decoding met bad UTF-8 at least once


def test_fast_path_equals_general_path_on_a_gzip_file_ending_inside_a_line(tmp_path, monkeypatch):
    rng = random.Random(99)
    data = _content(rng, 800, bad=True) + "tail 日本".encode()
    path = str(tmp_path / "app.log")
    base = _planned(path, data)
    with open(path, "wb") as f:  # the same content, compressed (as logrotate leaves it); no final newline
        f.write(gzip.compress(data))
    for block, chunk in ((5, 2), (64, 16), (1 << 20, 1 << 16)):
        monkeypatch.setattr(reader_mod, "_BLOCK", block)
        monkeypatch.setattr(reader_mod, "_CHUNK", chunk)
        for decoding in ("strict", "replace"):
            reader = FileRangeReader(path, FileSourceOptions(line_decoding=decoding, line_max_bytes=9))
            for lo in (0, 1, len(data) // 2, len(data) - 3):
                fast, general = _both(reader, _range(base, lo, len(data)))
                assert fast == general
            assert general == (["本"], None)  # the last line, without a newline, from inside the line


@pytest.mark.parametrize("long_line", [0, 700])
def test_file_shrunk_while_reading_fails_the_same_way(tmp_path, monkeypatch, long_line):
    # a long line (bytes 1690-2390) cut by the block ending at 1800: the general path yields its
    # first piece before the read at 1800 fails
    data = "".join(f"line {i} é\n" for i in range(150)).encode() + b"x" * long_line
    data += "".join(f"line {i} é\n" for i in range(200)).encode()
    path = str(tmp_path / "app.log")
    base = _planned(path, data[:-1])
    real_read = FileView.read
    monkeypatch.setattr(FileView, "read",
                        lambda self, start, n: b"" if start >= 1750 and n > 16 else real_read(self, start, n))
    monkeypatch.setattr(reader_mod, "_BLOCK", 300)
    monkeypatch.setattr(reader_mod, "_CHUNK", 64)
    reader = FileRangeReader(path, FileSourceOptions(line_max_bytes=100, fail_on_data_loss=True))
    fast, general = _both(reader, _range(base, 0, len(data)))
    assert fast == general
    assert (fast[0][-1] == "x" * 100) == bool(long_line)
    assert general[1] is not None and general[1][0].__name__ == "DataLossError"
    assert "the file ended at byte 1800 while reading" in general[1][1]
    # the skip policy: the same records, then the rest of the range (from the unfinished line) reported
    reported: List[Any] = []
    skipping = FileRangeReader(path, FileSourceOptions(line_max_bytes=100), on_data_loss=reported.append)
    fast_skip, general_skip = _both(skipping, _range(base, 0, len(data)))
    assert fast_skip == general_skip == (fast[0], None)
    lost = {(d.start, d.end) for d in reported}
    assert len(lost) == 1 and lost.pop()[1] == len(data)
    assert all("the file ended at byte 1800" in d.reason for d in reported)


def test_valid_utf8_with_short_lines_never_takes_the_careful_path(tmp_path, monkeypatch):
    data = "".join(f"{i} café 日本語 😀\r\n\n" for i in range(3000)).encode()
    path = str(tmp_path / "app.log")
    base = _planned(path, data[:-1])
    reader = FileRangeReader(path, FileSourceOptions())

    def careful(*args: Any) -> None:
        raise AssertionError("the general path was used for valid UTF-8")

    monkeypatch.setattr(reader, "_careful", careful)
    monkeypatch.setattr(reader, "_records_from", careful)
    monkeypatch.setattr(reader_mod, "_BLOCK", 4096)
    monkeypatch.setattr(reader_mod, "_CHUNK", 1000)
    assert list(reader.read(_range(base, 0, len(data)))) == data.decode().split("\n")[:-1]


def test_bad_utf8_under_strict_names_file_and_byte_on_the_fast_path(tmp_path):
    data = "ok é\n".encode() * 1000 + b"bad \xe2\x82 here\nnext\n"
    path = str(tmp_path / "app.log")
    base = _planned(path, data[:-1])
    reader = FileRangeReader(path, FileSourceOptions())
    records, error = _outcome(reader.read(_range(base, 0, len(data))))
    assert records == ["ok é"] * 1000
    assert error is not None
    assert error[1].startswith(f"{path}: undecodable UTF-8 at byte {6000 + 4} (line at byte 6000, ")
    replaced = list(FileRangeReader(path, FileSourceOptions(line_decoding="replace")).read(_range(base, 0, len(data))))
    assert replaced[-2:] == ["bad \ufffd here", "next"]


@pytest.mark.parametrize("opts", [{"line.decoding": "bytes"}, {"include.file.name": True},
                                  {"include.byte.offset": True}])
def test_bytes_and_tuple_records_use_the_general_path(tmp_path, opts):
    path = str(tmp_path / "app.log")
    base = _planned(path, b"x\ny")
    reader = FileRangeReader(path, FileSourceOptions.from_mapping(opts))
    assert not reader._fast_path_applies()
    assert not isinstance(reader.read(base), itertools.chain)
    assert len(list(reader.read(base))) == 2
