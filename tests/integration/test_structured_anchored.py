"""Store-anchored positions on a real broker and Spark: a ``deo-kafka`` → ``deo-store`` query whose sink
keeps the source's offsets in the store (``anchor=True``) resumes exactly where its output stopped when
restarted on a NEW checkpoint — after a clean stop, and after SIGKILLs with the checkpoint deleted."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from typing import Dict

import pytest

from dstream_exactly_once.stores import open_store

from .faults import ROOT, kill_after_commits

pytestmark = [pytest.mark.integration, pytest.mark.pyspark4]

RECORDS = 90


def _env() -> Dict[str, str]:
    return {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}


def start(bootstrap: str, topic: str, checkpoint: str, expected: int, url: str, app: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tests.integration.structured_kafka_source_proc", "store", bootstrap,
                             topic, checkpoint, str(expected), url, app, "anchored"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, cwd=ROOT, env=_env(), start_new_session=True)


def run_to_done(proc: subprocess.Popen) -> str:
    try:
        out, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "DONE" in out, out[-4000:]
    return out


def check_exactly_once(url: str, app: str, topic: str, records: int) -> None:
    with open_store(url, app) as s:
        seen = s.get_values("seen")
        positions = s.load_positions()
    assert sorted(seen, key=int) == [str(i) for i in range(records)]
    assert set(seen.values()) == {1}, {k: v for k, v in seen.items() if v != 1}
    # the source's offsets are the store's ordinary Kafka positions (what `dstream-eo offsets show` lists)
    assert sum(p.offset for k, p in positions.items() if k.startswith(topic + "/")) == records


def test_new_checkpoint_resumes_where_the_output_stopped(kafka, tmp_path):
    topic = "anc-" + uuid.uuid4().hex[:10]
    kafka.create_topic(topic, partitions=2)
    url, app = f"sqlite:///{tmp_path}/s.db", "anc-" + uuid.uuid4().hex[:10]
    checkpoint = str(tmp_path / "cp")
    kafka.produce(topic, range(0, 40), partitions=2)
    run_to_done(start(kafka.bootstrap, topic, checkpoint, 40, url, app))
    shutil.rmtree(checkpoint)
    kafka.produce(topic, range(40, RECORDS), partitions=2)
    run_to_done(start(kafka.bootstrap, topic, str(tmp_path / "cp2"), RECORDS, url, app))
    check_exactly_once(url, app, topic, RECORDS)


@pytest.mark.slow
def test_sigkill_and_deleted_checkpoint_exactly_once(kafka, tmp_path):
    topic = "anc-" + uuid.uuid4().hex[:10]
    kafka.create_topic(topic, partitions=2)
    url, app = f"sqlite:///{tmp_path}/s.db", "anc-" + uuid.uuid4().hex[:10]
    kills = 2
    share = RECORDS // (kills + 1)
    checkpoint = str(tmp_path / "cp")

    def before_run(run: int) -> None:
        if run % 2 == 1:  # runs 1, 3, … start on a deleted (so new) checkpoint, the others from the checkpoint
            shutil.rmtree(checkpoint, ignore_errors=True)
        if run <= kills:
            kafka.produce(topic, range(run * share, RECORDS if run == kills else (run + 1) * share), partitions=2)

    done = kill_after_commits(lambda: start(kafka.bootstrap, topic, checkpoint, RECORDS, url, app), [(url, app)],
                              kills, seed=11, before_run=before_run)
    assert done == kills
    check_exactly_once(url, app, topic, RECORDS)
