"""Exactly-once Kafka streaming with packed and split tasks under SIGKILL, on all three stores.

Twelve small partitions (packed into two tasks) and one large one (its own task, or split into
pieces for ``commit_each_batch``, two of them read together by one task). A first driver SIGKILLs
its own process group at one chosen point (``kafka_planner_faults_proc.py``): inside a packed task
before its commit, right after a packed task's per-task commit (the batch partly committed), or
between two pieces of one split range. A second driver replays the batch; the store must hold
every number exactly once.
"""

from __future__ import annotations

import uuid

import pytest

from .test_file_faults import _store_url
from .test_planner_faults import kill_then_replay

pytestmark = [pytest.mark.integration, pytest.mark.slow]

MODULE = "tests.integration.kafka_planner_faults_proc"
SMALL, PER_SMALL, BIG = 12, 60, 1000
N = SMALL * PER_SMALL + BIG

CASES = [(kind, mode) for kind in ("sqlite", "postgres", "redis")
         for mode in ("inside", "after_commit", "between_pieces")]


@pytest.fixture(scope="module")
def numbers_topic(kafka):
    name = "kplan-" + uuid.uuid4().hex[:8]
    kafka.create_topic(name, SMALL + 1)
    n = 0
    for p in range(SMALL):
        kafka.produce(name, range(n + 1, n + PER_SMALL + 1), partition=p)
        n += PER_SMALL
    kafka.produce(name, range(n + 1, n + BIG + 1), partition=SMALL)
    assert sum(end for _, end in kafka.offsets(name).values()) == N
    return name


@pytest.mark.parametrize(("kind", "mode"), CASES, ids=[f"{k}-{m}" for k, m in CASES])
def test_every_record_once_after_a_kill_in_packed_or_split_kafka_tasks(kind, mode, kafka, numbers_topic, tmp_path,
                                                                       request, monkeypatch):
    monkeypatch.setattr("tests.integration.test_file_faults.MODULE", MODULE)
    url = _store_url(kind, tmp_path, request)
    app = f"kplan-faults-{mode}-{uuid.uuid4().hex[:6]}"
    marker = str(tmp_path / "killed")
    kill_then_replay((kafka.bootstrap, numbers_topic, url, app, str(N), mode, marker), url, app, N, mode, marker,
                     str(tmp_path / "children.err"))
