"""One consumer reads many Kafka ranges at once (kafka/_multi_reader.py) against the real broker: the
records of every range, in per-partition order, none past its end offset; the data-loss policy as
the single-range reader's."""

from __future__ import annotations

import pytest

from dstream_exactly_once import DataLossError, OffsetRange
from dstream_exactly_once.kafka import _multi_reader as multi_reader
from dstream_exactly_once.kafka import _multi_reader_confluent as multi_reader_confluent
from dstream_exactly_once.kafka import _reader_confluent as reader_confluent
from dstream_exactly_once.kafka import _reader_kafka_python as reader
from dstream_exactly_once.kafka._consumers import ConsumerCache
from dstream_exactly_once.kafka._params import parse_kafka_params

pytestmark = pytest.mark.integration

PARTITIONS = 50

# (multi-range reader, a fresh consumer cache of its client)
READERS = {
    "kafka-python": (multi_reader.read_ranges, ConsumerCache),
    "confluent-kafka": (multi_reader_confluent.read_ranges,
                        lambda: ConsumerCache(create=reader_confluent._Consumer, close=reader_confluent._close,
                                              share_idle=False)),
}


def _records(blocks):
    return [rec for b in blocks for rec in zip(b.offsets, b.keys, b.values, strict=True)]


def _fill(kafka, topic):
    kafka.create_topic(topic, PARTITIONS)
    producer = kafka.producer(linger_ms=20)
    for i in range(PARTITIONS * 40):
        p = i % PARTITIONS
        producer.send(topic, key=f"p{p}".encode(), value=f"{p}:{i // PARTITIONS}".encode(), partition=p)
    producer.flush()
    producer.close()


@pytest.mark.parametrize("client", list(READERS))
def test_fifty_partitions_read_by_one_consumer_exactly_their_ranges(kafka, topic_name, client):
    read_ranges, new_cache = READERS[client]
    _fill(kafka, topic_name)
    config = parse_kafka_params({"bootstrap.servers": kafka.bootstrap})
    # ends below the log end (nothing past them may appear), empty ranges, a range at the log start
    ranges = [OffsetRange(topic_name, p, p % 7, 40 - (p % 5)) if p % 10 else OffsetRange(topic_name, p, 5, 5)
              for p in range(PARTITIONS)]
    cache = new_cache()
    try:
        blocks = list(read_ranges(config, ranges, cache=cache))
        assert cache.created == 1  # one consumer for the whole task
    finally:
        cache.clear()
    got = _records(blocks)
    want = [rec for r in ranges for rec in _records(reader.read_range(config, r))]
    assert got == want  # range by range in the given order, each in offset order
    by_partition = {}
    for off, key, value in got:
        by_partition.setdefault(int(key[1:]), []).append((off, value))
    for r in ranges:
        mine = by_partition.get(r.partition, [])
        assert [o for o, _ in mine] == list(range(r.fromOffset, r.untilOffset))
        assert all(v == f"{r.partition}:{o}".encode() for o, v in mine)
    assert len(got) == sum(r.count() for r in ranges)


def test_a_packed_read_walks_its_partitions_per_poll_not_per_partition(kafka, topic_name, monkeypatch):
    """kafka-python's ``KafkaConsumer.seek`` copies the whole assignment per call and its ``position``
    walks every assigned partition per call: a packed task that used them per partition did O(P²)
    work (most of a reader's CPU at 500 partitions per task). The reader goes through the
    subscription state instead, so the assignment is walked a few times per poll, not per partition."""
    from kafka.consumer.fetcher import Fetcher
    from kafka.consumer.subscription_state import SubscriptionState

    _fill(kafka, topic_name)
    config = parse_kafka_params({"bootstrap.servers": kafka.bootstrap})
    # every range stops short of the log end, so each partition is still wanted after its first batches
    ranges = [OffsetRange(topic_name, p, 3, 37) for p in range(PARTITIONS)]
    calls = {"walks": 0, "polls": 0}
    real_walk, real_poll = SubscriptionState.assigned_partitions, Fetcher.fetch_records

    def walk(self):
        calls["walks"] += 1
        return real_walk(self)

    def poll(self, *args, **kwargs):
        calls["polls"] += 1
        return real_poll(self, *args, **kwargs)

    monkeypatch.setattr(SubscriptionState, "assigned_partitions", walk)
    monkeypatch.setattr(Fetcher, "fetch_records", poll)
    cache = ConsumerCache()
    try:
        got = _records(multi_reader.read_ranges(config, ranges, cache=cache))
    finally:
        cache.clear()
    assert len(got) == sum(r.count() for r in ranges)  # the records, every one
    assert calls["polls"] >= 1
    # a handful of walks per poll (the client's own), never one per partition
    assert calls["walks"] <= 4 * calls["polls"] + 4 < PARTITIONS, calls


@pytest.mark.parametrize("client", list(READERS))
def test_deleted_offsets_follow_the_data_loss_policy(kafka, topic_name, client):
    read_ranges, new_cache = READERS[client]
    _fill(kafka, topic_name)
    kafka.delete_records(topic_name, {3: 10})
    config = parse_kafka_params({"bootstrap.servers": kafka.bootstrap})
    ranges = [OffsetRange(topic_name, p, 0, 20) for p in range(5)]
    with pytest.raises(DataLossError, match=rf"offsets \[0, 10\) of {topic_name}-3 were deleted"):
        list(read_ranges(config, ranges, cache=new_cache()))
    losses = []
    cache = new_cache()
    try:
        got = _records(read_ranges(config, ranges, cache=cache, fail_on_data_loss=False, on_data_loss=losses.append))
    finally:
        cache.clear()
    assert [(d.position_key, d.start, d.end) for d in losses] == [(f"{topic_name}/3", 0, 10)]
    assert len(got) == 5 * 20 - 10
    assert [o for o, k, _ in got if k == b"p3"] == list(range(10, 20))


@pytest.mark.parametrize("client", list(READERS))
def test_a_packed_read_steps_over_markers_and_aborted_records_of_every_partition(kafka, topic_name, client):
    """Transaction markers and aborted records hold offsets but no record a reader may return: a packed
    task learns from the consumer's position that a partition moved past them (ranges that end on a
    marker or inside an aborted transaction finish, under both isolation levels)."""
    read_ranges, new_cache = READERS[client]
    kafka.create_topic(topic_name, 3)
    for p in range(3):  # a,b,commit(2) x,y,abort(5) c,commit(7) z,abort(9): 10 offsets per partition
        kafka.produce_transactional(topic_name, [(["a", "b"], True), (["x", "y"], False), (["c"], True),
                                                 (["z"], False)], partition=p)
    cases = {"read_committed": [[b"a", b"b", b"c"], [], [b"c"]],
             "read_uncommitted": [[b"a", b"b", b"x", b"y", b"c", b"z"], [b"x", b"y"], [b"c", b"z"]]}
    ranges = [OffsetRange(topic_name, 0, 0, 10), OffsetRange(topic_name, 1, 3, 6), OffsetRange(topic_name, 2, 6, 10)]
    for isolation, want in cases.items():
        config = parse_kafka_params({"bootstrap.servers": kafka.bootstrap, "isolation.level": isolation})
        cache = new_cache()
        try:
            blocks = list(read_ranges(config, ranges, cache=cache))
        finally:
            cache.clear()
        by_partition = {p: [] for p in range(3)}
        for b in blocks:
            by_partition[b.partition].extend(b.values)
        assert [by_partition[p] for p in range(3)] == want, isolation
