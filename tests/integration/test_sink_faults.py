"""Label-idempotent sinks under SIGKILL: the Doris protocol double receives every row exactly once."""

from __future__ import annotations

import uuid
from collections import Counter

import pytest

from dstream_exactly_once.sinks import make_label
from dstream_exactly_once.stores import open_store
from dstream_exactly_once.testing._doris_double import DorisProtocolDouble

from .faults import run_with_kills

N = 20_000
pytestmark = pytest.mark.slow


def test_doris_two_phase_rows_loaded_exactly_once_under_sigkill(kafka, tmp_path):
    topic = "doris-" + uuid.uuid4().hex[:8]
    kafka.create_topic(topic, 4)
    kafka.produce(topic, range(1, N + 1), partitions=4)
    url = f"sqlite:///{tmp_path}/doris.db"
    app = "doris-" + uuid.uuid4().hex[:6]
    with DorisProtocolDouble() as doris:
        stats = run_with_kills(kafka.bootstrap, topic, url, app, "doris", min_kills=10, seed=5, rate=500,
                               extra=["--doris-fe", doris.fe_url])
        assert stats.kills + stats.self_crashes >= 10
        values = Counter(int(r["v"]) for r in doris.rows("demo", "numbers"))
        assert sum(values.values()) == N, f"{sum(values.values())} rows loaded"
        assert set(values) == set(range(1, N + 1)) and max(values.values()) == 1
        # every committed batch's labels were made from (app.table, batch id, partition id) and
        # each one is visible once in Doris; nothing is left pre-committed (in doubt)
        with open_store(url, app) as store:
            last = store.last_committed_batch_id()
            assert last is not None and store.pending_batches() == []
            for batch_id in range(last + 1):
                batch = store.get_batch(batch_id)
                assert batch is not None
                for pid, r in enumerate(batch.ranges):
                    label = make_label(f"{app}.numbers", batch_id, pid)
                    if r.count():
                        assert store.has_label(label), label
                        assert doris.label_state("demo", label) == "VISIBLE", label


def _read_all(kafka, topic, isolation):
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=kafka.bootstrap, isolation_level=isolation, enable_auto_commit=False,
                             auto_offset_reset="earliest", group_id=None)
    try:
        parts = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic)]
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        ends = consumer.end_offsets(parts)
        values = []
        while any(consumer.position(tp) < ends[tp] for tp in parts):
            for recs in consumer.poll(timeout_ms=1000).values():
                values.extend(int(r.value) for r in recs)
        return values
    finally:
        consumer.close()


def test_kafka_transactional_sink_exactly_once_under_sigkill(kafka, tmp_path):
    n = 20_000
    topic = "ktx-in-" + uuid.uuid4().hex[:8]
    out = "ktx-out-" + uuid.uuid4().hex[:8]
    kafka.create_topic(topic, 4)
    kafka.create_topic(out, 2)
    kafka.produce(topic, range(1, n + 1), partitions=4)
    url = f"sqlite:///{tmp_path}/ktx.db"
    app = "ktx-" + uuid.uuid4().hex[:6]
    stats = run_with_kills(kafka.bootstrap, topic, url, app, "kafka", min_kills=10, seed=9, rate=500,
                           extra=["--out-topic", out])
    assert stats.kills + stats.self_crashes >= 10
    committed = Counter(_read_all(kafka, out, "read_committed"))
    assert sum(committed.values()) == n and set(committed) == set(range(1, n + 1))
    assert max(committed.values()) == 1
