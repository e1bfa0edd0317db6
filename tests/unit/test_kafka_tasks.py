"""Kafka streams on the task planner, without Spark or a broker: the conf keys and their defaults per
stream kind, the RDD shape each output pattern gets, how a task's pieces become consumer reads, and
losses found in a piece reported against the whole range."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from dstream_exactly_once.core._loss import DataLoss
from dstream_exactly_once.core._tasks import Piece, TaskOptions, plan_tasks, task_size
from dstream_exactly_once.errors import ConfigurationError
from dstream_exactly_once.kafka._offsets import OffsetRange
from dstream_exactly_once.kafka._params import parse_kafka_params
from dstream_exactly_once.kafka._range_reader import SPLIT_FLOOR, KafkaRangeReader, _groups, _WholeRangeLosses
from dstream_exactly_once.kafka.spark._direct import ReadOptions
from dstream_exactly_once.kafka.spark._rdd import per_range
from dstream_exactly_once.streaming._exactly_once import ExactlyOnceDStream

READER = KafkaRangeReader(parse_kafka_params({"bootstrap.servers": "localhost:9"}))


def _ranges(sizes, topic="t"):
    return [OffsetRange(topic, i, 1000, 1000 + n) for i, n in enumerate(sizes)]


def test_direct_streams_keep_one_task_per_range_and_exactly_once_streams_pack_by_default():
    opts = ReadOptions({})
    assert opts.task_options(pack_by_default=False) is None
    assert opts.task_options(pack_by_default=True) == TaskOptions()
    packed = ReadOptions({"spark.streaming.kafka.tasks.pack": "true", "spark.streaming.kafka.tasks.target.count": "4",
                          "spark.streaming.kafka.tasks.target.size": "500",
                          "spark.streaming.kafka.tasks.split.size": "0"})
    assert packed.task_options(pack_by_default=False) == TaskOptions(4, 500, 0)
    off = ReadOptions({"spark.streaming.kafka.tasks.pack": "false"})
    assert off.task_options(pack_by_default=True) is None


@pytest.mark.parametrize(("key", "value"), [("spark.streaming.kafka.tasks.target.count", "0"),
                                            ("spark.streaming.kafka.tasks.target.size", "-3"),
                                            ("spark.streaming.kafka.tasks.split.size", "lots"),
                                            ("spark.streaming.kafka.tasks.pack", "maybe")])
def test_a_bad_task_option_names_the_key_and_the_value(key, value):
    with pytest.raises(ConfigurationError) as err:
        ReadOptions({key: value})
    assert key in str(err.value) and repr(value) in str(err.value)


def _shape(outputs, pack_partitions=False):
    fake = SimpleNamespace(_outputs=outputs, committer=None, _pack_partitions=pack_partitions)
    return ExactlyOnceDStream._task_shape(fake, TaskOptions(), None)  # type: ignore[arg-type]


def test_output_patterns_shape_kafka_tasks_as_file_tasks():
    whole_batch = _shape(["commit_each_batch"])
    assert whole_batch.pack and whole_batch.split and not per_range(whole_batch)
    per_range_commit = _shape(["commit_each_partition"])  # the function gets one range per task
    assert not per_range_commit.pack and not per_range_commit.split
    per_task = _shape(["commit_each_partition"], pack_partitions=True)
    assert per_task.pack and not per_task.split and not per_range(per_task)
    labels = _shape(["write_each_partition"])
    assert per_range(labels)  # one partition per range, empty ones too: partition i is range i
    assert per_range(None)


def test_a_hundred_small_partitions_pack_into_parallelism_tasks_and_a_huge_one_splits():
    ranges = _ranges([10] * 100 + [0] * 5)
    tasks = plan_tasks(ranges, TaskOptions(), parallelism=2, can_split=READER.can_split, split_floor=SPLIT_FLOOR)
    assert len(tasks) == 2 and sum(task_size(t) for t in tasks) == 1000
    big = _ranges([10, 3 * SPLIT_FLOOR + 1])
    tasks = plan_tasks(big, TaskOptions(), parallelism=2, can_split=READER.can_split, split_floor=SPLIT_FLOOR)
    pieces = [p for t in tasks for p in t if p.index == 1]
    assert len(pieces) == 2 and pieces[0].start == big[1].start and pieces[-1].end == big[1].end
    no_split = plan_tasks(big, TaskOptions(split_size=0), parallelism=2, can_split=READER.can_split)
    assert [p for t in no_split for p in t if p.index == 1] == [Piece(1, big[1], big[1].start, big[1].end)]


def test_a_task_reads_one_range_per_partition_merging_pieces_that_follow_each_other():
    a, b = OffsetRange("t", 0, 0, 100), OffsetRange("t", 1, 5, 9)
    task = (Piece(0, a, 0, 25), Piece(0, a, 25, 50), Piece(1, b, 5, 9))
    assert _groups(task) == [[(OffsetRange("t", 0, 0, 50), a), (b, b)]]
    # the same partition again, not continuing (createRDD allows two ranges of one partition): a new read
    c = OffsetRange("t", 0, 200, 210)
    assert _groups((Piece(0, a, 0, 100), Piece(1, b, 5, 9), Piece(2, c, 200, 210))) == [[(a, a), (b, b)], [(c, c)]]
    assert _groups((Piece(0, OffsetRange("t", 0, 7, 7), 7, 7),)) == []


def test_a_loss_in_a_piece_is_reported_against_its_whole_range():
    whole = OffsetRange("t", 0, 0, 100)
    seen = []
    remap = _WholeRangeLosses(seen.append, {whole.position_key: whole})
    remap(DataLoss(whole.position_key, 50, 75, 50, 60, "offsets", "t-0", "deleted"))
    assert seen == [DataLoss(whole.position_key, 0, 100, 50, 60, "offsets", "t-0", "deleted")]
    assert READER.can_split(whole)
