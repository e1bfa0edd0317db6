"""The file source's planning table, case by case, on real temporary files (plan -> read -> commit)."""

from __future__ import annotations

import gzip
import os
import shutil

import pytest

from dstream_exactly_once.core._ranges import Position
from dstream_exactly_once.errors import ConfigurationError, DataLossError, DecodeError
from dstream_exactly_once.files import FilePlanner, FileSourceOptions

from ._files_harness import Harness, copytruncate, lines, names, write


@pytest.fixture()
def logdir(tmp_path):
    return str(tmp_path)


def test_growth_reads_each_line_once(logdir):
    log = os.path.join(logdir, "app.log")
    write(log, lines("a", 0, 3))
    h = Harness(log)
    assert h.batch() == names("a", 0, 3)
    assert h.batch() == [] and all(r.count() == 0 for r in h.ranges)
    write(log, lines("a", 3, 5))
    assert h.batch() == names("a", 3, 5)
    assert len(h.ranges) == 1 and h.ranges[0].fromOffset == len(lines("a", 0, 3))
    assert h.ranges[0].untilOffset == os.path.getsize(log)


def test_partial_last_line_waits(logdir):
    log = os.path.join(logdir, "app.log")
    write(log, "one\ntw")
    h = Harness(log)
    assert h.batch() == ["one"]
    assert h.ranges[0].untilOffset == 4
    assert h.batch() == []
    write(log, "o\nthr")
    assert h.batch() == ["two"]
    write(log, "ee\n")
    assert h.batch() == ["three"]


def test_multibyte_utf8_across_bytes_max_never_split(logdir):
    log = os.path.join(logdir, "app.log")
    text = "".join(f"é{i}ü漢€\n" for i in range(40))  # multi-byte characters at every cut candidate
    write(log, text)
    h = Harness(log, bytes_max=23, line_max_bytes=16)
    got = h.drain()
    assert got == [f"é{i}ü漢€" for i in range(40)]
    data = text.encode()
    for r in h.planner.tracked().values():
        assert r[2] == len(data)


def test_long_line_split_at_utf8_boundary_or_fail(logdir):
    log = os.path.join(logdir, "app.log")
    write(log, "ab" + "é" * 5 + "\nok\n")  # 12-byte line
    h = Harness(log, line_max_bytes=5, bytes_max=8)
    got = h.drain()
    assert got == ["abé", "éé", "éé", "ok"]  # 4, 4, 4 bytes: never inside a character
    assert "".join(got[:3]) == "ab" + "é" * 5
    h2 = Harness(log, line_max_bytes=5, bytes_max=8, line_overflow="fail")
    with pytest.raises(DecodeError, match=r"app\.log.*byte 0.*line\.max\.bytes=5"):
        h2.batch()


def test_new_file_after_start_read_from_zero_both_starting_offsets(logdir):
    for start in ("earliest", "latest"):
        d = os.path.join(logdir, start)
        os.mkdir(d)
        write(os.path.join(d, "a.log"), "old1\nold2\npart")
        h = Harness(os.path.join(d, "*.log"), starting_offsets=start)
        first = h.batch()
        assert first == (["old1", "old2"] if start == "earliest" else [])
        assert len(h.store) == 1  # latest: the skipped position is stored too
        write(os.path.join(d, "a.log"), "ial\n")
        write(os.path.join(d, "b.log"), "new1\nnew2\n")
        assert sorted(h.batch()) == ["new1", "new2", "partial"]
        h.restart()  # a restart is not a first start: nothing skipped, nothing re-read
        write(os.path.join(d, "c.log"), "c1\n")
        assert h.batch() == ["c1"]


def test_rename_rotation_finishes_old_file_under_same_key(logdir):
    log = os.path.join(logdir, "app.log")
    write(log, lines("x", 0, 5))
    h = Harness(os.path.join(logdir, "app.log*"))
    assert h.batch() == names("x", 0, 5)
    key = next(iter(h.store))
    write(log, lines("x", 5, 8))  # unread when rotated
    os.rename(log, log + ".1")
    write(log, lines("y", 0, 2))
    got = h.batch()
    assert sorted(got) == sorted(names("x", 5, 8) + names("y", 0, 2))
    renamed = [r for r in h.ranges if r.position_key == key]
    assert renamed and renamed[0].path == log + ".1" and renamed[0].fromOffset == len(lines("x", 0, 5))
    assert h.planner.counters["renames"] == 1
    write(log + ".1", lines("x", 8, 9))  # the writer still had the old file open
    assert h.batch() == ["x8"]
    assert h.drain() == []


