"""The exactly-once stream and the transactional Kafka sink against a Kafka 3.x KRaft broker."""

from __future__ import annotations

import uuid

import pytest
from pyspark.streaming import StreamingContext

from dstream_exactly_once import ConfigurationError, KafkaUtils, OffsetRange, RetryPolicy, TopicAndPartition
from dstream_exactly_once.kafka.sinks._transactional import KafkaTransactionalSink
from dstream_exactly_once.stores import CommitOutcome, PlannedBatch, Writes, open_store
from dstream_exactly_once.testing import LocalKafka
from dstream_exactly_once.testing._kafka import KAFKA_3_VERSION, kafka_version

from .streams import run_until
from .test_kafka_sink import read_committed

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def kafka3():
    broker = LocalKafka(version=KAFKA_3_VERSION)
    broker.start()
    yield broker
    broker.stop()


def test_the_broker_runs_the_3x_release(kafka3):
    assert KAFKA_3_VERSION.startswith("3.")
    assert any(f"kafka_2.13-{KAFKA_3_VERSION}.jar" in arg for arg in kafka3._proc.proc.args)
    assert not any("kafka_2.13-4." in arg for arg in kafka3._proc.proc.args)


def test_a_bad_version_is_refused_naming_it(monkeypatch):
    with pytest.raises(ConfigurationError, match=r"version must be .*got '2\.8\.1'"):
        LocalKafka(version="2.8.1")
    monkeypatch.setenv("DEO_KAFKA_VERSION", "latest")
    with pytest.raises(ConfigurationError, match=r"\$DEO_KAFKA_VERSION must be .*got 'latest'"):
        kafka_version()


def test_exactly_once_stream_end_to_end(kafka3, sc, tmp_path):
    topic = "t3-" + uuid.uuid4().hex[:10]
    kafka3.create_topic(topic, 3)
    lines = [f"w{i % 5}" for i in range(300)]
    kafka3.produce(topic, lines, partitions=3)
    url = f"sqlite:///{tmp_path}/k3.db"
    ssc = StreamingContext(sc, 1)
    stream = KafkaUtils.createExactlyOnceStream(
        ssc, {"bootstrap.servers": kafka3.bootstrap, "auto.offset.reset": "earliest"}, [topic],
        store=url, app_id="k3")

    def per_batch(batch, rdd):
        w = Writes()
        for word, n in rdd.map(lambda kv: kv[1]).countByValue().items():
            w.incr("words", word, n)
        return w

    stream.commit_each_batch(per_batch)
    store = open_store(url, "k3")
    try:
        run_until(ssc, lambda: sum(store.get_values("words").values()) >= 300)
        assert store.get_values("words") == {f"w{k}": 60 for k in range(5)}
        assert store.load_offsets() == {TopicAndPartition(topic, p): 100 for p in range(3)}
    finally:
        store.close()


def test_transactional_sink_writes_once(kafka3, tmp_path):
    source = kafka3.create_topic("t3-" + uuid.uuid4().hex[:10])
    out = kafka3.create_topic(source + "-out")
    store = open_store(f"sqlite:///{tmp_path}/sink.db", "k3-sink")
    try:
        sink = KafkaTransactionalSink({"bootstrap.servers": kafka3.bootstrap}, out)
        epoch = store.start_epoch()
        batch = PlannedBatch(0, 1000, (OffsetRange(source, 0, 0, 3),))
        retry = RetryPolicy(max_seconds=60, base_delay=0.5, max_delay=2)  # a new coordinator needs a moment
        first = retry.call(lambda: sink.write_partition(store, epoch, batch, 0, [b"a", (b"k", b"b"), "c"]),
                           "first write")
        assert (first.outcome, first.produced) == (CommitOutcome.APPLIED, 3)
        again = sink.write_partition(store, epoch, batch, 0, [b"a", (b"k", b"b"), "c"])
        assert (again.outcome, again.produced) == (CommitOutcome.REPLAYED, 0)
        assert sorted(read_committed(kafka3, out, 3)) == [b"a", b"b", b"c"]
        assert store.load_offsets()[TopicAndPartition(source, 0)] == 3
    finally:
        store.close()
