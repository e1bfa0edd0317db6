"""Moving a DStream Kafka app to Structured Streaming, as docs/structured-streaming.md describes it.

A ``createExactlyOnceStream`` app commits part of a topic, stops gracefully, its offsets are
exported with ``dstream-eo offsets export``, more records arrive, and a query with Spark's own Kafka
source started at those offsets continues into the ``deo-store`` sink under another application id
of the same store. Together the two apps see every record exactly once, per partition.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from typing import Dict, Tuple

import pytest
from pyspark.streaming import StreamingContext

from dstream_exactly_once import KafkaUtils
from dstream_exactly_once.stores import Writes, open_store

from ..helpers import eventually
from .faults import ROOT, kill_group

PARTITIONS = 3
BEFORE = 300  # records the DStream app can read (it usually stops part-way through them)
AFTER = 150  # records produced once the DStream app stopped
TOTAL = BEFORE + AFTER


def env() -> Dict[str, str]:
    return {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}


def totals(store: str, app: str) -> Tuple[Dict[str, int], Dict[str, int], Dict[str, int]]:
    with open_store(store, app) as s:
        return s.get_values("count"), s.get_values("sum"), s.get_values("seen")


def run_dstream_part_way(sc, bootstrap: str, topic: str, store: str, app: str) -> None:
    """The DStream app: 1 s batches of at most 10 records a partition; stopped gracefully once a
    batch committed (usually before it read all of ``BEFORE``)."""

    def per_batch(batch, rdd):
        w = Writes()
        for partition, offset, value in rdd.collect():
            w.incr("count", str(partition))
            w.incr("sum", str(partition), value)
            w.incr("seen", f"{partition}:{offset}")
        return w

    sc._conf.set("spark.streaming.kafka.maxRatePerPartition", "10")
    try:
        ssc = StreamingContext(sc, 1)
        stream = KafkaUtils.createExactlyOnceStream(
            ssc, {"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"}, [topic],
            messageHandler=lambda m: (m.partition, m.offset, int(m.message)), store=store, app_id=app)
        stream.commit_each_batch(per_batch)
        ssc.start()
        try:
            eventually(lambda: sum(totals(store, app)[0].values()) > 0, "the DStream app's first commit", 90)
        finally:
            ssc.stop(stopSparkContext=False, stopGraceFully=True)
    finally:
        sc._conf.set("spark.streaming.kafka.maxRatePerPartition", "0")


def export_offsets(store: str, app: str) -> str:
    """``dstream-eo offsets export`` as the user runs it."""
    done = subprocess.run([sys.executable, "-m", "dstream_exactly_once", "offsets", "export", "--store", store,
                           "--app", app, "--format", "structured-streaming"], capture_output=True, text=True,
                          cwd=ROOT, env=env(), timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def run_query(bootstrap: str, topic: str, store: str, app: str, checkpoint: str, starting: str,
              expected: int) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "tests.integration.structured_migration_proc", bootstrap, topic,
                             store, app, checkpoint, starting, str(expected)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, cwd=ROOT, env=env(), start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=300)
    finally:
        kill_group(proc)
    assert "DONE" in out, f"the query did not finish (exit {proc.returncode}):\n{out[-4000:]}"


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_dstream_app_moves_to_structured_streaming_exactly_once(backend, kafka, sc, tmp_path, request):
    store = (f"sqlite:///{tmp_path}/move.db" if backend == "sqlite" else request.getfixturevalue("postgres_url"))
    topic = "move-" + uuid.uuid4().hex[:10]
    dstream_app, query_app = "move-ds-" + uuid.uuid4().hex[:6], "move-ss-" + uuid.uuid4().hex[:6]
    kafka.create_topic(topic, partitions=PARTITIONS)
    kafka.produce(topic, range(BEFORE), partitions=PARTITIONS)  # record i: value i, partition i % 3

    run_dstream_part_way(sc, kafka.bootstrap, topic, store, dstream_app)
    ds_count, ds_sum, ds_seen = totals(store, dstream_app)
    read = sum(ds_count.values())
    # where the graceful stop lands depends on the machine's speed (usually part-way through BEFORE)
    assert 0 < read <= BEFORE

    starting = export_offsets(store, dstream_app)
    with open_store(store, dstream_app) as s:
        committed = {str(tp.partition): offset for tp, offset in s.load_offsets().items()}
    assert json.loads(starting) == {topic: committed}

    kafka.produce(topic, range(BEFORE, TOTAL), partitions=PARTITIONS)
    run_query(kafka.bootstrap, topic, store, query_app, str(tmp_path / "cp"), starting, TOTAL - read)
    ss_count, ss_sum, ss_seen = totals(store, query_app)

    for p in range(PARTITIONS):
        values = [i for i in range(TOTAL) if i % PARTITIONS == p]  # offset k of partition p holds values[k]
        key = str(p)
        assert ds_count.get(key, 0) + ss_count.get(key, 0) == len(values), (p, ds_count, ss_count)
        assert ds_sum.get(key, 0) + ss_sum.get(key, 0) == sum(values), (p, ds_sum, ss_sum)
        # the DStream app read exactly the offsets before its exported position, the query the rest
        assert ds_count.get(key, 0) == committed[key]
        assert sum(values[:committed[key]]) == ds_sum.get(key, 0)
    assert not set(ds_seen) & set(ss_seen), sorted(set(ds_seen) & set(ss_seen))[:10]
    assert sorted({**ds_seen, **ss_seen}) == sorted(f"{i % PARTITIONS}:{i // PARTITIONS}" for i in range(TOTAL))
    assert set(ds_seen.values()) | set(ss_seen.values()) == {1}
