"""The deo-kafka Structured Streaming source on a real broker and Spark: the same rows as Spark's own
Kafka source (every column, headers and read_committed gaps included), many partitions packed into
few tasks, and exactly-once into the deo-store sink with the driver SIGKILLed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from typing import Any, Dict

import pytest

from dstream_exactly_once.stores import open_store

from .faults import ROOT, kill_after_commits

pytestmark = [pytest.mark.integration, pytest.mark.pyspark4]


def _env() -> Dict[str, str]:
    return {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}


def compare(bootstrap: str, checkpoints: str, options: Dict[str, str]) -> Dict[str, Any]:
    proc = subprocess.run([sys.executable, "-m", "tests.integration.structured_kafka_source_proc", "compare",
                           bootstrap, checkpoints, json.dumps(options)], capture_output=True, text=True, cwd=ROOT,
                          env=_env(), timeout=900)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, f"{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    return json.loads(lines[-1][len("RESULT "):])  # type: ignore[no-any-return]


def test_same_rows_as_spark_kafka_source_with_headers_and_transaction_gaps(kafka, tmp_path):
    topic = "dks-" + uuid.uuid4().hex[:10]
    kafka.create_topic(topic, partitions=3)
    kafka.produce(topic, [f"v{i}" for i in range(30)], keys=[None if i % 4 == 0 else f"k{i}" for i in range(30)],
                  partitions=3, headers=[("h1", b"\x00\x01"), ("h2", b"x")])
    # transaction markers and an aborted transaction leave offset gaps read_committed skips
    kafka.produce_transactional(topic, [(["t1", "t2"], True), (["gone1", "gone2"], False), (["t3"], True)],
                                partition=1)
    kafka.produce(topic, ["tail"], partition=1)
    got = compare(kafka.bootstrap, str(tmp_path / "cp"), {
        "subscribe": topic, "startingOffsets": "earliest", "includeHeaders": "true", "maxOffsetsPerTrigger": "7",
        "kafka.isolation.level": "read_committed", "failOnDataLoss": "true"})
    spark_rows, deo_rows = got["kafka"]["rows"], got["deo-kafka"]["rows"]
    assert len(spark_rows) == 34  # 30 + 3 committed + 1
    assert not any(bytes.fromhex(r[1]).startswith(b"gone") for r in deo_rows)
    assert deo_rows == spark_rows
    assert len(got["deo-kafka"]["partitions"]) >= 34 // 7  # maxOffsetsPerTrigger cut it into micro-batches


def test_many_partitions_are_read_by_few_tasks(kafka, tmp_path):
    topic = "dkp-" + uuid.uuid4().hex[:10]
    kafka.create_topic(topic, partitions=12)
    kafka.produce(topic, range(120), partitions=12)
    got = compare(kafka.bootstrap, str(tmp_path / "cp"), {
        "subscribe": topic, "startingOffsets": "earliest", "deo.tasks.target.count": "3"})
    assert got["deo-kafka"]["rows"] == got["kafka"]["rows"] and len(got["kafka"]["rows"]) == 120
    assert got["kafka"]["partitions"] == [12]  # Spark's connector: a task per topic partition
    assert got["deo-kafka"]["partitions"] == [3]  # 12 ranges of 10 offsets packed into 3 tasks of 40


def test_assign_and_json_starting_offsets_as_spark(kafka, tmp_path):
    topic = "dka-" + uuid.uuid4().hex[:10]
    kafka.create_topic(topic, partitions=4)
    kafka.produce(topic, range(40), partitions=4)
    got = compare(kafka.bootstrap, str(tmp_path / "cp"), {
        "assign": json.dumps({topic: [0, 1, 2]}),
        "startingOffsets": json.dumps({topic: {"0": -2, "1": 4, "2": -1}})})
    rows = got["deo-kafka"]["rows"]
    assert rows == got["kafka"]["rows"]
    assert [(r[3], r[4]) for r in rows] == [(0, n) for n in range(10)] + [(1, n) for n in range(4, 10)]


RECORDS = 120
KILLS = 3


def start(bootstrap: str, topic: str, checkpoint: str, url: str, app: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tests.integration.structured_kafka_source_proc", "store", bootstrap,
                             topic, checkpoint, str(RECORDS), url, app], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, cwd=ROOT, env=_env(), start_new_session=True)


@pytest.mark.slow
def test_deo_kafka_to_deo_store_exactly_once_under_sigkill(kafka, tmp_path):
    topic = "dkf-" + uuid.uuid4().hex[:10]
    kafka.create_topic(topic, partitions=2)
    url, app = f"sqlite:///{tmp_path}/s.db", "dkf-" + uuid.uuid4().hex[:10]
    share = RECORDS // (KILLS + 1)

    def produce(run: int) -> None:  # this run's share (the last run: the rest)
        if run <= KILLS:
            kafka.produce(topic, range(run * share, RECORDS if run == KILLS else (run + 1) * share), partitions=2)

    kills = kill_after_commits(lambda: start(kafka.bootstrap, topic, str(tmp_path / "cp"), url, app), [(url, app)],
                               KILLS, seed=7, before_run=produce)
    assert kills == KILLS
    with open_store(url, app) as s:
        seen = s.get_values("seen")
    assert sorted(seen, key=int) == [str(i) for i in range(RECORDS)]
    assert set(seen.values()) == {1}, {k: v for k, v in seen.items() if v != 1}
