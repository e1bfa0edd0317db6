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


def test_duplicate_or_overlapping_ranges_of_one_partition_are_refused_naming_both(kafka, topic_name, sc):
    """Duplicate or overlapping ranges of one partition would read (and count) records twice;
    disjoint ones are fine, as in Spark."""
    kafka.create_topic(topic_name, 2)
    kafka.produce(topic_name, range(5), partition=0)
    first = OffsetRange(topic_name, 0, 0, 3)
    for second in (first, OffsetRange(topic_name, 0, 2, 5), OffsetRange(topic_name, 0, 1, 2)):
        with pytest.raises(ConfigurationError, match=rf"overlapping ranges of {topic_name}/0: {topic_name}-0 "
                                                     rf"\[0 -> 3\) and {topic_name}-0 \[{second.fromOffset} -> "):
            KafkaUtils.createRDD(sc, params(kafka), [first, second])
    rdd = KafkaUtils.createRDD(sc, params(kafka), [first, OffsetRange(topic_name, 0, 3, 5),
                                                   OffsetRange(topic_name, 1, 0, 0)])
    assert sorted(int(v) for _, v in rdd.collect()) == [0, 1, 2, 3, 4]


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


# ---------------------------------------------------------------------------------------------
# The batch reader against a real broker: same records as kafka-python's own ConsumerRecords
def _kafka_python_records(kafka, topic, partition, until, **consumer_config):
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=kafka.bootstrap, enable_auto_commit=False, **consumer_config)
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        out = []
        while consumer.position(tp) < until:
            out += [r for r in consumer.poll(timeout_ms=1000).get(tp, []) if r.offset < until]
        return out
    finally:
        consumer.close(autocommit=False)


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_batch_reader_returns_what_kafka_python_returns(kafka, topic_name, sc, compression):
    from dstream_exactly_once.kafka import _fetch
    from dstream_exactly_once.kafka import _reader_kafka_python as reader_kafka_python
    from dstream_exactly_once.kafka._consumers import CONSUMERS
    from dstream_exactly_once.kafka._params import parse_kafka_params

    kafka.create_topic(topic_name, 1, {"max.message.bytes": 4_000_000, "segment.bytes": 8_000_000})
    producer = kafka.producer(compression_type=compression, linger_ms=50, batch_size=64 * 1024,
                              max_request_size=4_000_000)
    for i in range(3000):
        producer.send(topic_name, key=None if i % 7 == 0 else f"k{i}".encode(),
                      value=None if i % 11 == 0 and i % 7 else (f"v{i}-" * (i % 50)).encode(),
                      headers=[("h", str(i).encode())] if i % 5 == 0 else [], partition=0)
    producer.send(topic_name, value=b"x" * 2_000_000, partition=0)  # one batch larger than a fetch
    producer.flush()
    producer.close()
    latest = kafka.offsets(topic_name)[0][1]
    expected = _kafka_python_records(kafka, topic_name, 0, latest, max_partition_fetch_bytes=10_000_000)
    assert len(expected) == 3001

    def text(b):
        return None if b is None else b.decode()

    ranges = [OffsetRange(topic_name, 0, 0, 1234), OffsetRange(topic_name, 0, 1234, latest)]
    assert KafkaUtils.createRDD(sc, params(kafka), ranges).collect() == [
        (text(r.key), text(r.value)) for r in expected]
    handled = KafkaUtils.createRDD(sc, params(kafka), ranges, messageHandler=lambda m: (
        m.offset, m.timestamp, m.timestampType, list(m.headers), m.key, m.message)).collect()
    assert handled == [(r.offset, r.timestamp, r.timestamp_type, list(r.headers), text(r.key), text(r.value))
                       for r in expected]

    # this kafka-python fits the batch reader, and its ConsumerRecord fallback reads the same blocks
    config = parse_kafka_params(params(kafka))
    assert _fetch.make_batch_class() is not None
    batched = [b for r in ranges for b in reader_kafka_python.read_range(config, r, metadata=True)]
    saved = _fetch._BATCH_CLASS
    _fetch._BATCH_CLASS = False
    CONSUMERS.clear()
    try:
        fallback = [b for r in ranges for b in reader_kafka_python.read_range(config, r, metadata=True)]
    finally:
        _fetch._BATCH_CLASS = saved
        CONSUMERS.clear()

    def flat(blocks):
        return [rec for b in blocks for rec in zip(b.offsets, b.keys, b.values, b.timestamps, b.timestamp_types,
                                                     b.headers, strict=True)]

    assert flat(batched) == flat(fallback)
    assert [rec[:3] for rec in flat(batched)] == [(r.offset, r.key, r.value) for r in expected]
