"""The task planner (core/_tasks.py): empty ranges dropped, small ones packed, large ones split,
hosts kept apart, deterministic; and the file reader's pieces (line-boundary rule)."""

from __future__ import annotations

import gzip
import random

import pytest

from dstream_exactly_once.core._tasks import (
    SPLIT_SIZE,
    TARGET_COUNT,
    TARGET_SIZE,
    TaskOptions,
    one_task_per_range,
    plan_tasks,
    task_size,
)
from dstream_exactly_once.errors import ConfigurationError
from dstream_exactly_once.files import FilePlanner, FileRange, FileRangeReader, FileSourceOptions
from dstream_exactly_once.kafka._offsets import OffsetRange

from ._files_harness import write


def _kafka(sizes, start=100):
    return [OffsetRange("t", i, start, start + n) for i, n in enumerate(sizes)]


def _covered_once(ranges, tasks):
    """Every position of every non-empty range is read by exactly one piece, in order."""
    seen = {}
    for task in tasks:
        for p in task:
            assert p.range is ranges[p.index]
            seen.setdefault(p.index, []).append((p.start, p.end))
    for i, r in enumerate(ranges):
        if r.count() == 0:
            assert i not in seen
            continue
        parts = sorted(seen[i])
        assert parts[0][0] == r.start and parts[-1][1] == r.end
        assert all(a[1] == b[0] for a, b in zip(parts, parts[1:], strict=False))
        assert all(a < b for a, b in parts)


def test_empty_ranges_make_no_task_and_small_ones_pack_to_the_target_count():
    ranges = _kafka([0, 10, 10, 0, 10, 10, 10, 10, 0, 10, 10])
    tasks = plan_tasks(ranges, TaskOptions(), parallelism=2)
    assert len(tasks) == 2 and [task_size(t) for t in tasks] == [40, 40]
    assert [p.index for t in tasks for p in t] == [1, 2, 4, 5, 6, 7, 9, 10]  # batch order kept
    _covered_once(ranges, tasks)
    assert plan_tasks(_kafka([0, 0]), TaskOptions(), parallelism=4) == []


def test_options_override_the_defaults_and_one_task_per_range_keeps_empties():
    ranges = _kafka([5] * 10)
    assert len(plan_tasks(ranges, TaskOptions(target_count=5), parallelism=1)) == 5
    assert len(plan_tasks(ranges, TaskOptions(target_size=20), parallelism=1)) == 3
    no_pack = plan_tasks(ranges, TaskOptions(target_size=20).with_shape(pack=False, split=True), parallelism=1)
    assert [len(t) for t in no_pack] == [1] * 10
    identity = one_task_per_range(_kafka([0, 3]))
    assert [(t[0].index, t[0].whole) for t in identity] == [(0, True), (1, True)]


def test_a_large_range_splits_into_even_pieces_unless_unsplittable_or_split_off():
    ranges = _kafka([1000, 10, 10])
    tasks = plan_tasks(ranges, TaskOptions(target_size=300), parallelism=1)
    pieces = [p for t in tasks for p in t if p.index == 0]
    assert [(p.start, p.end) for p in pieces] == [(100, 350), (350, 600), (600, 850), (850, 1100)]
    _covered_once(ranges, tasks)
    whole = plan_tasks(ranges, TaskOptions(target_size=300), parallelism=1, can_split=lambda r: r.partition != 0)
    assert whole[0] == (whole[0][0],) and whole[0][0].whole  # one unsplittable range: a task above the cap
    off = plan_tasks(ranges, TaskOptions(target_size=300, split_size=0), parallelism=1)
    assert off[0][0].whole
    no_split = plan_tasks(ranges, TaskOptions(target_size=300).with_shape(pack=True, split=False), parallelism=1)
    assert no_split[0][0].whole
    floor = plan_tasks(ranges, TaskOptions(target_size=300), parallelism=1, split_floor=600)
    assert [(p.start, p.end) for t in floor for p in t if p.index == 0] == [(100, 600), (600, 1100)]


def test_skipped_keys_get_no_task():
    ranges = _kafka([10, 10, 10])
    tasks = plan_tasks(ranges, TaskOptions().skipping(frozenset({"t/1"})), parallelism=1)
    assert [p.index for t in tasks for p in t] == [0, 2]


def _file(i, size, host=None):
    return FileRange(f"id{i}", f"/logs/{i}.log", 0, size, host=host)


def test_node_local_ranges_pack_only_with_their_host_and_keep_it():
    ranges = [_file(i, 10, host="a" if i % 2 else "b") for i in range(8)]
    tasks = plan_tasks(ranges, TaskOptions(target_count=1), parallelism=1, host_of=lambda r: r.host)
    assert len(tasks) == 2
    for t in tasks:
        assert len({p.range.host for p in t}) == 1
    assert [p.index for p in tasks[0]] == [0, 2, 4, 6] and tasks[0][0].range.host == "b"
    _covered_once(ranges, tasks)