def test_copytruncate_reads_copy_remainder_then_new_content(logdir):
    log = os.path.join(logdir, "app.log")
    write(log, lines("x", 0, 5))
    h = Harness(os.path.join(logdir, "app.log*"))
    assert h.batch() == names("x", 0, 5)
    write(log, lines("x", 5, 9))
    copytruncate(log, log + ".1")
    write(log, lines("y", 0, 3))
    got = h.batch()
    assert sorted(got) == sorted(names("x", 5, 9) + names("y", 0, 3))
    c = h.planner.counters
    assert c["copies"] == 1 and c["losses"] == 0 and c["truncations"] == 0
    assert h.drain() == []


def test_copy_seen_before_truncate_is_not_read_twice(logdir):
    log = os.path.join(logdir, "app.log")
    write(log, lines("x", 0, 5))
    h = Harness(os.path.join(logdir, "app.log*"))
    assert h.batch() == names("x", 0, 5)
    write(log, lines("x", 5, 7))
    shutil.copyfile(log, log + ".1")  # logrotate copied; the truncation has not happened yet
    assert h.batch() == names("x", 5, 7)  # read once, from the original
    write(log, lines("x", 7, 8))  # written to the original after the copy
    assert h.batch() == ["x7"]
    h.restart()  # the copy's alias survives in the stored identity document
    os.truncate(log, 0)
    write(log, lines("y", 0, 2))
    assert h.batch() == names("y", 0, 2)
    assert h.drain() == []
    assert h.planner.counters["losses"] == 0


def test_compressed_rotated_file_remainder_read_from_decompressed_stream(logdir):
    log = os.path.join(logdir, "app.log")
    write(log, lines("x", 0, 5))
    h = Harness(os.path.join(logdir, "app.log*"))
    assert h.batch() == names("x", 0, 5)
    write(log, lines("x", 5, 8) + "x8-no-newline")
    os.rename(log, log + ".1")
    with open(log + ".1", "rb") as f, gzip.open(log + ".1.gz", "wb") as g:
        g.write(f.read())
    os.remove(log + ".1")  # delaycompress + compress: only the .gz is left
    got = h.batch()
    assert got == names("x", 5, 8) + ["x8-no-newline"]  # a compressed file is final: its last line too
    assert h.planner.counters["compressed"] == 1 and h.planner.counters["losses"] == 0
    assert h.ranges[0].compressed and h.ranges[0].path == log + ".1.gz"
    h.restart()
    assert h.drain() == []


def test_rotated_file_out_of_reach_is_reported_as_loss(logdir):
    log = os.path.join(logdir, "app.log")
    write(log, lines("x", 0, 50))
    h = Harness(log, bytes_max=40, line_max_bytes=10)  # pattern names app.log only
    h.batch()
    unread = os.path.getsize(log) - h.ranges[0].untilOffset
    assert unread > 0
    os.rename(log, log + ".1")
    with open(log + ".1", "rb") as f, gzip.open(log + ".1.gz", "wb") as g:
        g.write(f.read())
    os.remove(log + ".1")
    assert h.batch() == []
    c = h.planner.counters
    assert c["losses"] == 1 and c["lost_bytes"] == unread and c["disappearances"] == 1


def test_truncation_same_fingerprint_resumes_at_length_as_new_generation(logdir, caplog):
    log = os.path.join(logdir, "app.log")
    write(log, "head-line\n" + lines("x", 0, 5))
    h = Harness(log, md5_sample_length=10)
    h.batch()
    old_key = next(iter(h.store))
    os.truncate(log, 15)  # keeps "head-line\n" (the fingerprinted bytes) + "x0\nx1"[:5]
    with caplog.at_level("WARNING"):
        assert h.batch() == []
    assert "truncated" in caplog.text and log in caplog.text
    assert h.planner.counters["truncations"] == 1
    new = [r for r in h.ranges if r.position_key != old_key]
    assert len(new) == 1 and new[0].fromOffset == 15 and new[0].supersedes == old_key
    write(log, "Z\nnew\n")
    assert h.batch() == ["Z", "new"]
    h.restart()  # the superseded generation stays retired
    assert h.batch() == [] and h.planner.tracked()[old_key][0] == "retired"


def test_replacement_reads_new_file_from_zero(logdir):
    log = os.path.join(logdir, "app.log")
    write(log, lines("x", 0, 3))
    h = Harness(log)
    assert h.batch() == names("x", 0, 3)
    tmp = log + ".tmp"
    write(tmp, lines("y", 0, 4))
    os.replace(tmp, log)
    assert h.batch() == names("y", 0, 4)
    assert h.planner.counters["disappearances"] == 1 and h.planner.counters["losses"] == 0
    write(log, "rewritten-in-place\n", mode="w")  # same inode, new first bytes
    assert h.batch() == ["rewritten-in-place"]
    assert h.planner.counters["replacements"] == 1


