"""KafkaMetadata.close() on the real broker: connections and the IO thread end, for good."""

from __future__ import annotations

import logging
import os
import threading

import pytest

from dstream_exactly_once import KafkaUnavailableError
from dstream_exactly_once.kafka._metadata import KafkaMetadata, close_metadata
from dstream_exactly_once.kafka._params import parse_kafka_params

from ..helpers import eventually


def io_threads(client_id: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == f"kafka-io-{client_id}" and t.is_alive()]


def broker_sockets(port: int) -> set[str]:
    """Inodes of this process's established TCP connections to ``port`` (from /proc)."""
    mine = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # closed meanwhile
        if target.startswith("socket:["):
            mine.add(target[len("socket:["):-1])
    out = set()
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                cols = line.split()
                remote_port, state, inode = int(cols[2].rsplit(":", 1)[1], 16), cols[3], cols[9]
                if remote_port == port and state == "01" and inode in mine:  # 01: ESTABLISHED
                    out.add(inode)
    return out


def test_close_is_idempotent_final_and_stops_the_io_thread(kafka, topic_name):
    kafka.create_topic(topic_name, 2)
    port = int(kafka.bootstrap.rsplit(":", 1)[1])
    client_id = "close-test-" + topic_name
    before = broker_sockets(port)
    md = KafkaMetadata(parse_kafka_params({"bootstrap.servers": kafka.bootstrap, "client.id": client_id}))
    assert md.partitions([topic_name]) == {topic_name: [0, 1]}
    assert len(io_threads(client_id)) == 1
    opened = broker_sockets(port) - before
    assert opened, "the look-up opened no connection to the broker: the test would prove nothing"
    md.close()
    assert md.closed
    eventually(lambda: io_threads(client_id) == [], "the IO thread to end", 10)
    eventually(lambda: not (broker_sockets(port) & opened), "the admin client's connections to close", 10)
    md.close()  # again: nothing happens
    close_metadata(md)
    with pytest.raises(KafkaUnavailableError, match="is closed") as info:
        md.topics()
    assert not info.value.retriable
    # the refusal comes before any client is built: a new client would connect (and start its
    # IO thread) inside topics(), so both are checked right after it
    assert io_threads(client_id) == []
    assert broker_sockets(port) - before == set()


def test_close_metadata_closes_what_can_be_closed_and_logs_a_failure(caplog):
    close_metadata(object())  # a planner's test double without close(): nothing to do, no error

    class Failing:
        calls = 0

        def close(self) -> None:
            Failing.calls += 1
            raise RuntimeError("boom")

    with caplog.at_level(logging.WARNING, logger="dstream_exactly_once.kafka._metadata"):
        close_metadata(Failing())  # logged, not raised: stopping goes on
    assert Failing.calls == 1
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "boom" in r.getMessage()]
    assert len(warnings) == 1, caplog.text
