"""A read of records the broker holds always finishes (real broker, both readers, packed and unpacked).

Three families:

- **the producer stops**: an idempotent ``acks=all`` producer with ``linger_ms=20`` spreads records
  over 10, 100 and 1,000 partitions, ends with a burst flushed as larger batches, and stops; the
  ranges are planned right after, from positions inside producer batches to the log end (the
  shape of the batch a stream plans when its producer goes quiet). Every range is read whole,
  packed (one consumer, many partitions) and unpacked (a read per range), exactly once;
- **a client that does not return records the broker holds**: the consumer the read starts with
  never fetches one partition (its fetch state is wedged, as a client defect leaves it). The read
  looks at the broker, finds the records present and reads them with a fresh consumer without a
  fetch session, well before the poll timeout, and says so in a WARN line; it never reports the
  broker unreachable;
- **offsets beyond the log end** (the topic was truncated or recreated after planning): the
  data-loss policy at once — DataLossError naming the log end, or the loss reported under
  ``fail_on_data_loss=False`` — instead of polling until the timeout and blaming the broker.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable, Dict, List

import pytest

from dstream_exactly_once import DataLossError, OffsetRange
from dstream_exactly_once.kafka import _multi_reader as multi_reader
from dstream_exactly_once.kafka import _multi_reader_confluent as multi_reader_confluent
from dstream_exactly_once.kafka import _reader_confluent as reader_confluent
from dstream_exactly_once.kafka import _reader_kafka_python as reader
from dstream_exactly_once.kafka._consumers import ConsumerCache, _kafka_python_consumer
from dstream_exactly_once.kafka._params import parse_kafka_params

pytestmark = pytest.mark.integration

#: a poll timeout far above the time a stalled read now needs, far below a stuck test's patience
POLL_MS = 30000


def _confluent_cache(create: Any = None) -> ConsumerCache:
    return ConsumerCache(create=create or reader_confluent._Consumer, close=reader_confluent._close,
                         share_idle=False)


READERS: Dict[str, Dict[str, Any]] = {
    "kafka-python": {"many": multi_reader.read_ranges, "one": reader.read_range, "cache": ConsumerCache},
    "confluent-kafka": {"many": multi_reader_confluent.read_ranges, "one": reader_confluent.read_range,
                        "cache": _confluent_cache},
}


def _offsets(blocks: Any) -> Dict[int, List[int]]:
    got: Dict[int, List[int]] = {}
    for b in blocks:
        got.setdefault(b.partition, []).extend(b.offsets)
    return got


def _produce_then_stop(kafka: Any, topic: str, partitions: int, rounds: int) -> None:
    """``rounds`` records per partition at a steady pace with the stream's producer settings, then a
    burst of four more per partition flushed at once (larger batches), then close."""
    producer = kafka.producer(enable_idempotence=True, acks="all", linger_ms=20)
    try:
        for i in range(rounds * partitions):
            producer.send(topic, value=b"v%d" % i, partition=i % partitions)
            if i % 200 == 199:
                time.sleep(0.02)  # a few records per linger window, as a paced producer sends them
        for i in range(4 * partitions):
            producer.send(topic, value=b"burst%d" % i, partition=i % partitions)
        producer.flush()
    finally:
        producer.close()


@pytest.mark.parametrize("partitions", [10, 100, 1000])
@pytest.mark.parametrize("client", list(READERS))
def test_ranges_planned_right_after_the_producer_stops_are_read_whole(kafka, topic_name, client, partitions):
    kafka.create_topic(topic_name, partitions)
    _produce_then_stop(kafka, topic_name, partitions, rounds=6 if partitions < 1000 else 2)
    ends = {p: end for p, (_start, end) in kafka.offsets(topic_name).items()}
    assert all(end >= 6 for end in ends.values())
    config = parse_kafka_params({"bootstrap.servers": kafka.bootstrap})
    # from a position inside the steady part (inside a producer batch) to the log end, and a second
    # set ending inside the final burst's batches
    to_end = [OffsetRange(topic_name, p, 1 + p % 3, ends[p]) for p in range(partitions)]
    inside = [OffsetRange(topic_name, p, 0, ends[p] - 1 - p % 2) for p in range(partitions)]
    use = READERS[client]
    for ranges in (to_end, inside):
        cache = use["cache"]()
        try:
            tasks = [ranges[i::4] for i in range(4)]  # four packed tasks, as the task planner makes them
            packed = _offsets(b for task in tasks for b in use["many"](config, task, cache=cache,
                                                                        poll_timeout_ms=POLL_MS))
            sample = ranges if partitions <= 100 else ranges[::10]
            unpacked = _offsets(b for r in sample for b in use["one"](config, r, cache=cache, poll_timeout_ms=POLL_MS))
        finally:
            cache.clear()
        for r in ranges:
            assert packed.get(r.partition, []) == list(range(r.fromOffset, r.untilOffset)), r
        for r in sample:
            assert unpacked.get(r.partition, []) == list(range(r.fromOffset, r.untilOffset)), r


# ---------------------------------------------------------------- a cached consumer's parked records


@pytest.mark.parametrize("second", ["packed", "unpacked"])
def test_a_partition_paused_mid_fetch_is_read_again_by_the_same_cached_consumer(kafka, topic_name, second, caplog,
                                                                                 monkeypatch):
    """kafka-python 3.0 parks the not-yet-returned records of a partition paused mid-fetch and fetches
    nothing more for it while they are parked; it gives them back only when no other partition's
    records are in line, which after the first fetch is never. The packed reader pauses a partition
    the moment its range ends, so the cached consumer used to starve that partition in every later
    read of it (the stream waited until the stall look found the records present). Here partition 0's
    first range ends inside its first record batch while two more batches are in hand (one batch per
    poll), then the same cache reads partition 0's next range: at once, with no stall."""
    from dstream_exactly_once.kafka import _fetch

    kafka.create_topic(topic_name, 2)
    for b in range(3):  # three record batches per partition (a flush per produce call)
        kafka.produce(topic_name, [f"b{b}r{i}" for i in range(10)], partitions=2)
    config = parse_kafka_params({"bootstrap.servers": kafka.bootstrap})
    monkeypatch.setattr(_fetch, "POLL_MAX_RECORDS", 1)  # one record batch per poll: partition 0's rest stays in line
    cache = ConsumerCache()
    try:
        ranges = [OffsetRange(topic_name, 0, 0, 2), OffsetRange(topic_name, 1, 0, 15)]
        first = list(multi_reader.read_ranges(config, ranges, cache=cache, poll_timeout_ms=POLL_MS))
        assert _offsets(first) == {0: [0, 1], 1: list(range(15))}
        assert cache.created == 1
        later = OffsetRange(topic_name, 0, 2, 15)
        t0 = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="dstream_exactly_once.kafka._stall"):
            if second == "packed":
                blocks = list(multi_reader.read_ranges(config, [later], cache=cache, poll_timeout_ms=POLL_MS))
            else:
                blocks = list(reader.read_range(config, later, cache=cache, poll_timeout_ms=POLL_MS))
        took = time.monotonic() - t0
    finally:
        cache.clear()
    assert _offsets(blocks) == {0: list(range(2, 15))}
    assert cache.created == 1  # the cached consumer read it, not a new one
    assert not [r.getMessage() for r in caplog.records], "the cached consumer did not return the records"
    assert took < 3, f"the second read took {took:.1f} s"


