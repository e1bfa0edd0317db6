"""KafkaUtils.createRDD against a real broker and a local[2] SparkContext."""

from __future__ import annotations

import pytest

from dstream_exactly_once import (
    Broker,
    ConfigurationError,
    DecodeError,
    KafkaMessageAndMetadata,
    KafkaUtils,
    OffsetRange,
    OffsetRangeError,
    TopicAndPartition,
    current_offset_range,
)


def params(kafka, **extra):
    return {"bootstrap.servers": kafka.bootstrap, **extra}


def test_rdd_reads_exactly_the_given_ranges(kafka, topic_name, sc):
    kafka.create_topic(topic_name, 3)
    kafka.produce(topic_name, range(300), partitions=3)  # value i -> partition i % 3
    ranges = [OffsetRange(topic_name, 0, 10, 20), OffsetRange(topic_name, 2, 0, 5), OffsetRange(topic_name, 1, 7, 7)]
    rdd = KafkaUtils.createRDD(sc, params(kafka), ranges)
    assert rdd.offsetRanges() == ranges
    assert rdd.getNumPartitions() == 3
    per_partition = rdd.glom().collect()
    assert [sorted(int(v) for _, v in part) for part in per_partition] == [
        [3 * i for i in range(10, 20)], [3 * i + 2 for i in range(0, 5)], []]


def test_message_handler_sees_every_field(kafka, topic_name, sc):
    kafka.create_topic(topic_name, 1)
    kafka.produce(topic_name, ["v0", "v1"], key="k", partition=0, headers=[("h", b"x")])
    rdd = KafkaUtils.createRDD(
        sc, params(kafka), [OffsetRange(topic_name, 0, 0, 2)],
        messageHandler=lambda m: (m.topic, m.partition, m.offset, m.key, m.message, m.timestamp > 0,
                                  m.timestampType, list(m.headers), isinstance(m, KafkaMessageAndMetadata)))
    assert rdd.collect() == [
        (topic_name, 0, 0, "k", "v0", True, 0, [("h", b"x")], True),
        (topic_name, 0, 1, "k", "v1", True, 0, [("h", b"x")], True),
    ]


def test_current_offset_range_on_executors(kafka, topic_name, sc):
    kafka.create_topic(topic_name, 2)
    kafka.produce(topic_name, range(20), partitions=2)
    ranges = [OffsetRange(topic_name, 0, 0, 10), OffsetRange(topic_name, 1, 2, 10)]
    rdd = KafkaUtils.createRDD(sc, params(kafka), ranges)
    seen = rdd.mapPartitions(lambda it: [(current_offset_range(), sum(1 for _ in it))]).collect()
    assert seen == [(ranges[0], 10), (ranges[1], 8)]


def test_transactional_topic_with_aborted_records_and_markers(kafka, topic_name, sc):
    kafka.create_topic(topic_name, 1)
    kafka.produce_transactional(topic_name, [(["a", "b"], True), (["x", "y"], False), (["c"], True)])
    earliest, latest = kafka.offsets(topic_name)[0]
    # a,b,marker, x,y,abort-marker, c,marker -> 8 offsets; the range ends on the last commit marker
    assert (earliest, latest) == (0, 8)
    committed = KafkaUtils.createRDD(sc, params(kafka, **{"isolation.level": "read_committed"}),
                                     [OffsetRange(topic_name, 0, 0, latest)])
    assert committed.values().collect() == ["a", "b", "c"]
    # a range that ends right on the first commit marker
    head = KafkaUtils.createRDD(sc, params(kafka, **{"isolation.level": "read_committed"}),
                                [OffsetRange(topic_name, 0, 0, 3)])
    assert head.values().collect() == ["a", "b"]
    uncommitted = KafkaUtils.createRDD(sc, params(kafka), [OffsetRange(topic_name, 0, 0, latest)])
    assert uncommitted.values().collect() == ["a", "b", "x", "y", "c"]


