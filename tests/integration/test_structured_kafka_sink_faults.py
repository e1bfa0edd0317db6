"""Acceptance: Spark's Kafka source → the deo-kafka sink, the driver SIGKILLed and restarted from its
checkpoint; a ``read_committed`` consumer of the output topic sees every input record exactly once."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections import Counter

import pytest

from .faults import ROOT, committed, kill_after_commits

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.pyspark4]

RECORDS = 100  # 5 micro-batches of 20
KILLS = 2


def start(bootstrap, in_topic, out_topic, store, app, checkpoint):
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.Popen([sys.executable, "-m", "tests.integration.structured_kafka_sink_proc", bootstrap,
                             in_topic, out_topic, store, app, checkpoint, str(RECORDS)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, cwd=ROOT, env=env, start_new_session=True)


def read_committed(bootstrap, topic):
    """Every record a read_committed consumer sees, up to the end of each partition."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed",
                             enable_auto_commit=False, group_id=None)
    try:
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic))]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = consumer.end_offsets(tps)  # read_committed: the last stable offsets
        out = []
        deadline = time.monotonic() + 60
        while any(consumer.position(tp) < ends[tp] for tp in tps) and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                out.extend(records)
        return out
    finally:
        consumer.close()


def test_kafka_to_kafka_sink_exactly_once_under_sigkill(kafka, tmp_path):
    in_topic, out_topic = "ski-" + uuid.uuid4().hex[:10], "sko-" + uuid.uuid4().hex[:10]
    app = "sk-" + uuid.uuid4().hex[:10]
    store = f"sqlite:///{tmp_path}/s.db"
    kafka.create_topic(in_topic, partitions=2)
    kafka.create_topic(out_topic, partitions=2)
    kafka.produce(in_topic, range(RECORDS), partitions=2)
    kills = kill_after_commits(lambda: start(kafka.bootstrap, in_topic, out_topic, store, app, str(tmp_path / "cp")),
                               [(store, app)], KILLS, seed=20)
    assert kills == KILLS
    records = read_committed(kafka.bootstrap, out_topic)
    counts = Counter(r.value for r in records)
    assert sorted(counts, key=int) == [str(i).encode() for i in range(RECORDS)]
    assert set(counts.values()) == {1}, {k: v for k, v in counts.items() if v != 1}
    assert all(r.key == r.value and [h[0] for h in r.headers] == ["from"] for r in records)
    assert committed(store, app) >= 0  # the driver recorded batches in the store
