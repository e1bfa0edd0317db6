"""An application upgraded in place from a release that ran one task per Kafka range keeps its meaning.

The store is written here as that release left it (layout 1: offsets in ``deo_offsets``, offset-log
entries as JSON arrays of 4-element ranges): batch 0 committed, batch 1 logged and not committed.
Without ``spark.streaming.kafka.tasks.pack`` the exactly-once stream refuses to start with one
message naming the key, and the store file is byte-for-byte unchanged; with ``false`` it keeps one
task per range (the app's ``offsetRanges()[TaskContext.get().partitionId()]`` bookkeeping stays
right, the replayed batch included); with ``true`` it starts with packed tasks.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import uuid

import pytest
from pyspark import TaskContext
from pyspark.streaming import StreamingContext

from dstream_exactly_once import ConfigurationError, KafkaUtils, Writes, open_store

from ..contract.test_store_layout import V1_SQL_DDL
from .streams import run_until
from .test_kafka_tasks import _conf

pytestmark = pytest.mark.integration

PARTITIONS, PER_PARTITION = 4, 10


def _old_store(path, app, topic):
    """Batch 0 ([0, 5) of each partition) committed, batch 1 ([5, 8)) logged: the older release's rows."""
    conn = sqlite3.connect(path)
    for ddl in V1_SQL_DDL:
        conn.execute(ddl.format(int="INTEGER", float="REAL", options=""))
    conn.execute("INSERT INTO deo_meta VALUES (?, 1, 1)", (app,))
    for p in range(PARTITIONS):
        conn.execute("INSERT INTO deo_offsets VALUES (?, ?, ?, 5)", (app, topic, p))
    for b, (lo, hi) in enumerate([(0, 5), (5, 8)]):
        ranges = json.dumps([[topic, p, lo, hi] for p in range(PARTITIONS)])
        conn.execute("INSERT INTO deo_batches VALUES (?, ?, ?, ?)", (app, b, 1000 * (b + 1), ranges))
    conn.execute("INSERT INTO deo_commits VALUES (?, 0, 1)", (app,))
    for p in range(PARTITIONS):
        conn.execute("INSERT INTO deo_values VALUES (?, 'per_range', ?, 5, NULL, NULL)", (app, f"{topic}/{p}"))
    conn.commit()
    conn.close()


def _digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


@pytest.fixture()
def upgraded(kafka, topic_name, tmp_path):
    kafka.create_topic(topic_name, PARTITIONS)
    for p in range(PARTITIONS):
        kafka.produce(topic_name, [f"{p}-{i}" for i in range(PER_PARTITION)], partition=p)
    app, path = f"upgraded-{uuid.uuid4().hex[:6]}", str(tmp_path / "old.db")
    _old_store(path, app, topic_name)
    return topic_name, app, path


def _stream(sc, kafka, topic, url, app):
    ssc = StreamingContext(sc, 0.5)
    params = {"bootstrap.servers": kafka.bootstrap, "auto.offset.reset": "earliest"}
    return ssc, KafkaUtils.createExactlyOnceStream(ssc, params, [topic], store=url, app_id=app)


def test_refused_until_the_task_layout_is_chosen(kafka, upgraded, sc):
    topic, app, path = upgraded
    before = _digest(path)
    with pytest.raises(ConfigurationError, match=r"one Spark task per Kafka range.*kafka\.tasks\.pack"):
        _stream(sc, kafka, topic, f"sqlite:///{path}", app)
    assert _digest(path) == before  # nothing written: no upgrade, no epoch
    with _conf(sc, **{"spark.streaming.kafka.tasks.pack": "true"}):
        ssc, stream = _stream(sc, kafka, topic, f"sqlite:///{path}", app)  # packing chosen: it starts
    assert stream.epoch == 2


def test_one_task_per_range_kept_when_chosen(kafka, upgraded, sc):
    topic, app, path = upgraded
    url = f"sqlite:///{path}"
    with _conf(sc, **{"spark.streaming.kafka.tasks.pack": "false"}):
        ssc, stream = _stream(sc, kafka, topic, url, app)
    shapes = []

    def per_range(batch, rdd):  # the ported idiom: partition i reads offsetRanges()[i]
        ranges = rdd.offsetRanges()
        shapes.append((rdd.getNumPartitions(), len(ranges)))

        def count(records):
            r = ranges[TaskContext.get().partitionId()]
            return [(f"{r.topic}/{r.partition}", sum(1 for _ in records))]

        writes = Writes()
        for key, n in rdd.mapPartitions(count).collect():
            writes.incr("per_range", key, n)
        return writes

    stream.commit_each_batch(per_range)

    def done():
        with open_store(url, app) as s:
            return sum(s.get_values("per_range").values()) >= PARTITIONS * PER_PARTITION

    run_until(ssc, done, timeout=90)
    with open_store(url, app) as s:
        assert s.get_values("per_range") == {f"{topic}/{p}": PER_PARTITION for p in range(PARTITIONS)}
        assert s.is_committed(1)  # the logged batch was replayed with its ranges
    assert all(parts == n for parts, n in shapes)  # one task per range, every batch