@pytest.mark.parametrize("seed", range(40))
def test_property_cover_once_cap_and_determinism(seed):
    rnd = random.Random(seed)
    ranges = [OffsetRange("t", i, s, s + rnd.choice([0, 0, 1, 3, 50, 400, 5000]))
              for i, s in enumerate(rnd.randrange(0, 10**6) for _ in range(rnd.randrange(1, 60)))]
    opts = TaskOptions(target_count=rnd.choice([None, 1, 3, 16]), target_size=rnd.choice([None, 7, 500]),
                       split_size=rnd.choice([None, 0, 100, 1000]))
    unsplittable = {r.partition for r in ranges if rnd.random() < 0.3}
    kwargs = dict(parallelism=rnd.randrange(1, 9), can_split=lambda r: r.partition not in unsplittable)
    tasks = plan_tasks(ranges, opts, **kwargs)
    _covered_once(ranges, tasks)
    total = sum(r.count() for r in ranges)
    count = opts.target_count or kwargs["parallelism"]
    cap = opts.target_size or -(-total // count) if total else 0
    for t in tasks:
        if task_size(t) > cap:
            assert len(t) == 1  # above the cap only as one piece (unsplittable, or the split size is larger)
    firsts = [(t[0].index, t[0].start) for t in tasks]
    assert firsts == sorted(firsts)  # batch order
    assert plan_tasks(list(ranges), opts, **kwargs) == tasks  # same ranges, same tasks


def test_task_options_from_mapping_names_key_value_and_allowed():
    assert TaskOptions.from_mapping({TARGET_COUNT: "4", TARGET_SIZE: 100, SPLIT_SIZE: "0"}) == TaskOptions(4, 100, 0)
    with pytest.raises(ConfigurationError, match=r"option 'tasks.target.count' must be an int >= 1, got 0"):
        TaskOptions.from_mapping({TARGET_COUNT: 0})
    with pytest.raises(ConfigurationError, match=r"'tasks.split.size' must be 0 \(never split\).*got 'big'"):
        TaskOptions.from_mapping({SPLIT_SIZE: "big"})
    with pytest.raises(ConfigurationError, match=r"tasks.target.size.*got True"):
        TaskOptions.from_mapping({TARGET_SIZE: True})


# ---------------------------------------------------------------- file pieces


def _plan(path, **opts):
    o = FileSourceOptions.from_mapping({k.replace("_", "."): v for k, v in opts.items()})
    p = FilePlanner(path, o)
    p.start({})
    return p.plan(), FileRangeReader(path, o)


@pytest.mark.parametrize("opts", [{}, {"include_byte_offset": True}, {"line_max_bytes": 7}])
def test_file_pieces_at_any_bytes_read_every_line_once(tmp_path, opts):
    log = str(tmp_path / "app.log")
    rnd = random.Random(7)
    write(log, "".join("x" * rnd.randrange(0, 20) + f"{i}\n" for i in range(200)))
    (r,), reader = _plan(log, **opts)
    want = list(reader.read(r))
    assert reader.can_split(r)
    for split_size in (1, 2, 5, 13, 64, 500, r.count()):
        ranges = [r]
        tasks = plan_tasks(ranges, TaskOptions(target_size=split_size, split_size=split_size), parallelism=1)
        _covered_once(ranges, tasks)
        got = [rec for t in tasks for p in t for rec in reader.read_part(p.range, p.start, p.end)]
        assert got == want, split_size


def test_compressed_files_are_never_split(tmp_path):
    log = str(tmp_path / "app.log.gz")
    with gzip.open(log, "wt") as f:
        f.write("".join(f"{i}\n" for i in range(100)))
    (r,), reader = _plan(log)
    assert r.compressed and not reader.can_split(r)
    tasks = plan_tasks([r], TaskOptions(target_size=10, split_size=10), parallelism=1, can_split=reader.can_split)
    assert tasks == [(tasks[0][0],)] and tasks[0][0].whole
    with pytest.raises(ConfigurationError, match="compressed files are read whole"):
        list(reader.read_part(r, 0, 10))


def test_losses_of_pieces_read_by_different_tasks_add_up_and_a_retry_counts_once():
    from dstream_exactly_once.core._loss import DataLoss
    from dstream_exactly_once.streaming._data_loss import LossReporter, _LargestPerRange, begin_range, reading_piece

    class Acc:  # the accumulator's merge, without Spark
        def __init__(self):
            self.param, self.value = _LargestPerRange(), {}

        def add(self, v):
            self.value = self.param.addInPlace(self.value, v)

    r = _file(0, 100)
    acc = Acc()
    report = LossReporter(acc)
    begin_range(r)

    def lost(start, end):
        return DataLoss(r.position_key, 0, 100, start, end, "bytes", r.path, "gone")

    reading_piece(r, 0)
    report(lost(10, 50))
    reading_piece(r, 50)  # another task reads the second piece
    report(lost(60, 100))
    reading_piece(r, 0)  # a retry of the first piece
    report(lost(20, 50))
    parts = sorted((d.start, d.end) for v in acc.value.values() for d in v)
    assert parts == [(10, 50), (60, 100)]
