"""In a batch whose tasks are planned (packed, split), a range picked by partition index fails loudly.

The Spark 2.4 idiom ``offsetRanges()[TaskContext.get().partitionId()]`` (and ``batch.ranges[...]``) assumes
partition ``i`` reads range ``i``; with packed tasks it would silently name the wrong range. Inside a
task of a planned RDD it raises an error naming ``current_ranges()``; on the driver, and with one task
per range, everything works as in Spark 2.4; iterating, ``len``, ``in`` and slices work everywhere.
"""

from __future__ import annotations

import uuid

import pytest
from pyspark import TaskContext
from pyspark.streaming import StreamingContext

from dstream_exactly_once import ConfigurationError, FileUtils, OutputError, Writes, open_store
from dstream_exactly_once.core._tasks import TaskOptions
from dstream_exactly_once.files import FilePlanner, FileRangeReader
from dstream_exactly_once.files.spark._utils import _file_rdd
from dstream_exactly_once.stores import PlannedBatch
from dstream_exactly_once.streaming._partition_ranges import PlannedRanges, shown_batch
from dstream_exactly_once.streaming._task_context import current_ranges

pytestmark = pytest.mark.integration


def _files(tmp_path, n=6):
    for i in range(n):
        with open(tmp_path / f"f{i}.log", "w", encoding="utf-8") as f:
            f.write("".join(f"{i * 100 + k}\n" for k in range(10)))
    planner = FilePlanner(f"{tmp_path}/*.log")
    planner.start({})
    return planner.plan(), FileRangeReader(f"{tmp_path}/*.log")


def test_packed_rdd_refuses_a_range_picked_by_partition_index(sc, tmp_path):
    ranges, reader = _files(tmp_path)
    rdd = _file_rdd(sc, ranges, reader, TaskOptions(target_count=2))
    assert rdd.planned and rdd.getNumPartitions() < len(ranges)
    shown = rdd.offsetRanges()
    assert isinstance(shown, PlannedRanges)
    # the driver: everything a list does
    assert len(shown) == len(ranges) and shown[0] == ranges[0] and list(shown) == list(ranges)
    assert shown[-1] == ranges[-1] and shown[1:3] == list(ranges[1:3]) and ranges[2] in shown
    # a task: iterating, len and slices work ...
    ok = rdd.mapPartitions(lambda it: [(len(shown), sorted(r.path for r in shown), len(shown[:2]))]).collect()
    assert ok[0] == (len(ranges), sorted(r.path for r in ranges), 2)
    # ... and the task's own ranges come from current_ranges()
    mine = rdd.mapPartitions(lambda it: [sorted(r.path for r in current_ranges())]).collect()
    assert sorted(p for paths in mine for p in paths) == sorted(r.path for r in ranges)
    # ... but the partition-index idiom raises, naming the API to use
    with pytest.raises(Exception, match=r"offsetRanges\(\)\[\d\] inside a Spark task.*current_ranges\(\)"):
        rdd.mapPartitions(lambda it: [shown[TaskContext.get().partitionId()].path]).collect()
    batch = shown_batch(PlannedBatch(3, 0, tuple(ranges)), rdd)
    assert batch.ranges == tuple(ranges) and batch.ranges[0] == ranges[0]  # equal, and indexable on the driver
    with pytest.raises(Exception, match=r"batch\.ranges\[\d\] inside a Spark task.*current_ranges\(\)"):
        rdd.mapPartitionsWithIndex(lambda i, it: [batch.ranges[i].path]).collect()


def test_one_task_per_range_keeps_the_spark_2_4_idiom(sc, tmp_path):
    ranges, reader = _files(tmp_path)
    rdd = _file_rdd(sc, ranges, reader, TaskOptions().with_shape(pack=False, split=False))
    assert not rdd.planned and rdd.getNumPartitions() == len(ranges)
    shown = rdd.offsetRanges()
    assert type(shown) is list
    batch = shown_batch(PlannedBatch(3, 0, tuple(ranges)), rdd)
    assert type(batch.ranges) is tuple

    def both(it):
        i = TaskContext.get().partitionId()
        return [(shown[i].path, batch.ranges[i].path)]

    got = rdd.mapPartitions(both).collect()
    assert [p for p, _ in got] == [r.path for r in ranges] == [q for _, q in got]


def test_an_exactly_once_output_using_the_idiom_fails_loudly_and_commits_nothing(sc, tmp_path):
    _files(tmp_path)
    url, app = f"sqlite:///{tmp_path}/s.db", f"idiom-{uuid.uuid4().hex[:6]}"
    ssc = StreamingContext(sc, 0.5)
    stream = FileUtils.createExactlyOnceFileStream(ssc, f"{tmp_path}/*.log", {"tasks.target.count": 2},
                                                   store=url, app_id=app)

    def per_range_counts(batch, rdd):  # a ported app's bookkeeping per range
        ranges = rdd.offsetRanges()
        counts = rdd.mapPartitions(lambda it: [(ranges[TaskContext.get().partitionId()].path, sum(1 for _ in it))])
        writes = Writes()
        for path, n in counts.collect():
            writes.incr("per_file", path, n)
        return writes

    stream.commit_each_batch(per_range_counts)
    ssc.start()
    try:
        with pytest.raises((OutputError, ConfigurationError), match=r"current_ranges\(\)"):
            stream.await_termination(60)
    finally:
        ssc.stop(stopSparkContext=False, stopGraceFully=False)
    with open_store(url, app) as store:
        assert store.get_values("per_file") == {} and store.last_committed_batch_id() is None
