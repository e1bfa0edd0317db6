"""Acceptance: Spark's Kafka source → the deo-store sink, the driver SIGKILLed and restarted from its
checkpoint; every record counted exactly once on SQLite, PostgreSQL and Redis."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pytest

from dstream_exactly_once.stores import open_store

from .faults import ROOT, kill_after_commits

RECORDS = 160
KILLS_PER_STORE = 4  # 12 over the three stores


def start(bootstrap, topic, store, app, checkpoint, starting="earliest", expected=RECORDS):
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.Popen([sys.executable, "-m", "tests.integration.structured_sink_proc", bootstrap, topic, store,
                             app, checkpoint, starting, str(expected)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, cwd=ROOT, env=env, start_new_session=True)


def run_with_kills(bootstrap, topic, store, app, checkpoint, kills, seed, starting="earliest", expected=RECORDS):
    """:func:`kill_after_commits` of the deo-store query."""
    return kill_after_commits(lambda: start(bootstrap, topic, store, app, checkpoint, starting, expected), store, app,
                              kills, seed)


@pytest.mark.parametrize("backend", ["sqlite", "postgres", "redis"])
def test_kafka_to_store_sink_exactly_once_under_sigkill(backend, kafka, tmp_path, request):
    store = {"sqlite": lambda: f"sqlite:///{tmp_path}/s.db",
             "postgres": lambda: request.getfixturevalue("postgres_url"),
             "redis": lambda: request.getfixturevalue("redis_url")}[backend]()
    topic = "ss-" + uuid.uuid4().hex[:10]
    app = "ss-" + uuid.uuid4().hex[:10]
    kafka.create_topic(topic, partitions=2)
    kafka.produce(topic, range(RECORDS), partitions=2)
    kills = run_with_kills(kafka.bootstrap, topic, store, app, str(tmp_path / "cp"), KILLS_PER_STORE,
                           seed=hash(backend) & 0xFFFF)
    assert kills == KILLS_PER_STORE
    with open_store(store, app) as s:
        seen = s.get_values("seen")
    assert sorted(seen, key=int) == [str(i) for i in range(RECORDS)]
    assert set(seen.values()) == {1}, {k: v for k, v in seen.items() if v != 1}
