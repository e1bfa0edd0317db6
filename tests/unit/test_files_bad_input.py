"""Odd files and bad input for the file source, on real files: no odd file blocks the others, none is
skipped silently, and input that could never be read is refused before anything starts."""

from __future__ import annotations

import glob
import json
import logging
import os
import pwd
import re
import subprocess
import tempfile

import pytest

from dstream_exactly_once.errors import ConfigurationError
from dstream_exactly_once.files import FilePlanner, FileSourceOptions
from dstream_exactly_once.files._paths import PathPattern

from ._files_harness import Harness, lines, names, write

PLANNER_LOG = "dstream_exactly_once.files._planner"


def _warnings(caplog, needle):
    return [r for r in caplog.records if r.levelno == logging.WARNING and needle in r.getMessage()]


# ---------------------------------------------------------------- 1. names that are not UTF-8
def test_file_name_not_utf8_is_read_like_any_other_and_found_again_after_a_restart(tmp_path):
    good = tmp_path / "service.log.1"
    odd = os.path.join(os.fsencode(tmp_path), b"service.log.\xff")
    write(str(good), lines("g", 0, 3))
    with open(odd, "wb") as f:
        f.write(lines("x", 0, 2).encode())
    h = Harness(f"{tmp_path}/service.log.*")
    assert sorted(h.batch()) == sorted(names("g", 0, 3) + names("x", 0, 2))
    assert {r.path for r in h.ranges} == {str(good), os.fsdecode(odd)}
    with open(odd, "ab") as f:
        f.write(lines("x", 2, 4).encode())
    h.restart()  # the identity document (with the surrogate-escaped name) went through JSON
    assert h.batch() == names("x", 2, 4)
    assert h.planner.counters["unreadable"] == 0 and h.planner.counters["replacements"] == 0


# ---------------------------------------------------------------- 2. entries that cannot be read
def test_fifo_and_dangling_symlink_are_reported_once_and_every_other_file_is_read(tmp_path, caplog):
    write(str(tmp_path / "a.log"), lines("a", 0, 2))
    os.mkfifo(tmp_path / "pipe.log")  # opening it for reading would block: it must never be opened
    os.symlink(tmp_path / "nowhere", tmp_path / "link.log")
    h = Harness(f"{tmp_path}/*.log")
    with caplog.at_level(logging.INFO, logger=PLANNER_LOG):
        assert h.batch() == names("a", 0, 2)
        write(str(tmp_path / "a.log"), lines("a", 2, 3))
        assert h.batch() == ["a2"]
    assert h.planner.counters["unreadable"] == 2
    assert h.planner.unreadable() == {str(tmp_path / "pipe.log"): "a FIFO, not a regular file",
                                      str(tmp_path / "link.log"): "a symbolic link to a missing file"}
    assert len(_warnings(caplog, "pipe.log")) == 1 and len(_warnings(caplog, "link.log")) == 1
    os.unlink(tmp_path / "pipe.log")
    write(str(tmp_path / "pipe.log"), lines("p", 0, 1))
    write(str(tmp_path / "nowhere"), lines("n", 0, 1))  # the link's target appears
    assert sorted(h.batch()) == ["n0", "p0"]
    assert h.planner.unreadable() == {} and h.planner.counters["unreadable"] == 2


def _plan_twice(patterns):
    """``{pattern: what two batches planned}`` and the planner's warnings, computed in this process."""
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append((record.levelname, record.getMessage()))

    handler = Keep()
    logging.getLogger(PLANNER_LOG).addHandler(handler)
    try:
        out = {}
        for pattern in patterns:
            planner = FilePlanner(pattern)
            planner.start({})
            paths = []
            for _ in range(2):
                paths += [r.path for r in planner.plan() if r.count()]
            out[pattern] = {"read": sorted(paths), "unreadable": planner.unreadable(), "counters": planner.counters}
    finally:
        logging.getLogger(PLANNER_LOG).removeHandler(handler)
    out["warnings"] = [m for level, m in records if level == "WARNING"]
    return out


def _as_nobody(*patterns):
    """:func:`_plan_twice` in a forked child that dropped to the ``nobody`` user (root reads everything)."""
    nobody = pwd.getpwnam("nobody")
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 1
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(nobody.pw_gid)
            os.setuid(nobody.pw_uid)
            with os.fdopen(write_end, "w") as f:
                json.dump(_plan_twice(patterns), f)
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end) as f:
        text = f.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0 and text, "the unprivileged planner failed"
    return json.loads(text)


