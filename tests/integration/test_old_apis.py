"""Spark 2.4's receiver API and Spark 0-10's names on a real broker (issue 15, "every old API ports")."""

from __future__ import annotations

import logging
import threading
import time
import uuid

import pytest
from pyspark.streaming import StreamingContext

from dstream_exactly_once import (
    CanCommitOffsets,
    ConfigurationError,
    ConsumerStrategies,
    KafkaUtils,
    LocationStrategies,
    TopicAndPartition,
)

from .streams import run_until


def group_offsets(kafka, group):
    """The group's committed offsets, read with kafka-python's admin client: {partition: offset}."""
    answer = kafka.admin().list_group_offsets({group: None}).get(group) or {}
    return {tp.partition: meta.offset for tp, meta in answer.items()}


class Values:
    def __init__(self):
        self.lock = threading.Lock()
        self.values = []
        self.batches = 0
        self.batches_at: dict = {}  # len(values) -> batches done when it was first reached

    def keep(self, rdd):
        got = [int(v) for _, v in rdd.collect()]
        with self.lock:
            self.values.extend(got)
            self.batches += 1
            self.batches_at.setdefault(len(self.values), self.batches)

    def batches_after(self, n):
        """Batches processed after the one that brought the values to ``n`` or more (-1: not reached)."""
        with self.lock:
            reached = [b for count, b in self.batches_at.items() if count >= n]
            return self.batches - min(reached) if reached else -1

    def __len__(self):
        with self.lock:
            return len(self.values)


# ------------------------------------------------------------------ createStream
def test_create_stream_commits_after_batches_and_a_second_context_resumes(kafka, topic_name, sc, caplog):
    kafka.create_topic(topic_name, 2)
    kafka.produce(topic_name, range(100), partitions=2)
    group = "g-" + uuid.uuid4().hex[:8]
    params = {"metadata.broker.list": kafka.bootstrap, "auto.offset.reset": "smallest"}
    caplog.set_level(logging.WARNING)

    ssc = StreamingContext(sc, 1)
    stream = KafkaUtils.createStream(ssc, "zk-host:2181", group, {topic_name: 1}, params)
    first = Values()
    stream.foreachRDD(first.keep)
    run_until(ssc, lambda: len(first) >= 100 and group_offsets(kafka, group) == {0: 50, 1: 50})
    assert sorted(first.values) == list(range(100))
    assert group_offsets(kafka, group) == {0: 50, 1: 50}  # committed to Kafka after the batches
    zk = [r for r in caplog.records if "ZooKeeper" in r.getMessage()]
    assert len(zk) == 1 and "zk-host:2181" in zk[0].getMessage()
    assert params == {"metadata.broker.list": kafka.bootstrap, "auto.offset.reset": "smallest"}  # not mutated

    kafka.produce(topic_name, range(100, 140), partitions=2)
    ssc2 = StreamingContext(sc, 1)
    stream2 = KafkaUtils.createStream(ssc2, "zk-host:2181", group, {topic_name: 2}, params)
    second = Values()
    stream2.foreachRDD(second.keep)
    run_until(ssc2, lambda: len(second) >= 40 and group_offsets(kafka, group) == {0: 70, 1: 70})
    assert sorted(second.values) == list(range(100, 140))  # resumed from the group's offsets, not smallest


def test_create_stream_without_committed_offsets_uses_largest_by_default(kafka, topic_name, sc):
    kafka.create_topic(topic_name, 1)
    kafka.produce(topic_name, range(10), partition=0)
    group = "g-" + uuid.uuid4().hex[:8]
    ssc = StreamingContext(sc, 1)
    stream = KafkaUtils.createStream(ssc, "zk:2181", group, {topic_name: 1}, {"bootstrap.servers": kafka.bootstrap})
    got = Values()
    stream.foreachRDD(got.keep)
    kafka.produce(topic_name, range(10, 15), partition=0)  # after the stream took its start (the log end)
    run_until(ssc, lambda: len(got) >= 5 and group_offsets(kafka, group) == {0: 15})
    assert sorted(got.values) == list(range(10, 15))


def test_create_stream_does_not_commit_a_failed_batch(kafka, topic_name, sc):
    kafka.create_topic(topic_name, 1)
    kafka.produce(topic_name, range(20), partition=0)
    group = "g-" + uuid.uuid4().hex[:8]
    ssc = StreamingContext(sc, 1)
    stream = KafkaUtils.createStream(ssc, "zk:2181", group, {topic_name: 1},
                                     {"bootstrap.servers": kafka.bootstrap, "auto.offset.reset": "earliest"})

    def fail(rdd):
        if rdd.offsetRanges() and rdd.offsetRanges()[0].count():
            raise RuntimeError("output failed")

    stream.foreachRDD(fail)
    listener = stream.group_listener
    run_until(ssc, lambda: listener.failed_batch is not None)
    assert group_offsets(kafka, group) == {}
    assert listener.commits == 0


