"""The public in-memory cluster double (``dstream_exactly_once.testing._fake_kafka``)."""

from __future__ import annotations

import re

import pytest

from dstream_exactly_once.errors import ConfigurationError, DataLossError
from dstream_exactly_once.kafka._metadata import MetadataSource
from dstream_exactly_once.kafka._offsets import OffsetRange, TopicAndPartition
from dstream_exactly_once.kafka._planner import DirectPlanner
from dstream_exactly_once.kafka._strategies import Subscribe
from dstream_exactly_once.testing._fake_kafka import FakeKafkaCluster

TP = TopicAndPartition


def test_answers_the_metadata_seam_and_follows_changes():
    cluster: MetadataSource = FakeKafkaCluster({"t": [(0, 10), (3, 5)], "__internal": [(0, 1)]})
    assert cluster.topics() == {"t", "__internal"}
    assert cluster.matching_topics(re.compile(r".*")) == {"t"}
    assert cluster.partitions(["t"]) == {"t": [0, 1]}
    assert cluster.earliest([TP("t", 0), TP("t", 1)]) == {TP("t", 0): 0, TP("t", 1): 3}
    assert cluster.latest([TP("t", 1)]) == {TP("t", 1): 5}
    fake = FakeKafkaCluster({"t": [(0, 10)]})
    fake.produce("t", 0, 4)
    fake.delete_records("t", 0, 6)
    assert fake.add_partition("t", 2, 9) == 1
    assert fake.earliest([TP("t", 0), TP("t", 1)]) == {TP("t", 0): 6, TP("t", 1): 2}
    assert fake.latest([TP("t", 0)]) == {TP("t", 0): 14}
    assert fake.calls == ["earliest", "latest"]


def test_deleted_and_unknown_topics_fail_as_the_real_metadata_does():
    cluster = FakeKafkaCluster({"t": [(0, 10)]})
    cluster.delete_topic("t")
    with pytest.raises(ConfigurationError, match="unknown topic"):
        cluster.partitions(["t"])
    with pytest.raises(DataLossError, match="t-0"):
        cluster.latest([TP("t", 0)])
    cluster.create_topic("t", [(0, 2)])  # recreated
    assert cluster.latest([TP("t", 0)]) == {TP("t", 0): 2}
    with pytest.raises(DataLossError, match="t-1"):
        cluster.earliest([TP("t", 1)])


def test_bad_changes_are_refused():
    cluster = FakeKafkaCluster({"t": [(5, 10)]})
    with pytest.raises(ValueError, match=r"before must lie in \[5, 10\] for t-0, got 11"):
        cluster.delete_records("t", 0, 11)
    with pytest.raises(ValueError, match="n must be >= 0, got -1"):
        cluster.produce("t", 0, -1)
    with pytest.raises(KeyError, match="no topic 'u'"):
        cluster.produce("u", 0, 1)
    with pytest.raises(KeyError, match="'t' has partitions 0..0, got 3"):
        cluster.produce("t", 3, 1)
    with pytest.raises(ValueError, match="0 <= earliest <= latest"):
        cluster.create_topic("v", [(4, 2)])


def test_the_docstring_example():
    cluster = FakeKafkaCluster({"events": [(0, 10), (0, 4)]})
    planner = DirectPlanner(cluster, Subscribe(["events"]), auto_offset_reset="earliest")
    planner.start()
    planner.advance(planner.plan(1.0))
    cluster.produce("events", 1, 3)
    cluster.delete_records("events", 0, 8)
    assert planner.plan(1.0) == [OffsetRange("events", 0, 10, 10), OffsetRange("events", 1, 4, 7)]
    assert cluster.calls[:3] == ["partitions", "earliest", "latest"]