def test_files_and_directories_without_permission_are_reported_once_and_the_rest_is_read():
    """As the ``nobody`` user (root reads everything): a file with mode 000, a directory that cannot be
    listed and one that cannot be entered."""
    base = tempfile.mkdtemp(prefix="deo-perm-", dir="/tmp")
    try:
        os.chmod(base, 0o755)
        flat = os.path.join(base, "flat")
        os.mkdir(flat, 0o755)
        write(os.path.join(flat, "ok.log"), "ok\n")
        write(os.path.join(flat, "secret.log"), "secret\n")
        os.chmod(os.path.join(flat, "secret.log"), 0o000)
        nested = os.path.join(base, "nested")
        os.mkdir(nested, 0o755)
        for sub, mode in (("a", 0o755), ("b", 0o000), ("c", 0o311)):  # c: enter, not list
            os.mkdir(os.path.join(nested, sub))
            write(os.path.join(nested, sub, "app.log"), f"{sub}\n")
            os.chmod(os.path.join(nested, sub, "app.log"), 0o644)
            os.chmod(os.path.join(nested, sub), mode)
        got = _as_nobody(f"{flat}/*.log", f"{nested}/*/app.log", f"{nested}/*/*.log")
    finally:
        for root, dirs, _ in os.walk(base):
            for d in dirs:
                os.chmod(os.path.join(root, d), 0o755)
        subprocess.run(["rm", "-rf", base], check=True)
    flat_got = got[f"{flat}/*.log"]
    assert flat_got["read"] == [f"{flat}/ok.log"]
    assert flat_got["unreadable"] == {f"{flat}/secret.log": "Permission denied"}
    assert flat_got["counters"]["unreadable"] == 1
    literal_name = got[f"{nested}/*/app.log"]  # b cannot be entered; c can (its file is found by name)
    assert literal_name["read"] == [f"{nested}/a/app.log", f"{nested}/c/app.log"]
    assert list(literal_name["unreadable"]) == [f"{nested}/b"] and literal_name["counters"]["unreadable"] == 1
    wildcard = got[f"{nested}/*/*.log"]  # neither b nor c can be listed
    assert wildcard["read"] == [f"{nested}/a/app.log"]
    assert sorted(wildcard["unreadable"]) == [f"{nested}/b", f"{nested}/c"]
    assert all(reason.startswith("cannot list the directory") for reason in wildcard["unreadable"].values())
    assert wildcard["counters"]["unreadable"] == 2
    assert len([w for w in got["warnings"] if "secret.log" in w]) == 1  # two batches, one warning


# ---------------------------------------------------------------- 3. paths that can never be read
@pytest.mark.parametrize("syntax", ["glob", "regex"])
def test_a_directory_as_the_path_is_refused_naming_the_fix(tmp_path, syntax):
    logs = tmp_path / "logs"
    logs.mkdir()
    write(str(logs / "a.log"), "a\n")
    planner = FilePlanner(str(logs), FileSourceOptions(path_syntax=syntax))
    fix = f"{logs}/*" if syntax == "glob" else f"{logs}/.*"
    with pytest.raises(ConfigurationError, match=rf"path '{re.escape(str(logs))}' is a directory.*'{re.escape(fix)}'"):
        planner.start({})


def test_a_regex_naming_a_directory_is_refused_and_a_regex_over_names_is_not(tmp_path):
    (tmp_path / "app.logs").mkdir()
    regex = FileSourceOptions(path_syntax="regex")
    for name in ("app.logs", "app\\.logs"):
        with pytest.raises(ConfigurationError, match=r"is a directory.*app\.logs/\.\*"):
            FilePlanner(f"{tmp_path}/{name}", regex).start({})
    FilePlanner(f"{tmp_path}/app\\.logs(\\.\\d+)?", regex).start({})  # may name files too: accepted


def test_a_trailing_slash_or_a_nul_byte_in_the_path_is_refused(tmp_path):
    with pytest.raises(ConfigurationError, match=rf"path '{re.escape(str(tmp_path))}/' ends with '/'"):
        FilePlanner(f"{tmp_path}/")
    with pytest.raises(ConfigurationError, match=r"holds a NUL byte"):
        FilePlanner(f"{tmp_path}/a\0*.log")
    with pytest.raises(ConfigurationError, match=r"holds a NUL byte"):
        FilePlanner(f"{tmp_path}/a\0.log", FileSourceOptions(path_syntax="regex"))


# ---------------------------------------------------------------- 4. bytes.max and multi-byte text
@pytest.mark.parametrize("options, name", [({"bytes.max": 1}, "bytes.max"), ({"bytes.max": "4"}, "bytes.max"),
                                           ({"line.max.bytes": 3}, "line.max.bytes"),
                                           ({"bytes.max": 2, "line.max.bytes": 1}, "bytes.max")])
def test_sizes_too_small_for_one_utf8_character_are_refused(options, name):
    with pytest.raises(ConfigurationError, match=rf"'{name}'.*\[\d, \d+\].*UTF-8 character"):
        FileSourceOptions.from_mapping(options)


def test_smallest_bytes_max_reads_every_utf8_text_without_a_false_decode_error(tmp_path):
    text = "".join(f"𝄞€é{i}\n" for i in range(5)) + "漢字かな𝄞𝄞\n"  # 4-, 3- and 2-byte characters
    log = tmp_path / "app.log"
    write(str(log), text)
    h = Harness(str(log), bytes_max=5)  # line.max.bytes follows: 4
    got = h.drain()
    assert "".join(got) == text.replace("\n", "")
    assert all(len(piece.encode()) <= 4 for piece in got)


# ---------------------------------------------------------------- the scan lists what glob lists
@pytest.mark.parametrize("pattern", ["*.log", "*", ".*", "*/*.log", "*/app.log", "[ab]*/*", "a/app.log", "a/*",
                                     "?/.h*", "*/*/*", "a", "*/nope/*"])
def test_the_scan_names_the_files_glob_names(tmp_path, pattern):
    for rel in ("x.log", ".hidden.log", "a/app.log", "a/.hidden", "b/app.log", "b/c/d.log", ".dot/app.log",
                "c.log/inner.log", os.fsdecode(b"\xff.log")):
        os.makedirs(os.path.dirname(tmp_path / rel), exist_ok=True)
        write(str(tmp_path / rel), "x\n")
    full = f"{tmp_path}/{pattern}"
    files = sorted(p for p in glob.glob(full) if os.path.isfile(p))
    stats, problems = PathPattern(full).scan_report()
    assert [st.path for st in stats] == files and problems == []
