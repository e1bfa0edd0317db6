"""The deo-kafka sink's partition protocol against a real broker (no Spark): transactions, markers,
replays, refusals; and the query start's checks."""

from __future__ import annotations

import os
import uuid
from dataclasses import replace

import pytest

from dstream_exactly_once.errors import ConfigurationError, OffsetConflictError
from dstream_exactly_once.kafka.structured._sink import (
    KafkaSinkOptions,
    commit_kafka_batch,
    kafka_sink_options,
    write_partition,
)
from dstream_exactly_once.stores import open_store
from dstream_exactly_once.stores._writes import CommitOutcome
from dstream_exactly_once.structured._sink_runs import QueryRun
from dstream_exactly_once.structured._store_sink import SINK_POSITION_KEY

COLUMNS = ("value", "key", "topic", "partition", "headers")
RUN = QueryRun("query-1", "run-1")


def read_committed(bootstrap, topic):
    """(key, value, partition) of every record a read_committed consumer sees, to each partition's end."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed", enable_auto_commit=False,
                             group_id=None, consumer_timeout_ms=2000)
    try:
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic))]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = consumer.end_offsets(tps)
        out = []
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            polled = consumer.poll(timeout_ms=1000)
            if not polled and all(consumer.position(tp) >= ends[tp] for tp in tps):
                break
            for records in polled.values():
                out.extend((r.key, r.value, r.partition) for r in records)
        return sorted(out)
    finally:
        consumer.close()


@pytest.fixture
def sink(kafka, tmp_path):
    topic = "kso-" + uuid.uuid4().hex[:10]
    kafka.create_topic(topic, partitions=2)
    store = f"sqlite:///{tmp_path}/s.db"
    return KafkaSinkOptions.parse(kafka_sink_options(store, "app-" + uuid.uuid4().hex[:8], topic,
                                                     {"bootstrap.servers": kafka.bootstrap}))


def rows(*values, partition=None):
    return iter([{"value": v, "key": f"k{v}", "topic": None, "partition": partition,
                  "headers": [{"key": "h", "value": b"1"}]} for v in values])


def test_replayed_partition_produces_nothing(kafka, sink):
    first = write_partition(sink, 0, 0, rows("a", "b", partition=1), COLUMNS, RUN)
    assert (first.produced, first.replayed) == (2, False)
    # the driver died before recording the batch: Spark runs it again with the same partitions
    again = write_partition(sink, 0, 0, rows("b", "a", partition=1), COLUMNS, RUN)  # same records, other order
    assert (again.produced, again.replayed) == (0, True)
    assert write_partition(sink, 0, 1, rows("c"), COLUMNS, RUN).produced == 1
    assert commit_kafka_batch(sink, [first, again], 0) is CommitOutcome.APPLIED
    assert commit_kafka_batch(sink, [again, again], 0) is CommitOutcome.REPLAYED
    assert write_partition(sink, 0, 0, rows("x"), COLUMNS, RUN).replayed  # the store says committed: no Kafka
    got = read_committed(kafka.bootstrap, sink.topic)
    assert [(k, v) for k, v, _ in got] == [(b"ka", b"a"), (b"kb", b"b"), (b"kc", b"c")]
    assert [p for k, _, p in got if k != b"kc"] == [1, 1]
    with open_store(sink.store.store, sink.app) as s:
        assert s.load_positions()[SINK_POSITION_KEY].offset == 1


def test_replay_with_other_records_is_refused_or_kept(kafka, sink):
    write_partition(sink, 0, 0, rows("a"), COLUMNS, RUN)
    with pytest.raises(OffsetConflictError, match=r"batch 0 is replayed with other records in this Spark partition "
                                                  r"\(2 records.*\(1 records.*on_replay_mismatch=keep"):
        write_partition(sink, 0, 0, rows("a", "z"), COLUMNS, RUN)
    keep = KafkaSinkOptions(sink.store, sink.kafka, "keep")
    assert write_partition(keep, 0, 0, rows("a", "z"), COLUMNS, RUN).replayed
    assert [v for _, v, _ in read_committed(kafka.bootstrap, sink.topic)] == [b"a"]


def test_marker_ahead_of_the_batch_is_refused(kafka, sink):
    write_partition(sink, 0, 0, rows("a"), COLUMNS, RUN)
    write_partition(sink, 1, 0, rows("b"), COLUMNS, RUN)
    with pytest.raises(OffsetConflictError, match=r"Kafka already holds the output of batch 1, after batch 0.*"
                                                  r"nothing was produced"):
        write_partition(sink, 0, 0, rows("a"), COLUMNS, RUN)
    assert [v for _, v, _ in read_committed(kafka.bootstrap, sink.topic)] == [b"a", b"b"]


def test_bad_row_aborts_the_partition(kafka, sink):
    bad_topic = iter([{"value": "a", "topic": None}, {"value": "b", "topic": "no-such-" + uuid.uuid4().hex[:6]}])
    with pytest.raises(ConfigurationError, match=r"names topic 'no-such-.*does not exist"):
        write_partition(sink, 0, 0, bad_topic, ("value", "topic"), RUN)
    with pytest.raises(ConfigurationError, match=r"partition 5 of topic .* has partitions \[0, 1\]"):
        write_partition(sink, 0, 0, iter([{"value": "a", "partition": 0}, {"value": "b", "partition": 5}]),
                        ("value", "partition"), RUN)
    assert read_committed(kafka.bootstrap, sink.topic) == []
    assert write_partition(sink, 0, 0, rows("a"), COLUMNS, RUN).produced == 1  # the marker did not move


def test_query_start_checks_the_topic_before_the_epoch(kafka, tmp_path):
    store = f"sqlite:///{tmp_path}/s.db"
    with pytest.raises(ConfigurationError, match=r"output topic 'missing-[0-9a-f]+' does not exist at Kafka"):
        kafka_sink_options(store, "q", "missing-" + uuid.uuid4().hex[:6], {"bootstrap.servers": kafka.bootstrap})
    assert not os.path.exists(tmp_path / "s.db")


def test_a_transaction_timeout_out_of_range_is_refused_before_the_store_is_touched(kafka, tmp_path):
    out = kafka.create_topic("tto-" + uuid.uuid4().hex[:6])
    store = f"sqlite:///{tmp_path}/s.db"
    with pytest.raises(ConfigurationError, match=r"'transaction_timeout_ms' must be an int from 1 to 2147483647"):
        kafka_sink_options(store, "q", out, {"bootstrap.servers": kafka.bootstrap}, transaction_timeout_ms=2**40)
    assert not os.path.exists(tmp_path / "s.db")


def test_a_transaction_timeout_above_the_brokers_cap_is_refused_naming_both(kafka, tmp_path):
    """Before: accepted, an epoch taken, and the query failed a minute later with "cannot reach Kafka"."""
    out = kafka.create_topic("tto-" + uuid.uuid4().hex[:6])
    store = f"sqlite:///{tmp_path}/s.db"
    with open_store(store, "q") as live:
        epoch = live.start_epoch()
    with pytest.raises(ConfigurationError) as info:
        kafka_sink_options(store, "q", out, {"bootstrap.servers": kafka.bootstrap}, transaction_timeout_ms=3_600_000)
    message = str(info.value)
    assert "'transaction_timeout_ms'=3600000" in message or "transaction_timeout_ms'=3600000" in message, message
    assert "transaction.max.timeout.ms=900000" in message and "at most 900000" in message, message
    assert info.value.retriable is False
    with open_store(store, "q") as live:
        assert live.current_epoch() == epoch  # no epoch taken
    kafka_sink_options(store, "q", out, {"bootstrap.servers": kafka.bootstrap}, transaction_timeout_ms=900_000)
    with open_store(store, "q") as live:
        assert live.current_epoch() == epoch  # building options takes no epoch; the query's first commit does


@pytest.mark.parametrize("n", [1, 2])
def test_new_checkpoint_refused_or_continued_after_the_markers(kafka, sink, n):
    """One or more committed batches: the new checkpoint's batch 0 is refused before Kafka is reached;
    with new_checkpoint=continue it is the application's batch n, after the markers of the run before."""
    for b in range(n):
        commit_kafka_batch(sink, [write_partition(sink, b, 0, rows(f"v{b}"), COLUMNS, RUN)], b)
    new = QueryRun("query-2", "run-2")
    with pytest.raises(OffsetConflictError, match=rf"batch 0 comes from query query-2.*up to {n - 1}"):
        write_partition(sink, 0, 0, rows("new"), COLUMNS, new)
    cont = KafkaSinkOptions(replace(sink.store, new_checkpoint="continue"), sink.kafka)
    done = write_partition(cont, 0, 0, rows("new"), COLUMNS, new)
    assert (done.produced, done.replayed) == (1, False)
    assert commit_kafka_batch(cont, [done], 0) is CommitOutcome.APPLIED
    assert write_partition(cont, 0, 0, rows("new"), COLUMNS, new).replayed
    assert sorted(v for _, v, _ in read_committed(kafka.bootstrap, sink.topic)) == sorted(
        [f"v{b}".encode() for b in range(n)] + [b"new"])
