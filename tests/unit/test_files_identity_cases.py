"""Identity failure modes of other log tailers, replayed against the file planner with driver restarts.

Each case ends with every line counted exactly once, or with the loss reported with its byte range
(WARN log, planner counters, the identity's ``gone`` state): never a double count, never a silent
skip. Real files; a restart builds a new planner from what the harness's store holds.
"""

from __future__ import annotations

import os
import random
import shutil
from collections import Counter
from typing import Any, Iterable, List, Optional

import pytest

from dstream_exactly_once.errors import OffsetRangeError
from dstream_exactly_once.files import FileRange

from ._files_harness import Harness, lines, names, on_inode, until_on_inode, write

HEADER = "#" * 1100 + "\n"  # longer than md5.sample.length (1024): files that share it share a fingerprint


def _once(seen: Counter[str], expected: Iterable[str]) -> None:
    expected = list(expected)
    assert sorted(seen) == sorted(expected), sorted(set(seen) ^ set(expected))[:10]
    assert {k: n for k, n in seen.items() if n != 1} == {}


# ---------------------------------------------------------------- 1. copy in small pieces
def test_copy_written_in_pieces_smaller_than_the_sample_is_not_read_twice(tmp_path):
    log, rotated = str(tmp_path / "service.log"), str(tmp_path / "service.log.1")
    write(log, lines("x", 0, 300))  # 2390 bytes: the fingerprint covers the first 1024
    h = Harness(str(tmp_path / "service.log*"))
    seen: Counter[str] = Counter(h.batch())
    write(log, lines("x", 300, 310))  # the service still writes while logrotate copies
    copied = 0
    for step in range(40):  # logrotate's copy, 200 bytes at a time, a batch after each piece
        with open(log, "rb") as src, open(rotated, "ab") as dst:
            src.seek(copied)
            piece = src.read(200)
            dst.write(piece)
        copied += len(piece)
        seen.update(h.batch())
        if step in (2, 7):
            h.restart()
        if not piece:
            break
    os.truncate(log, 0)  # copytruncate's truncate, once the copy holds everything
    write(log, lines("y", 0, 3))
    h.restart()
    seen.update(h.drain())
    _once(seen, names("x", 0, 310) + names("y", 0, 3))
    assert h.planner.counters["losses"] == 0


def test_copy_in_progress_of_a_file_that_is_new_too_is_not_read_twice(tmp_path):
    log, rotated = str(tmp_path / "service.log"), str(tmp_path / "service.log.2")
    write(log, lines("x", 0, 5))
    h = Harness(str(tmp_path / "service.log*"))
    seen: Counter[str] = Counter(h.batch())
    # the driver is down: a rename rotation, a new service.log, and logrotate's copy of it under way
    os.rename(log, log + ".1")
    write(log, lines("y", 0, 200))
    with open(log, "rb") as src, open(rotated, "wb") as dst:
        dst.write(src.read(300))
    h.restart()
    seen.update(h.batch())
    with open(log, "rb") as src, open(rotated, "ab") as dst:
        src.seek(300)
        dst.write(src.read())
    seen.update(h.batch())
    os.truncate(log, 0)
    write(log, lines("z", 0, 3))
    seen.update(h.drain())
    _once(seen, names("x", 0, 5) + names("y", 0, 200) + names("z", 0, 3))
    assert h.planner.counters["losses"] == 0


# ---------------------------------------------------------------- 2. identical first bytes
@pytest.mark.parametrize("together", [False, True], ids=["one-by-one", "all-copied-then-all-truncated"])
def test_copytruncate_among_files_with_identical_headers_keeps_each_identity(tmp_path, together):
    services = ["a", "b", "c", "d"]
    logs = {s: str(tmp_path / f"{s}.log") for s in services}
    for s, p in logs.items():
        write(p, HEADER + lines(s, 0, 5))
    h = Harness(str(tmp_path / "*.log*"))
    seen: Counter[str] = Counter(h.drain())
    groups = [services] if together else [[s] for s in services]
    for group in groups:  # copy, a batch, a restart, truncate, new lines
        for s in group:
            write(logs[s], lines(s, 5, 8))
            shutil.copyfile(logs[s], logs[s] + ".1")
        seen.update(h.batch())
        h.restart()
        for s in group:
            os.truncate(logs[s], 0)
            write(logs[s], lines(s + "-new", 0, 2))
        seen.update(h.batch())
    seen.update(h.drain())
    assert seen.pop(HEADER[:-1]) == len(services)
    _once(seen, [n for s in services for n in names(s, 0, 8) + names(s + "-new", 0, 2)])
    assert h.planner.counters["losses"] == 0