def test_identical_first_bytes_do_not_merge_files(logdir):
    header = "#" * 1100 + "\n"  # longer than md5.sample.length
    a, b, c, d = (os.path.join(logdir, n + ".log") for n in "abcd")
    write(a, header + lines("a", 0, 3))
    write(b, header + lines("b", 0, 3))
    h = Harness(os.path.join(logdir, "*.log"))
    got = h.batch()
    assert sorted(got) == sorted([header[:-1]] * 2 + names("a", 0, 3) + names("b", 0, 3))
    write(c, header + lines("c", 0, 9))  # appears later, longer than a and b
    write(d, header + "d0\n")  # appears later, shorter, different after the header
    got = h.batch()
    assert sorted(got) == sorted([header[:-1]] * 2 + names("c", 0, 9) + ["d0"])
    assert len(h.store) == 4


def test_disappearing_file_stops_being_planned_and_is_reported(logdir, caplog):
    a, b = os.path.join(logdir, "a.log"), os.path.join(logdir, "b.log")
    write(a, lines("a", 0, 3))
    write(b, lines("b", 0, 30))
    h = Harness(os.path.join(logdir, "*.log"), bytes_max=20, line_max_bytes=10)
    h.batch()
    h.batch()  # a is fully read, b is not
    os.remove(a)
    os.remove(b)
    with caplog.at_level("WARNING"):
        assert h.batch() == []
    assert "LOST" in caplog.text and b in caplog.text
    c = h.planner.counters
    assert c["disappearances"] == 2 and c["losses"] == 1 and c["lost_bytes"] > 0
    assert {s for s, _, _ in h.planner.tracked().values()} == {"gone"}
    assert h.batch() == [] and h.ranges == []


def test_disappearing_file_with_unread_bytes_stops_the_stream_under_fail_on_data_loss(logdir):
    b = os.path.join(logdir, "b.log")
    write(b, lines("b", 0, 30))
    h = Harness(os.path.join(logdir, "*.log"), bytes_max=20, line_max_bytes=10, fail_on_data_loss=True)
    h.batch()
    os.remove(b)
    with pytest.raises(DataLossError, match=r"b\.log .*unread bytes \[\d+, \d+\).*fail\.on\.data\.loss=false"):
        h.batch()
    assert h.planner.counters["losses"] == 0  # nothing was skipped: the stream stops before


def test_bytes_max_bounds_each_range(logdir):
    log = os.path.join(logdir, "app.log")
    write(log, lines("line", 0, 100))
    h = Harness(log, bytes_max=50, line_max_bytes=20)
    got = []
    while True:
        got += h.batch()
        if not h.ranges or not h.ranges[0].count():
            break
        assert 0 < h.ranges[0].count() <= 50
    assert got == names("line", 0, 100)


def test_glob_and_regex_paths_with_excludes(logdir):
    os.makedirs(os.path.join(logdir, "s1"))
    os.makedirs(os.path.join(logdir, "s2"))
    for d in ("s1", "s2"):
        write(os.path.join(logdir, d, "service.log"), f"{d}\n")
        write(os.path.join(logdir, d, "service.log.1"), f"{d}.1\n")
        write(os.path.join(logdir, d, "other.txt"), "no\n")
    h = Harness(os.path.join(logdir, "s*", "service.log*"), exclude="*.1")
    assert sorted(h.batch()) == ["s1", "s2"]
    h = Harness(os.path.join(logdir, "s1", r"service\.log(\.\d+)?"), path_syntax="regex")
    assert sorted(h.batch()) == ["s1", "s1.1"]
    h = Harness(os.path.join(logdir, "s1", r"service\.log.*"), path_syntax="regex", exclude_regex=r"\.1$")
    assert h.batch() == ["s1"]


def test_bad_paths_refused(logdir):
    with pytest.raises(ConfigurationError, match="absolute"):
        FilePlanner("relative/*.log")
    with pytest.raises(ConfigurationError, match="does not exist"):
        FilePlanner(os.path.join(logdir, "missing", "*.log")).start({})
    with pytest.raises(ConfigurationError, match="regular expression"):
        FilePlanner(os.path.join(logdir, "(unclosed"), FileSourceOptions(path_syntax="regex"))
    with pytest.raises(ConfigurationError, match="not a file position"):
        FilePlanner(os.path.join(logdir, "*.log")).start({"t/0": Position(3)})
    with pytest.raises(ConfigurationError, match="no file identity document"):
        FilePlanner(os.path.join(logdir, "*.log")).start({"file:abc": Position(3)})
    with pytest.raises(ConfigurationError, match="before start"):
        FilePlanner(os.path.join(logdir, "*.log")).plan()