def test_create_stream_refuses_bad_arguments_clearly(kafka, topic_name, sc):
    ssc = StreamingContext(sc, 1)
    with pytest.raises(ConfigurationError, match=r"bootstrap.servers.*metadata.broker.list"):
        KafkaUtils.createStream(ssc, "zk:2181", "g", {topic_name: 1})
    with pytest.raises(ConfigurationError, match=r"topics must be a dict \{topic: numThreads\}"):
        KafkaUtils.createStream(ssc, "zk:2181", "g", [topic_name], {"bootstrap.servers": kafka.bootstrap})
    with pytest.raises(ConfigurationError, match=r"topics\['x'\] must be a thread count"):
        KafkaUtils.createStream(ssc, "zk:2181", "g", {"x": 0}, {"bootstrap.servers": kafka.bootstrap})
    with pytest.raises(ConfigurationError, match=r"groupId must be a non-empty consumer group id"):
        KafkaUtils.createStream(ssc, "zk:2181", "", {"x": 1}, {"bootstrap.servers": kafka.bootstrap})
    with pytest.raises(ConfigurationError, match=r"differs from groupId"):
        KafkaUtils.createStream(ssc, "zk:2181", "g", {"x": 1},
                                {"bootstrap.servers": kafka.bootstrap, "group.id": "other"})
    with pytest.raises(ConfigurationError, match=r"storageLevel must be a pyspark StorageLevel"):
        KafkaUtils.createStream(ssc, "zk:2181", "g", {"x": 1}, {"bootstrap.servers": kafka.bootstrap}, "MEMORY")


# ------------------------------------------------------------------ commitAsync
def test_commit_async_commits_to_the_group_and_calls_back(kafka, topic_name, sc):
    kafka.create_topic(topic_name, 2)
    kafka.produce(topic_name, range(60), partitions=2)
    group = "g-" + uuid.uuid4().hex[:8]
    ssc = StreamingContext(sc, 1)
    stream = KafkaUtils.createDirectStream(ssc, [topic_name], {"bootstrap.servers": kafka.bootstrap,
                                                               "auto.offset.reset": "smallest", "group.id": group})
    assert isinstance(stream, CanCommitOffsets)
    got = Values()
    calls = []

    def output(rdd):
        got.keep(rdd)
        stream.commitAsync(rdd.offsetRanges(), lambda offsets, exc: calls.append((offsets, exc)))

    stream.foreachRDD(output)
    want = {TopicAndPartition(topic_name, 0): 30, TopicAndPartition(topic_name, 1): 30}
    run_until(ssc, lambda: any(offsets == want for offsets, _ in list(calls)))
    assert all(exc is None for _, exc in calls)
    assert group_offsets(kafka, group) == {0: 30, 1: 30}
    assert sorted(got.values) == list(range(60))


def test_commit_async_needs_a_group_id_and_ranges(kafka, topic_name, sc):
    kafka.create_topic(topic_name, 1)
    ssc = StreamingContext(sc, 1)
    stream = KafkaUtils.createDirectStream(ssc, [topic_name], {"bootstrap.servers": kafka.bootstrap})
    with pytest.raises(ConfigurationError, match=r"commitAsync needs kafkaParams\['group.id'\]"):
        stream.commitAsync([])
    with pytest.raises(ConfigurationError, match=r"offsetRanges must be a list of OffsetRange"):
        stream.commitAsync("t-0")
    with pytest.raises(ConfigurationError, match=r"callback must be callable"):
        stream.commitAsync([], callback=42)
    ssc.stop(stopSparkContext=False)


# ------------------------------------------------------------------ 0-10 strategies and timestamps
def test_010_call_form_with_location_and_consumer_strategies(kafka, topic_name, sc):
    kafka.create_topic(topic_name, 2)
    kafka.produce(topic_name, range(20), partitions=2)
    params = {"bootstrap.servers": kafka.bootstrap, "auto.offset.reset": "earliest"}
    ssc = StreamingContext(sc, 1)
    stream = KafkaUtils.createDirectStream(
        ssc, LocationStrategies.PreferConsistent,
        ConsumerStrategies.Subscribe([topic_name], params, {TopicAndPartition(topic_name, 1): 5}))
    got = Values()
    stream.foreachRDD(got.keep)
    run_until(ssc, lambda: len(got) >= 15)
    assert sorted(got.values) == sorted(list(range(0, 20, 2)) + list(range(11, 20, 2)))


