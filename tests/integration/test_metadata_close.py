"""KafkaMetadata.close() on the real broker: connections and the IO thread end, for good."""

from __future__ import annotations

import threading
import time

import pytest

from dstream_exactly_once import KafkaUnavailableError
from dstream_exactly_once.kafka.metadata import KafkaMetadata, close_metadata
from dstream_exactly_once.kafka.params import parse_kafka_params


def io_threads(client_id: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == f"kafka-io-{client_id}" and t.is_alive()]


def wait_gone(client_id: str, timeout_s: float = 10.0) -> list[threading.Thread]:
    deadline = time.monotonic() + timeout_s
    while io_threads(client_id) and time.monotonic() < deadline:
        time.sleep(0.05)
    return io_threads(client_id)


def test_close_is_idempotent_final_and_stops_the_io_thread(kafka, topic_name):
    kafka.create_topic(topic_name, 2)
    client_id = "close-test-" + topic_name
    md = KafkaMetadata(parse_kafka_params({"bootstrap.servers": kafka.bootstrap, "client.id": client_id}))
    assert md.partitions([topic_name]) == {topic_name: [0, 1]}
    assert len(io_threads(client_id)) == 1
    md.close()
    assert md.closed
    assert wait_gone(client_id) == []
    md.close()  # again: nothing happens
    close_metadata(md)
    with pytest.raises(KafkaUnavailableError, match="is closed") as info:
        md.topics()
    assert not info.value.retriable
    time.sleep(0.5)
    assert io_threads(client_id) == []  # a look-up after close did not connect again


def test_close_metadata_accepts_sources_without_close():
    close_metadata(object())  # a planner's test double: nothing to close

    class Failing:
        def close(self) -> None:
            raise RuntimeError("boom")

    close_metadata(Failing())  # logged, not raised: stopping goes on