# ---------------------------------------------------------------- a client that returns nothing


def _kafka_python_wedged(partition: int) -> Callable[..., Any]:
    """A consumer factory whose consumers never fetch ``partition`` (their fetcher leaves it out of
    every fetch request, as a wedged fetch state does): the records stay on the broker, unreturned."""

    def create(config: Any, r: OffsetRange) -> Any:
        consumer = _kafka_python_consumer(config, r)
        fetcher = consumer._fetcher
        fetchable = fetcher._fetchable_partitions
        fetcher._fetchable_partitions = lambda: [tp for tp in fetchable() if tp.partition != partition]
        return consumer

    return create


class _PausedOne:
    """A confluent consumer holder whose consumer keeps ``partition`` paused after every assign."""

    def __init__(self, config: Any, r: OffsetRange, partition: int) -> None:
        self.inner = reader_confluent._Consumer(config, r)
        self.partition = partition
        holder = self

        class Consumer:
            def __getattr__(self, name: str) -> Any:
                return getattr(holder.inner.consumer, name)

            def assign(self, tps: Any) -> None:
                from confluent_kafka import TopicPartition

                holder.inner.consumer.assign(tps)
                holder.inner.consumer.pause([TopicPartition(tp.topic, tp.partition) for tp in tps
                                             if tp.partition == holder.partition])

        self.consumer = Consumer()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def close(self) -> None:
        self.inner.close()


WEDGED = {
    "kafka-python": lambda p: ConsumerCache(create=_kafka_python_wedged(p)),
    "confluent-kafka": lambda p: _confluent_cache(lambda config, r: _PausedOne(config, r, p)),
}