def test_assign_with_kafka_python_topic_partitions_and_prefer_fixed(kafka, topic_name, sc):
    from kafka import TopicPartition

    kafka.create_topic(topic_name, 2)
    kafka.produce(topic_name, range(10), partitions=2)
    params = {"bootstrap.servers": kafka.bootstrap, "auto.offset.reset": "earliest"}
    location = LocationStrategies.PreferFixed({TopicPartition(topic_name, 0): "host-a"})
    ssc = StreamingContext(sc, 1)
    stream = KafkaUtils.createDirectStream(ssc, location,
                                           ConsumerStrategies.Assign([TopicPartition(topic_name, 0)], params))
    got = Values()
    stream.foreachRDD(got.keep)
    run_until(ssc, lambda: len(got) >= 5)
    assert sorted(got.values) == [0, 2, 4, 6, 8]


def test_strategies_refused_with_clear_errors(kafka, topic_name, sc):
    params = {"bootstrap.servers": kafka.bootstrap}
    ssc = StreamingContext(sc, 1)
    with pytest.raises(ConfigurationError, match=r"after a LocationStrategy, pass a ConsumerStrategies"):
        KafkaUtils.createDirectStream(ssc, LocationStrategies.PreferBrokers, params)
    with pytest.raises(ConfigurationError, match=r"carries no kafkaParams"):
        KafkaUtils.createDirectStream(ssc, LocationStrategies.PreferBrokers(), ConsumerStrategies.Subscribe(["a"]))
    with pytest.raises(ConfigurationError, match=r"the 0-10 form is createDirectStream"):
        KafkaUtils.createDirectStream(ssc, [topic_name], ConsumerStrategies.Subscribe([topic_name], params))
    with pytest.raises(ConfigurationError, match=r"PreferFixed\[a-0\] must be a host name"):
        LocationStrategies.PreferFixed({TopicAndPartition("a", 0): ""})
    with pytest.raises(ConfigurationError, match=r"offsets keys must be TopicAndPartition"):
        ConsumerStrategies.Subscribe(["a"], params, {("a", 0): 1})
    with pytest.raises(ConfigurationError, match=r"offsets name partitions that are not assigned: a-1"):
        ConsumerStrategies.Assign([TopicAndPartition("a", 0)], params, {TopicAndPartition("a", 1): 3})
    with pytest.raises(ConfigurationError, match=r"from_timestamp_ms needs kafkaParams"):
        ConsumerStrategies.Subscribe(["a"], from_timestamp_ms=1)
    with pytest.raises(ConfigurationError, match=r"from_timestamp_ms must be an int of milliseconds"):
        ConsumerStrategies.Subscribe(["a"], params, from_timestamp_ms=-5)


def test_start_from_a_timestamp(kafka, topic_name, sc):
    kafka.create_topic(topic_name, 2)
    base = int(time.time() * 1000) - 60_000  # recent: retention must not delete the records
    producer = kafka.producer()
    try:  # partition 0: offsets 0..9, one second apart; partition 1: every record before the timestamp
        for i in range(10):
            producer.send(topic_name, value=str(i).encode(), partition=0, timestamp_ms=base + 1000 * i)
            producer.send(topic_name, value=str(100 + i).encode(), partition=1, timestamp_ms=base - 30_000 + i)
        producer.flush()
    finally:
        producer.close()
    params = {"bootstrap.servers": kafka.bootstrap}
    strategy = ConsumerStrategies.Subscribe([topic_name], params, from_timestamp_ms=base + 4500)
    assert strategy.offsets == {TopicAndPartition(topic_name, 0): 5, TopicAndPartition(topic_name, 1): 10}
    ssc = StreamingContext(sc, 1)
    stream = KafkaUtils.createDirectStream(ssc, None, params, strategy=strategy)  # type: ignore[arg-type]
    got = Values()
    stream.foreachRDD(got.keep)
    # one more batch after the fifth value: a record before the timestamp would have come with it
    run_until(ssc, lambda: got.batches_after(5) >= 1)
    assert sorted(got.values) == [5, 6, 7, 8, 9]
    per_partition = ConsumerStrategies.Assign([TopicAndPartition(topic_name, 0)], params,
                                              from_timestamp_ms={TopicAndPartition(topic_name, 0): base + 7000})
    assert per_partition.offsets == {TopicAndPartition(topic_name, 0): 7}