# ---------------------------------------------------------------- 3. a new name on a reused inode
def test_new_file_on_a_deleted_files_inode_with_the_same_header_is_read_from_zero(tmp_path, caplog):
    def case(directory: str) -> Optional[Any]:
        logs = os.path.join(directory, "logs")
        os.mkdir(logs)
        old, new = os.path.join(logs, "old.log"), os.path.join(logs, "new.log")
        write(old, HEADER + lines("old", 0, 20))
        h = Harness(os.path.join(logs, "*.log"))
        seen: Counter[str] = Counter(h.drain())
        inode = os.stat(old).st_ino
        os.remove(old)  # while the driver is down
        if not on_inode(new, HEADER + lines("new", 0, 3), inode, directory):  # shorter than old.log's position
            return None
        return old, new, h, seen

    old, new, h, seen = until_on_inode(case, tmp_path)
    h.restart()
    with caplog.at_level("INFO"):
        seen.update(h.drain())
    assert seen.pop(HEADER[:-1]) == 2
    _once(seen, names("old", 0, 20) + names("new", 0, 3))
    c = h.planner.counters
    assert c["truncations"] == 0 and c["replacements"] == 0 and c["losses"] == 0
    assert "truncated" not in caplog.text
    assert f"{new} is a new file on the inode of {old}" in caplog.text


def test_next_service_log_on_a_deleted_rotated_files_inode_is_reported_as_a_new_file(tmp_path, caplog):
    def case(directory: str) -> Optional[Any]:
        log = os.path.join(directory, "service.log")
        write(log, lines("a", 0, 5))
        h = Harness(os.path.join(directory, "service.log*"))
        seen: Counter[str] = Counter(h.drain())
        os.rename(log, log + ".1")  # rotation by rename
        write(log, lines("b", 0, 5))
        seen.update(h.drain())
        h.restart()
        inode = os.stat(log + ".1").st_ino
        os.remove(log + ".1")  # rotate count reached: the oldest file goes
        os.rename(log, log + ".1")  # the next rotation; its new service.log lands on the freed inode
        if not on_inode(log, lines("c", 0, 5), inode, directory):
            return None
        return log, h, seen

    log, h, seen = until_on_inode(case, tmp_path)
    with caplog.at_level("INFO"):
        seen.update(h.drain())
    _once(seen, names("a", 0, 5) + names("b", 0, 5) + names("c", 0, 5))
    assert "replaced" not in caplog.text
    assert f"{log} is a new file on the inode of {log}.1" in caplog.text
    c = h.planner.counters
    assert c["replacements"] == 0 and c["losses"] == 0 and c["disappearances"] == 1
    # the oldest file deleted after being read to its end is routine (every rotation): info, not a warning
    gone = [r for r in caplog.records if "disappeared" in r.getMessage()]
    assert [r.levelname for r in gone] == ["INFO"] and "read to its end" in gone[0].getMessage()


# ---------------------------------------------------------------- 4. deleted while the driver is down
def test_rotated_file_deleted_while_the_driver_is_down_is_reported_as_a_loss(tmp_path, caplog):
    log = str(tmp_path / "service.log")
    write(log, lines("x", 0, 100))
    h = Harness(str(tmp_path / "service.log*"), bytes_max=64, line_max_bytes=32)
    first = h.batch()
    seen: Counter[str] = Counter(first)
    read_until, size = h.ranges[0].untilOffset, os.path.getsize(log)
    key = h.ranges[0].position_key
    assert read_until < size
    # the driver is down: service.log is rotated by rename, and the rotated file deleted unread
    os.rename(log, log + ".1")
    write(log, lines("y", 0, 3))
    os.remove(log + ".1")
    h.restart()
    with caplog.at_level("WARNING"):
        seen.update(h.drain())
    _once(seen, first + names("y", 0, 3))
    c = h.planner.counters
    assert c["losses"] == 1 and c["lost_bytes"] == size - read_until and c["disappearances"] == 1
    assert f"[{read_until}, {size}): LOST" in caplog.text and log in caplog.text
    assert h.planner.tracked()[key][0] == "gone"


