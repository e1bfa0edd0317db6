"""The file planner's work follows what changed: unchanged files are neither opened nor fingerprinted again.

Each test counts the opens of real files (the scan's gzip probe and the planner's reads) per path while
batches are planned; the decisions themselves are those of ``test_files_planner.py``.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from typing import Any, Dict, List

import pytest

from dstream_exactly_once.files import FilePlanner, FileSourceOptions
from dstream_exactly_once.files import _identity as identity
from dstream_exactly_once.files import _paths as paths
from dstream_exactly_once.files._matching import HeadIndex, LocatedHeads, Scan

from ._files_harness import write

SETTLE = 0.25  # seconds: longer than identity.SETTLED_NS, so a look taken after it vouches for the file


@pytest.fixture()
def logdir(tmp_path):
    return str(tmp_path)


@pytest.fixture()
def opens(monkeypatch) -> Counter:
    """``{path: times opened}`` by the scan's probe and by the planner's file views."""
    seen: Counter = Counter()
    real_open = open

    def probe_open(path: Any, *args: Any, **kwargs: Any) -> Any:
        seen[path] += 1
        return real_open(path, *args, **kwargs)

    view_open = identity.FileView._open

    def counting_view_open(self: identity.FileView) -> Any:
        if self._f is None:
            seen[self.stat.path] += 1
        return view_open(self)

    monkeypatch.setattr(paths, "open", probe_open, raising=False)
    monkeypatch.setattr(identity.FileView, "_open", counting_view_open)
    return seen


def batch(planner: FilePlanner) -> Dict[str, tuple]:
    """One driver batch (plan, then advance as the committer does): ``{path: (from, until)}``."""
    ranges = planner.plan()
    planner.advance(ranges)
    return {r.path: (r.from_byte, r.until_byte) for r in ranges}


def settled_planner(logdir: str, files: List[str]) -> FilePlanner:
    planner = FilePlanner(os.path.join(logdir, "*.log"), FileSourceOptions())
    planner.start({})
    batch(planner)
    time.sleep(SETTLE)
    batch(planner)  # a look taken after the files settled
    return planner


def test_idle_file_with_unchanged_stat_is_not_opened_or_fingerprinted_again(logdir, opens):
    a, b = os.path.join(logdir, "a.log"), os.path.join(logdir, "b.log")
    write(a, "a0\na1\n")
    write(b, "b0\n")
    planner = settled_planner(logdir, [a, b])
    opens.clear()
    assert batch(planner) == {}
    assert opens == Counter()  # both idle: stat only
    write(b, "b1\n")
    assert batch(planner) == {b: (3, 6)}
    assert opens[a] == 0 and opens[b] >= 1  # the grown file is read (and checked), the idle one is not
    assert planner.counters["replacements"] == 0


def test_file_of_same_size_on_another_inode_is_fingerprinted(logdir, opens):
    a = os.path.join(logdir, "a.log")
    write(a, "old0\n")
    planner = settled_planner(logdir, [a])
    opens.clear()
    tmp = os.path.join(logdir, "a.tmp")
    write(tmp, "new0\n")
    os.replace(tmp, a)  # same size and name, another inode (and content)
    assert batch(planner) == {a: (0, 5)}  # not the tracked identity: read from 0
    assert opens[a] >= 1
    assert planner.counters["disappearances"] == 1


def test_file_rewritten_in_place_right_after_a_look_is_fingerprinted(logdir, opens):
    a = os.path.join(logdir, "a.log")
    write(a, "old0\n")
    planner = FilePlanner(os.path.join(logdir, "*.log"), FileSourceOptions())
    planner.start({})
    assert batch(planner) == {a: (0, 5)}
    write(a, "new0\n", mode="r+")  # same inode, same size, within the settling margin of that look
    opens.clear()
    assert batch(planner) == {a: (0, 5)}  # replaced: read again from 0 under a new key
    assert opens[a] >= 1
    assert planner.counters["replacements"] == 1


def test_unsettled_file_is_checked_again_until_a_settled_look(logdir, opens, monkeypatch):
    monkeypatch.setattr(identity, "SETTLED_NS", 3600 * 10**9)
    monkeypatch.setattr(identity, "COARSE_SETTLED_NS", 3600 * 10**9)
    a = os.path.join(logdir, "a.log")
    write(a, "a0\n")
    planner = settled_planner(logdir, [a])
    opens.clear()
    assert batch(planner) == {}
    assert opens[a] >= 2  # the gzip probe and the identity check, every batch: no look vouches for it


def test_unchanged_since_needs_equal_stats_and_a_settled_first_look(logdir):
    a = os.path.join(logdir, "a.log")
    write(a, "a0\n")
    time.sleep(SETTLE)
    old = identity.stat_file(a)
    assert old is not None and identity.unchanged_since(old, identity.stat_file(a))
    fresh = identity.FileStat(old.path, old.dev, old.inode, old.disk_size, old.mtime_ns, False, old.ctime_ns,
                              old.mtime_ns)  # looked at the instant it changed
    assert not identity.unchanged_since(fresh, old)
    for field, value in (("inode", old.inode + 1), ("disk_size", old.disk_size + 1), ("mtime_ns", old.mtime_ns + 1),
                         ("ctime_ns", old.ctime_ns + 1)):
        changed = identity.FileStat(**{**{k: getattr(old, k) for k in ("path", "dev", "inode", "disk_size",
                                                                         "mtime_ns", "compressed", "ctime_ns",
                                                                         "seen_ns")}, field: value})
        assert not identity.unchanged_since(old, changed), field
    coarse = identity.FileStat(old.path, old.dev, old.inode, old.disk_size, 10**18, False, 10**18, 10**18 + 10**9)
    assert not identity.unchanged_since(coarse, coarse)  # whole-second mtime: 2 s margin, only 1 s passed
    fine = identity.FileStat(old.path, old.dev, old.inode, old.disk_size, 10**18 + 1, False, 10**18 + 1,
                             10**18 + 10**9)
    assert identity.unchanged_since(fine, fine)


def test_scan_reuses_an_unchanged_look_and_probes_a_changed_file(logdir, opens):
    a, b = os.path.join(logdir, "a.log"), os.path.join(logdir, "b.log")
    write(a, "a0\n")
    write(b, "b0\n")
    time.sleep(SETTLE)
    pattern = paths.PathPattern(os.path.join(logdir, "*.log"))
    first, _ = pattern.scan_report()
    known = {st.path: st for st in first}
    write(b, "b1\n")
    opens.clear()
    second, _ = pattern.scan_report(known)
    by_path = {st.path: st for st in second}
    assert by_path[a] is known[a] and opens[a] == 0
    assert by_path[b] is not known[b] and by_path[b].disk_size == 6 and opens[b] == 1


def test_head_index_finds_items_by_prefix_in_the_order_added():
    index: HeadIndex[str] = HeadIndex([(b"abc", "k1"), (b"abd", "k2"), (b"ab", "k3"), (b"b", "k4")])
    assert index.starting(b"ab") == ["k1", "k2", "k3"]
    assert index.starting(b"abc") == ["k1"]
    assert index.starting(b"abcd") == []
    assert index.starting(b"") == ["k1", "k2", "k3", "k4"]
    index.add(b"abc", "k5")
    assert index.starting(b"abc") == ["k1", "k5"]


def test_located_heads_follow_the_located_files_and_read_only_changed_ones(logdir, opens):
    a, b, c = (os.path.join(logdir, f"{n}.log") for n in "abc")
    write(a, "same start a\n")
    write(b, "same start b\n")
    write(c, "other\n")
    time.sleep(SETTLE)
    pattern = paths.PathPattern(os.path.join(logdir, "*.log"))
    heads = LocatedHeads()
    stats, _ = pattern.scan_report()
    by_path = {st.path: st for st in stats}
    heads.update(Scan(stats), {"k1": by_path[a], "k2": by_path[b], "k3": by_path[c]})
    assert heads.starting(b"same") == ["k1", "k2"] and heads.starting(b"") == ["k1", "k2", "k3"]
    write(c, "same start c\n", mode="w")  # rewritten: another head
    stats2, _ = pattern.scan_report(by_path)
    by_path2 = {st.path: st for st in stats2}
    opens.clear()
    heads.update(Scan(stats2), {"k1": by_path2[a], "k3": by_path2[c]})  # k2 no longer located
    assert heads.starting(b"same") == ["k1", "k3"] and heads.starting(b"other") == []
    assert opens[a] == 0 and opens[c] == 1  # the unchanged file's first bytes are not read again


def test_copy_among_many_files_with_one_header_joins_its_own_original(logdir, opens):
    header = "timestamp,level,service,message,with,a,header,longer,than,sixty-four,bytes\n"
    files = [os.path.join(logdir, f"f{i:02d}.log") for i in range(30)]
    for i, f in enumerate(files):
        write(f, header + f"row {i}\n")
    planner = settled_planner(logdir, files)
    copy = os.path.join(logdir, "f17.log.1.log")
    with open(files[17], "rb") as src, open(copy, "wb") as dst:
        dst.write(src.read())
    opens.clear()
    planned = batch(planner)  # a copy: not read while equal; the original's document names it (an empty range)
    assert set(planned) == {files[17]} and planned[files[17]][0] == planned[files[17]][1]
    tracked = planner.tracked()
    key17 = next(k for k, (_, path, _) in tracked.items() if path == files[17])
    assert [(n[1], size) for n, size in planner._tracks[key17].aliases.items()] == [
        (os.stat(copy).st_ino, os.path.getsize(copy))]
    assert sum(opens[f] for f in files if f != files[17]) <= len(files)  # heads read at most once each
