"""CommitQueue (Spark 0-10's commitAsync queue) and the 0-10 argument unpacking, without a broker."""

from __future__ import annotations

import pytest

from dstream_exactly_once import (
    ConfigurationError,
    ConsumerStrategies,
    LocationStrategies,
    OffsetRange,
    TopicAndPartition,
)
from dstream_exactly_once.kafka._commit_queue import CommitQueue
from dstream_exactly_once.kafka._spark_strategy_names import direct_stream_args


class FakeGroup:
    group_id = "g"

    def __init__(self, fail=None):
        self.fail = fail
        self.commits = []

    def commit(self, offsets):
        if self.fail:
            raise self.fail
        self.commits.append(dict(offsets))


def test_queued_ranges_merge_to_the_highest_until_offset_and_call_back():
    group = FakeGroup()
    queue = CommitQueue(group)
    calls = []
    queue.add([OffsetRange("t", 0, 0, 5), OffsetRange("t", 1, 0, 3)], lambda o, e: calls.append((o, e)))
    queue.add([OffsetRange("t", 0, 5, 9)])
    assert queue.commit_all() == {TopicAndPartition("t", 0): 9, TopicAndPartition("t", 1): 3}
    assert group.commits == [{TopicAndPartition("t", 0): 9, TopicAndPartition("t", 1): 3}]
    assert calls == [({TopicAndPartition("t", 0): 9, TopicAndPartition("t", 1): 3}, None)]
    assert queue.commit_all() is None and queue.pending() == 0


def test_a_failed_commit_goes_to_the_callback_and_a_raising_callback_is_contained():
    error = RuntimeError("coordinator gone")
    queue = CommitQueue(FakeGroup(fail=error))
    calls = []

    def bad(_offsets, _exc):
        raise ValueError("user bug")

    queue.add([OffsetRange("t", 0, 0, 2)], bad)
    queue.add([OffsetRange("t", 0, 2, 4)], lambda o, e: calls.append((o, e)))
    assert queue.commit_all() is None
    assert calls == [({TopicAndPartition("t", 0): 4}, error)]
    assert queue.failures == 1


def test_010_arguments_unpack_and_008_arguments_pass_through():
    params = {"bootstrap.servers": "h:9092"}
    strategy = ConsumerStrategies.Subscribe(["a"], params)
    assert direct_stream_args(LocationStrategies.PreferConsistent, strategy, None) == (None, params, strategy)
    assert direct_stream_args(["a"], params, None) == (["a"], params, None)
    assert direct_stream_args(None, None, strategy) == (None, params, strategy)
    with pytest.raises(ConfigurationError, match="give the ConsumerStrategy once"):
        direct_stream_args(LocationStrategies.PreferBrokers, strategy, strategy)


def test_location_strategies_are_values_callable_java_style():
    assert LocationStrategies.PreferConsistent() is LocationStrategies.PreferConsistent
    fixed = LocationStrategies.PreferFixed({TopicAndPartition("a", 0): "h1"})
    assert fixed.host_map == {TopicAndPartition("a", 0): "h1"}
    assert repr(fixed).startswith("LocationStrategies.PreferFixed(")
    with pytest.raises(ConfigurationError, match=r"PreferFixed's keys must be TopicAndPartition"):
        LocationStrategies.PreferFixed({"a": "h1"})
