"""KafkaTransactionalSink against the real broker: exactly-once output, errors that keep their type and
``retriable`` flag, the broker seam's timeouts, and the store commit riding out a store restart."""

from __future__ import annotations

import threading
import time
import traceback
import uuid
from typing import Any, Dict, List

import pytest

from dstream_exactly_once import (
    ConfigurationError,
    DataLossError,
    KafkaAuthError,
    OffsetRange,
    RetryPolicy,
    StoreUnavailableError,
    TopicAndPartition,
    open_store,
)
from dstream_exactly_once.kafka.sinks._transactional import KafkaTransactionalSink
from dstream_exactly_once.sinks._labels import make_label
from dstream_exactly_once.stores import CommitOutcome, PlannedBatch
from dstream_exactly_once.testing import LocalRedis

WRONG_PASSWORD = "not-alice-secret-77c1"
TASK_RETRY = RetryPolicy(max_seconds=60, base_delay=0.5, max_delay=2)


def plain_params(kafka: Any, **extra: Any) -> Dict[str, Any]:
    return {"bootstrap.servers": kafka.bootstrap, **extra}


def read_committed(kafka: Any, topic: str, expect: int, timeout: float = 30.0) -> List[bytes]:
    """The values a ``read_committed`` consumer sees in ``topic``, polled until ``expect`` are in."""
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(topic, bootstrap_servers=kafka.bootstrap, auto_offset_reset="earliest",
                             isolation_level="read_committed", enable_auto_commit=False,
                             group_id=f"check-{uuid.uuid4().hex[:8]}")
    values: List[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                values.extend(r.value for r in records)
            if len(values) >= expect:
                consumer.poll(timeout_ms=1000)  # nothing more may arrive
                for records in consumer.poll(timeout_ms=500).values():
                    values.extend(r.value for r in records)
                break
    finally:
        consumer.close()
    return values


def one_range_batch(source: str) -> PlannedBatch:
    return PlannedBatch(0, 1000, (OffsetRange(source, 0, 0, 3),))


@pytest.fixture
def source(kafka: Any, topic_name: str) -> str:
    """The input topic the batch's range reads (the broker checks it when the marker is committed)."""
    return kafka.create_topic(topic_name)


@pytest.fixture
def sqlite_store(tmp_path: Any, app_id: str):
    store = open_store(f"sqlite:///{tmp_path}/store.db", app_id)
    yield store
    store.close()


def test_output_is_written_once_and_a_replay_produces_nothing(kafka, source, sqlite_store):
    out = kafka.create_topic(source + "-out")
    sink = KafkaTransactionalSink(plain_params(kafka), out)
    epoch = sqlite_store.start_epoch()
    batch = one_range_batch(source)
    # a fresh broker answers CoordinatorNotAvailable until its offsets topic exists: retriable, and
    # retried here as a Spark task retry would (the marker makes a retried write produce nothing twice)
    first = TASK_RETRY.call(lambda: sink.write_partition(sqlite_store, epoch, batch, 0, [b"a", (b"k", b"b"), "c"]),
                            "first write")
    assert (first.outcome, first.produced) == (CommitOutcome.APPLIED, 3)
    again = sink.write_partition(sqlite_store, epoch, batch, 0, [b"a", (b"k", b"b"), "c"])
    assert (again.outcome, again.produced) == (CommitOutcome.REPLAYED, 0)
    assert sorted(read_committed(kafka, out, 3)) == [b"a", b"b", b"c"]
    assert sqlite_store.load_offsets()[TopicAndPartition(source, 0)] == 3


def _assert_nothing_committed(store, sink: KafkaTransactionalSink) -> None:
    assert store.load_offsets() == {} and store.last_committed_batch_id() is None
    assert not store.has_label(make_label(sink.group_id(store.app_id), 0, 0))


def test_a_missing_output_topic_is_a_configuration_error_not_a_retriable_one(kafka, source, sqlite_store):
    # the test broker runs with auto.create.topics.enable=false
    sink = KafkaTransactionalSink(plain_params(kafka, **{"request.timeout.ms": 5000}), source + "-missing")
    epoch = sqlite_store.start_epoch()
    started = time.monotonic()
    with pytest.raises(ConfigurationError, match=f"{source}-missing.*does not exist") as info:
        sink.write_partition(sqlite_store, epoch, one_range_batch(source), 0, [b"x"])
    assert info.value.retriable is False
    assert time.monotonic() - started < 30
    _assert_nothing_committed(sqlite_store, sink)


def test_a_deleted_input_topic_is_a_data_loss_error_naming_the_skip_command(kafka, topic_name, sqlite_store):
    # not created: the broker refuses the marker (UnknownTopicOrPartition), which kafka-python retries forever
    out = kafka.create_topic(topic_name + "-out")
    sink = KafkaTransactionalSink(plain_params(kafka), out)
    epoch = sqlite_store.start_epoch()
    with pytest.raises(DataLossError, match=f"input topic '{topic_name}' of batch 0") as info:
        sink.write_partition(sqlite_store, epoch, one_range_batch(topic_name), 0, [b"x"])
    assert info.value.retriable is False
    skip = f"dstream-eo batches skip --store {sqlite_store.url} --app {sqlite_store.app_id} --batch 0"
    assert skip in str(info.value)
    _assert_nothing_committed(sqlite_store, sink)
    assert read_committed(kafka, out, 1, timeout=3) == []


def test_check_refuses_a_transaction_timeout_above_the_brokers_cap(kafka, source):
    out = kafka.create_topic(source + "-out")
    sink = KafkaTransactionalSink(plain_params(kafka), out, transaction_timeout_ms=3_600_000)
    with pytest.raises(ConfigurationError) as info:
        sink.check()  # write_each_partition calls it before the stream takes its epoch
    assert "transaction_timeout_ms=3600000" in str(info.value)
    assert "transaction.max.timeout.ms=900000" in str(info.value) and info.value.retriable is False
    KafkaTransactionalSink(plain_params(kafka), out, transaction_timeout_ms=900_000).check()
    with pytest.raises(ConfigurationError, match=f"{out}-missing' does not exist"):
        KafkaTransactionalSink(plain_params(kafka), out + "-missing").check()
    with pytest.raises(ConfigurationError, match=r"transaction_timeout_ms must be an int from 1 to 2147483647"):
        KafkaTransactionalSink(plain_params(kafka), out, transaction_timeout_ms=2**40)


def test_a_transaction_timeout_the_broker_refuses_is_a_configuration_error(kafka, source, sqlite_store):
    out = kafka.create_topic(source + "-out")
    # above the broker's transaction.max.timeout.ms (15 minutes by default): InvalidTransactionTimeout
    sink = KafkaTransactionalSink(plain_params(kafka), out, transaction_timeout_ms=3_600_000)
    epoch = sqlite_store.start_epoch()
    with pytest.raises(ConfigurationError, match="InvalidTransactionTimeout") as info:
        sink.write_partition(sqlite_store, epoch, one_range_batch(source), 0, [b"x"])
    assert info.value.retriable is False
    _assert_nothing_committed(sqlite_store, sink)


def test_refused_credentials_are_an_auth_error_that_is_not_retried(kafka, source, sqlite_store):
    out = kafka.create_topic(source + "-out")
    params = {"bootstrap.servers": kafka.sasl_bootstrap, "security.protocol": "SASL_PLAINTEXT",
              "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": WRONG_PASSWORD,
              "request.timeout.ms": 5000}
    sink = KafkaTransactionalSink(params, out)
    epoch = sqlite_store.start_epoch()
    with pytest.raises(KafkaAuthError) as info:
        sink.write_partition(sqlite_store, epoch, one_range_batch(source), 0, [b"x"])
    assert info.value.retriable is False
    text = "".join(traceback.format_exception(type(info.value), info.value, info.value.__traceback__))
    assert WRONG_PASSWORD not in text
    _assert_nothing_committed(sqlite_store, sink)


def test_the_store_commit_rides_out_a_store_restart(kafka, source, app_id):
    out = kafka.create_topic(source + "-out")
    with LocalRedis(appendonly=True) as redis_server:
        store = open_store(redis_server.url, app_id)
        epoch = store.start_epoch()
        sink = KafkaTransactionalSink(plain_params(kafka), out,
                                      store_retry=RetryPolicy(max_seconds=60, base_delay=0.2, max_delay=1))
        redis_server.kill()
        result: Dict[str, Any] = {}

        def write() -> None:
            try:
                result["write"] = sink.write_partition(store, epoch, one_range_batch(source), 0, [b"a", b"b"])
            except BaseException as exc:  # noqa: BLE001 - handed to the test thread
                result["error"] = exc

        writer = threading.Thread(target=write)
        writer.start()
        # the Kafka transaction commits while the store is down; the store commit keeps retrying
        # (the first test of the module warmed up the broker's group coordinator)
        assert sorted(read_committed(kafka, out, 2)) == [b"a", b"b"]
        redis_server.start()
        writer.join(90)
        assert not writer.is_alive() and "error" not in result, result
        assert result["write"].outcome is CommitOutcome.APPLIED and result["write"].produced == 2
        assert store.load_offsets()[TopicAndPartition(source, 0)] == 3
        store.close()


def test_without_retries_a_store_outage_keeps_its_retriable_error(kafka, source, app_id):
    out = kafka.create_topic(source + "-out")
    with LocalRedis(appendonly=True) as redis_server:
        store = open_store(redis_server.url, app_id)
        epoch = store.start_epoch()
        sink = KafkaTransactionalSink(plain_params(kafka), out, store_retry=RetryPolicy(max_attempts=1))
        redis_server.kill()
        with pytest.raises(StoreUnavailableError) as info:
            sink.write_partition(store, epoch, one_range_batch(source), 0, [b"a"])
        assert info.value.retriable is True
        redis_server.start()
        # the replay finds the marker at the range's end: nothing produced again, the store catches up
        again = sink.write_partition(store, epoch, one_range_batch(source), 0, [b"a"])
        assert (again.outcome, again.produced) == (CommitOutcome.APPLIED, 0)
        assert read_committed(kafka, out, 1) == [b"a"]
        store.close()
