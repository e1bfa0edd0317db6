"""Acceptance: Spark's Kafka source → the deo-store sink, the driver SIGKILLed 4 times and restarted
from its checkpoints; every record counted exactly once on SQLite, PostgreSQL and Redis.

The driver (``structured_sink_proc``) runs three queries over the same topic, one per store (its own
checkpoint and application id each), so one JVM start per kill serves the three stores. Before each
run the test produces that run's share of the records; a run is SIGKILLed (the whole process group)
at a random moment after every store committed a batch of it, i.e. while the queries plan, read or
commit their next micro-batches. A last run drains: every store must hold each record exactly once."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from typing import Sequence, Tuple

import pytest

from dstream_exactly_once.stores import open_store

from .faults import ROOT, kill_after_commits

pytestmark = pytest.mark.slow

RECORDS = 240  # 60 records (at 10 offsets a trigger: 6 micro-batches a query) per run
KILLS = 3  # per store: every kill stops the three queries


def start(bootstrap: str, topic: str, checkpoints: str, targets: Sequence[Tuple[str, str]],
          starting: str = "earliest", expected: int = RECORDS) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    pairs = [part for target in targets for part in target]
    return subprocess.Popen([sys.executable, "-m", "tests.integration.structured_sink_proc", bootstrap, topic,
                             checkpoints, starting, str(expected), *pairs], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, cwd=ROOT, env=env, start_new_session=True)


def test_kafka_to_store_sinks_exactly_once_under_sigkill(kafka, tmp_path, request):
    stores = {"sqlite": f"sqlite:///{tmp_path}/s.db", "postgres": request.getfixturevalue("postgres_url"),
              "redis": request.getfixturevalue("redis_url")}
    topic = "ss-" + uuid.uuid4().hex[:10]
    targets = [(url, f"ss-{name}-{uuid.uuid4().hex[:10]}") for name, url in stores.items()]
    kafka.create_topic(topic, partitions=2)
    share = RECORDS // (KILLS + 1)

    def produce(run: int) -> None:  # this run's share (the last run: the rest)
        if run <= KILLS:
            kafka.produce(topic, range(run * share, RECORDS if run == KILLS else (run + 1) * share), partitions=2)

    kills = kill_after_commits(lambda: start(kafka.bootstrap, topic, str(tmp_path / "cp"), targets), targets, KILLS,
                               seed=KILLS, before_run=produce)
    assert kills == KILLS  # each one stopped the three queries after a commit of each store in that run
    for url, app in targets:
        with open_store(url, app) as s:
            seen = s.get_values("seen")
        assert sorted(seen, key=int) == [str(i) for i in range(RECORDS)], app
        assert set(seen.values()) == {1}, (app, {k: v for k, v in seen.items() if v != 1})