def test_compacted_topic_reads_with_gaps(kafka, topic_name, sc):
    kafka.create_topic(topic_name, 1, {"cleanup.policy": "compact", "segment.ms": 100,
                                       "min.cleanable.dirty.ratio": 0.01, "delete.retention.ms": 100})
    import time

    for round_ in range(6):
        kafka.produce(topic_name, [f"{k}-{round_}" for k in "abcd"], keys=list("abcd"), partition=0)
        time.sleep(0.3)
    deadline = time.time() + 60
    latest = kafka.offsets(topic_name)[0][1]
    while time.time() < deadline:
        got = KafkaUtils.createRDD(sc, params(kafka), [OffsetRange(topic_name, 0, 0, latest)]).collect()
        if len(got) < latest:
            break
        kafka.produce(topic_name, ["e-x"], keys=["e"], partition=0)  # roll the active segment
        time.sleep(1)
    assert len(got) < latest, "the log cleaner never compacted the topic"
    values = dict(got)
    assert values["a"] == "a-5" and values["d"] == "d-5"


def test_bad_ranges_are_rejected_before_reading(kafka, topic_name, sc):
    kafka.create_topic(topic_name, 1)
    kafka.produce(topic_name, range(5), partition=0)
    with pytest.raises(OffsetRangeError, match=r"\[0, 5\]"):
        KafkaUtils.createRDD(sc, params(kafka), [OffsetRange(topic_name, 0, 0, 6)])
    with pytest.raises(OffsetRangeError, match="do not exist"):
        KafkaUtils.createRDD(sc, params(kafka), [OffsetRange(topic_name, 3, 0, 1)])
    with pytest.raises(ConfigurationError, match="unknown topic"):
        KafkaUtils.createRDD(sc, params(kafka), [OffsetRange("no-such-" + topic_name, 0, 0, 1)])
    with pytest.raises(OffsetRangeError, match="fromOffset 4 > untilOffset 2"):
        OffsetRange(topic_name, 0, 4, 2)
    with pytest.raises(ConfigurationError, match="list of OffsetRange"):
        KafkaUtils.createRDD(sc, params(kafka), OffsetRange(topic_name, 0, 0, 1))  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="leaders"):
        KafkaUtils.createRDD(sc, params(kafka), [OffsetRange(topic_name, 0, 0, 1)], leaders={"x": 1})
    rdd = KafkaUtils.createRDD(sc, params(kafka), [OffsetRange(topic_name, 0, 0, 1)],
                               leaders={TopicAndPartition(topic_name, 0): Broker("127.0.0.1", kafka.port)})
    assert rdd.count() == 1


def test_undecodable_record_names_its_coordinates(kafka, topic_name, sc):
    kafka.create_topic(topic_name, 1)
    kafka.produce(topic_name, [b"ok", b"\xff\xfe"], partition=0)
    rdd = KafkaUtils.createRDD(sc, params(kafka), [OffsetRange(topic_name, 0, 0, 2)])
    with pytest.raises(Exception) as info:
        rdd.collect()
    assert f"{topic_name}-0 offset 1" in str(info.value)
    assert DecodeError.__name__ in str(info.value)


def test_records_deleted_by_retention(kafka, topic_name, sc):
    kafka.create_topic(topic_name, 1)
    kafka.produce(topic_name, range(50), partition=0)
    rdd = KafkaUtils.createRDD(sc, params(kafka), [OffsetRange(topic_name, 0, 0, 50)])
    kafka.delete_records(topic_name, {0: 20})
    with pytest.raises(Exception, match=r"offsets \[0, 20\).*were deleted"):
        rdd.collect()
    # the range was valid when planned; the records vanished before the read: clamp policy
    clamped = KafkaUtils.createRDD(sc, params(kafka), [OffsetRange(topic_name, 0, 20, 50)],
                                   failOnDataLoss=False)
    kafka.delete_records(topic_name, {0: 30})
    assert sorted(int(v) for v in clamped.values().collect()) == list(range(30, 50))
