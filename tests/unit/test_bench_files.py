"""The file benchmark's cases count the same lines on a small input (no timing asserted, no Spark)."""

from __future__ import annotations

from pathlib import Path

from bench.files import count_bare, count_reader, generate, plan_ranges


def test_generated_lines_are_log_like_with_multibyte_utf8(tmp_path: Path) -> None:
    data = generate(str(tmp_path), n_files=3, bytes_per_file=20_000)
    assert len(data.paths) == 3
    assert 100 <= data.bytes / data.lines <= 210
    assert 0 < data.multibyte_lines < data.lines
    assert data.chars < data.bytes - data.lines  # multi-byte characters: fewer characters than bytes
    for p in data.paths:
        assert Path(p).read_bytes().endswith(b"\n")


def test_bare_loop_and_file_source_count_and_decode_the_same_lines(tmp_path: Path) -> None:
    data = generate(str(tmp_path), n_files=3, bytes_per_file=20_000)
    assert count_bare(data.paths) == data.lines
    assert count_reader(data.glob) == data.lines
    ranges, reader = plan_ranges(data.glob)
    assert len(ranges) == 3
    assert sorted(r.path for r in ranges) == sorted(data.paths)
    for r in ranges:  # the same str lines, file by file (ranges come in identity order, not path order)
        with open(r.path, encoding="utf-8", newline="\n") as f:
            assert list(reader.read(r)) == [line[:-1] for line in f]
    assert sum(len(x) for r in ranges for x in reader.read(r)) == data.chars
