"""Exactly-once Kafka streaming with packed and split tasks under SIGKILL, on all three stores.

Twelve small partitions (packed into two tasks) and one large one (its own task, or split into
pieces for ``commit_each_batch``, two of them read together by one task). A first driver SIGKILLs
its own process group at one chosen point (``kafka_planner_faults_proc.py``): inside a packed task
before its commit, right after a packed task's per-task commit (the batch partly committed), or
between two pieces of one split range. A second driver replays the batch; the store must hold
every number exactly once.
"""

from __future__ import annotations

import os
import uuid

import pytest

from dstream_exactly_once.stores import open_store

from .test_file_faults import _lines, _spawn, _store_url, _wait_for

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
    stderr = str(tmp_path / "children.err")
    args = (kafka.bootstrap, numbers_topic, url, app, str(N), mode, marker)
    try:
        first = _spawn("driver", *args, stderr_path=stderr)
        lines = _lines(first)
        try:
            with pytest.raises(AssertionError, match="driver ended before DONE: <EOF>"):
                _wait_for(lines, "DONE", 150)
        finally:
            first.wait(30)
        assert os.path.exists(marker), "the first driver was not killed at the planned point"
        with open_store(url, app) as store:
            partial = store.get_values("numbers").get("count", 0)
        if mode == "after_commit":  # (the killed task's Python worker, outside the group, may still commit)
            assert 0 < partial < N  # the kill left the batch partly committed
        elif mode == "inside":
            assert partial < N  # tasks before the killed one may have committed their ranges
        else:
            assert partial == 0  # a whole-batch commit: nothing of the batch
        second = _spawn("driver", *args, stderr_path=stderr)
        try:
            done = _wait_for(_lines(second), "DONE", 150)
        finally:
            second.kill()
            second.wait(30)
    except AssertionError as exc:
        with open(stderr, errors="replace") as f:
            raise AssertionError(f"{exc}\nchildren's stderr (tail):\n{f.read()[-3000:]}") from None
    assert done == f"DONE {N} {N * (N + 1) // 2}"
    with open_store(url, app) as store:
        assert store.get_values("numbers") == {"count": N, "sum": N * (N + 1) // 2}