# ---------------------------------------------------------------- all of it, at random
@pytest.mark.parametrize("seed", [1, 2, 3, 4])
@pytest.mark.parametrize("header", ["", "#" * 40 + "\n"], ids=["plain", "header"])
def test_random_rotations_copies_in_pieces_deletions_and_restarts_count_every_line_once(tmp_path, seed, header):
    """Rename and copytruncate rotations (the copy written in small pieces while the writer goes on),
    deletion of rotated files once read (their inodes are reused by the next files), restarts and
    crashes between planning and committing."""
    rnd = random.Random(seed)
    log = str(tmp_path / "app.log")
    rotated: List[str] = []
    state = {"next": 0, "seq": 0}
    copying: Optional[List[Any]] = None  # [destination, bytes copied]

    def append(n: int) -> None:
        with open(log, "a", encoding="utf-8") as f:
            if header and os.path.getsize(log) == 0:
                f.write(header)
            for _ in range(n):
                f.write(f"{state['next']}\n")
                state["next"] += 1

    def rotated_name() -> str:
        state["seq"] += 1
        return f"{log}.{state['seq']:03d}"

    open(log, "w").close()
    append(3)
    h = Harness(str(tmp_path / "app.log*"), bytes_max=64, line_max_bytes=32,
                md5_sample_length=rnd.choice([16, 64, 1024]))
    seen: Counter[str] = Counter(h.batch())
    for _ in range(300):
        op = rnd.random()
        if copying is not None and op < 0.5:  # the next piece of logrotate's copy
            with open(log, "rb") as src, open(copying[0], "ab") as dst:
                src.seek(copying[1])
                piece = src.read(rnd.randint(1, 30))
                dst.write(piece)
            copying[1] += len(piece)
            if copying[1] >= os.path.getsize(log):
                os.truncate(log, 0)
                rotated.append(copying[0])
                copying = None
        elif op < 0.35:
            append(rnd.randint(1, 8))
        elif op < 0.42 and copying is None:
            rotated.append(rotated_name())
            os.rename(log, rotated[-1])
            open(log, "w").close()
        elif op < 0.49 and copying is None:
            copying = [rotated_name(), 0]
            open(copying[0], "w").close()
        elif op < 0.56 and rotated and copying is None:
            seen.update(h.drain())  # read to the end first: no loss is expected
            os.remove(rotated.pop(0))
        elif op < 0.63:
            h.restart()
        elif op < 0.68:  # a crash after planning, before the commit
            h.planner.plan()
            h.restart()
        else:
            seen.update(h.batch())
    if copying is not None:
        with open(log, "rb") as src, open(copying[0], "ab") as dst:
            src.seek(copying[1])
            dst.write(src.read())
        os.truncate(log, 0)
    seen.update(h.drain())
    numbers = Counter({k: n for k, n in seen.items() if not k.startswith("#")})  # headers: split in two
    _once(numbers, [str(i) for i in range(state["next"])])
    assert h.planner.counters["losses"] == 0


def test_the_size_last_seen_is_stored_and_a_document_without_it_still_loads(tmp_path):
    log = str(tmp_path / "service.log")
    write(log, lines("x", 0, 10) + "partial")
    h = Harness(log)
    h.batch()
    ((key, pos),) = h.store.items()
    assert pos.meta["seen_size"] == os.path.getsize(log) > pos.offset
    with pytest.raises(OffsetRangeError, match="seen_size must be an int >= 0, got -1"):
        FileRange("f1", log, 0, 4, seen_size=-1)
    del pos.meta["seen_size"]  # a document written without it: nothing is known beyond the position
    h.restart()
    assert h.planner.latest_positions() == {key: pos.offset}


# ---------------------------------------------------------------- identical new files
@pytest.mark.parametrize("when", ["first-scan", "later-scan"])
def test_identical_new_files_are_each_read_once(tmp_path, when):
    """Two files new in one scan with the same bytes (equal lengths) are two files: neither is held as
    a copy of the other (only a file that is the start of a *longer* new file is)."""
    a, b = str(tmp_path / "a.log"), str(tmp_path / "b.log")
    h = Harness(str(tmp_path / "*.log"))
    seen: Counter[str] = Counter()
    if when == "later-scan":
        write(str(tmp_path / "c.log"), lines("c", 0, 2))
        seen.update(h.batch())
    write(a, lines("x", 0, 40))
    write(b, lines("x", 0, 40))
    seen.update(h.drain())
    h.restart()
    seen.update(h.drain())
    expected = Counter(names("x", 0, 40) * 2 + (names("c", 0, 2) if when == "later-scan" else []))
    assert seen == expected
    assert h.planner.counters["losses"] == 0


def test_a_new_file_that_is_the_start_of_a_longer_new_file_waits(tmp_path):
    """The documented copy rule stays: a shorter new file repeating a longer new file's start is held."""
    a, b = str(tmp_path / "a.log"), str(tmp_path / "b.log")
    write(a, lines("x", 0, 40))
    write(b, lines("x", 0, 30))
    h = Harness(str(tmp_path / "*.log"))
    assert Counter(h.batch()) == Counter(names("x", 0, 40))