@pytest.mark.parametrize("packed", [True, False], ids=["packed", "unpacked"])
@pytest.mark.parametrize("client", list(READERS))
def test_records_the_client_does_not_return_are_read_with_a_fresh_consumer(kafka, topic_name, client, packed,
                                                                            caplog):
    kafka.create_topic(topic_name, 4)
    kafka.produce(topic_name, [f"r{i}" for i in range(40)], partitions=4)
    config = parse_kafka_params({"bootstrap.servers": kafka.bootstrap})
    ranges = [OffsetRange(topic_name, p, 2, 10) for p in range(4)]
    cache = WEDGED[client](2)
    use = READERS[client]
    t0 = time.monotonic()
    try:
        with caplog.at_level(logging.WARNING, logger="dstream_exactly_once.kafka._stall"):
            if packed:
                blocks = list(use["many"](config, ranges, cache=cache, poll_timeout_ms=POLL_MS))
            else:
                blocks = [b for r in ranges for b in use["one"](config, r, cache=cache, poll_timeout_ms=POLL_MS)]
    finally:
        cache.clear()
    took = time.monotonic() - t0
    got = _offsets(blocks)
    assert got == {p: list(range(2, 10)) for p in range(4)}
    assert took < POLL_MS / 1000 / 2, f"the stalled partition was read only after {took:.1f} s"
    warned = [m for m in (rec.getMessage() for rec in caplog.records) if "fresh consumer without a fetch session" in m]
    assert len(warned) == 1 and "partition: 2" in warned[0] and "log start 0, end 10" in warned[0], warned


@pytest.mark.parametrize("client", list(READERS))
def test_a_client_that_never_returns_them_fails_as_a_stall_not_an_outage(kafka, topic_name, client, monkeypatch):
    """Even fresh consumers return nothing (every consumer is wedged): the error says the broker
    holds the records, names the log bounds, and is not KafkaUnavailableError."""
    from dstream_exactly_once.errors import KafkaReadStalledError

    kafka.create_topic(topic_name, 2)
    kafka.produce(topic_name, [f"r{i}" for i in range(20)], partitions=2)
    config = parse_kafka_params({"bootstrap.servers": kafka.bootstrap})
    ranges = [OffsetRange(topic_name, p, 0, 10) for p in range(2)]
    if client == "kafka-python":
        monkeypatch.setattr(multi_reader, "sessionless_consumer",
                            lambda config, r: _kafka_python_wedged(1)(config, r))
        cache = WEDGED[client](1)
    else:
        monkeypatch.setattr(multi_reader_confluent, "_Consumer", lambda config, r: _PausedOne(config, r, 1))
        cache = WEDGED[client](1)
    try:
        with pytest.raises(KafkaReadStalledError, match=rf"holds the records of .*{topic_name}.*log start 0, end 10"):
            list(READERS[client]["many"](config, ranges, cache=cache, poll_timeout_ms=12000))
    finally:
        cache.clear()


# ---------------------------------------------------------------- offsets beyond the log end


@pytest.mark.parametrize("packed", [True, False], ids=["packed", "unpacked"])
@pytest.mark.parametrize("client", list(READERS))
def test_offsets_beyond_the_log_end_follow_the_data_loss_policy_at_once(kafka, topic_name, client, packed):
    """A range planned before the topic was recreated with fewer records: [5, 20) of a log that now
    ends at 10. The records that exist are read, the rest is the data-loss policy's, in seconds."""
    kafka.create_topic(topic_name, 2)
    kafka.produce(topic_name, [f"r{i}" for i in range(20)], partitions=2)  # 10 per partition
    config = parse_kafka_params({"bootstrap.servers": kafka.bootstrap})
    ranges = [OffsetRange(topic_name, 0, 2, 6), OffsetRange(topic_name, 1, 5, 20)]
    use = READERS[client]

    def read(fail: bool, losses: List[Any]) -> Dict[int, List[int]]:
        cache = use["cache"]()
        try:
            if packed:
                return _offsets(use["many"](config, ranges, cache=cache, poll_timeout_ms=POLL_MS,
                                            fail_on_data_loss=fail, on_data_loss=losses.append))
            return _offsets(b for r in ranges for b in use["one"](config, r, cache=cache, poll_timeout_ms=POLL_MS,
                                                                   fail_on_data_loss=fail, on_data_loss=losses.append))
        finally:
            cache.clear()

    t0 = time.monotonic()
    with pytest.raises(DataLossError, match=rf"offsets \[10, 20\) of {topic_name}-1 are beyond the log end 10"):
        read(True, [])
    assert time.monotonic() - t0 < POLL_MS / 1000 / 2
    losses: List[Any] = []
    got = read(False, losses)
    assert got == {0: [2, 3, 4, 5], 1: [5, 6, 7, 8, 9]}
    assert [(loss.start, loss.end) for loss in losses] == [(10, 20)]
    assert "beyond the log end 10" in losses[0].reason
