"""Exactly-once Kafka streaming with packed and split tasks under SIGKILL, on all three stores.

Twelve small partitions (packed into two tasks) and one large one (its own task, or split into
pieces for ``commit_each_batch``, two of them read together by one task). A first driver SIGKILLs
its own process group at one chosen point (``kafka_planner_faults_proc.py``): inside a packed task
before its commit, right after a packed task's per-task commit (the batch partly committed), or
between two pieces of one split range; each store gets its own first driver (its own SIGKILL).
One second driver replays the batch of the three stores (a stream each); every store must hold
every number exactly once.
"""

from __future__ import annotations

import uuid

import pytest

from .test_file_faults import _store_url
from .test_planner_faults import KINDS, MODES, kill_each_then_replay

pytestmark = [pytest.mark.integration, pytest.mark.slow]

MODULE = "tests.integration.kafka_planner_faults_proc"
SMALL, PER_SMALL, BIG = 12, 60, 1000
N = SMALL * PER_SMALL + BIG


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


@pytest.mark.parametrize("mode", MODES)
def test_every_record_once_after_a_kill_in_packed_or_split_kafka_tasks(mode, kafka, numbers_topic, tmp_path, request,
                                                                       monkeypatch):
    monkeypatch.setattr("tests.integration.test_file_faults.MODULE", MODULE)
    targets = []
    for kind in KINDS:
        (tmp_path / kind).mkdir()
        targets.append((_store_url(kind, tmp_path / kind, request), f"kplan-faults-{mode}-{uuid.uuid4().hex[:6]}",
                        str(tmp_path / kind / "killed")))
    kill_each_then_replay(lambda url, app, marker: (kafka.bootstrap, numbers_topic, url, app, str(N), mode, marker),
                          targets, N, mode, str(tmp_path / "children.err"))
