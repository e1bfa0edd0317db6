"""The task planner on real Spark: a file batch runs as packed and split tasks, ``offsetRanges()``
lists every range, each line is read once, and a task can ask which ranges it holds."""

from __future__ import annotations

import uuid

import pytest
from pyspark.streaming import StreamingContext

from dstream_exactly_once import FileUtils
from dstream_exactly_once.stores import Writes, open_store
from dstream_exactly_once.streaming._task_context import current_pieces

from .streams import run_until

pytestmark = pytest.mark.integration


def _write(path, numbers):
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(f"{n}\n" for n in numbers))


def _inputs(tmp_path):
    for i in range(40):  # 40 small files, then one large one
        _write(tmp_path / f"small-{i:02d}.log", range(i * 10 + 1, i * 10 + 11))
    _write(tmp_path / "zbig.log", range(401, 2401))
    return 2400


def test_batch_packs_small_files_and_splits_a_large_one(sc, tmp_path):
    n = _inputs(tmp_path)
    ssc = StreamingContext(sc, 0.5)
    stream = FileUtils.createDirectFileStream(ssc, f"{tmp_path}/*.log",
                                              {"tasks.target.count": 3, "tasks.split.size": 3000})
    seen, shapes = [], []

    def collect(rdd):
        if not rdd.offsetRanges():
            return
        tagged = rdd.mapPartitions(lambda lines: [(len(current_pieces()), list(lines))]).collect()
        shapes.append((rdd.getNumPartitions(), len(rdd.offsetRanges()), [k for k, _ in tagged]))
        seen.extend(int(x) for _, lines in tagged for x in lines)

    stream.foreachRDD(collect)
    run_until(ssc, lambda: len(seen) >= n, timeout=90)
    assert sorted(seen) == list(range(1, n + 1))  # every line once, across the pieces of zbig.log
    partitions, ranges, pieces_per_task = shapes[0]
    assert ranges == 41  # offsetRanges() lists every file range
    assert partitions < 10 and len(pieces_per_task) == partitions  # not one task per file
    assert max(pieces_per_task) > 1  # small files packed together


@pytest.mark.parametrize("pattern", ["commit_each_batch", "commit_each_partition"])
def test_exactly_once_packed_tasks_commit_every_line_once(sc, tmp_path, pattern):
    n = _inputs(tmp_path)
    url, app = f"sqlite:///{tmp_path}/s.db", f"tasks-{uuid.uuid4().hex[:6]}"
    ssc = StreamingContext(sc, 0.5)
    stream = FileUtils.createExactlyOnceFileStream(ssc, f"{tmp_path}/*.log",
                                                   {"tasks.target.count": 3, "tasks.split.size": 3000},
                                                   store=url, app_id=app)
    held = []
    if pattern == "commit_each_batch":
        def per_batch(batch, rdd):
            held.append(rdd.getNumPartitions())
            total, count = rdd.map(lambda x: (int(x), 1)).fold((0, 0), lambda a, b: (a[0] + b[0], a[1] + b[1]))
            return Writes().incr("n", "sum", total).incr("n", "count", count)

        stream.commit_each_batch(per_batch)
    else:
        def per_task(records, ranges, batch):
            numbers = [int(x) for x in records]
            assert isinstance(ranges, tuple), ranges
            count = len(ranges)
            return Writes().incr("n", "sum", sum(numbers)).incr("n", "count", len(numbers)).incr("n", "tasks", 1) \
                .incr("n", "ranges", count)

        stream.commit_each_partition(per_task, pack=True)

    def done():
        with open_store(url, app) as s:
            return s.get_values("n").get("count", 0) >= n

    run_until(ssc, done, timeout=90)
    with open_store(url, app) as s:
        values = s.get_values("n")
        assert s.load_positions().keys() == {r.position_key for b in [s.get_batch(0)] for r in b.ranges}
    assert values["count"] == n and values["sum"] == n * (n + 1) // 2
    if pattern == "commit_each_batch":
        assert held[0] < 10
    else:
        assert values["ranges"] == 41 and values["tasks"] < 10  # packed, and the large file not split
