"""Several processes committing to one store at once (driver + executors), on every backend."""

from __future__ import annotations

import multiprocessing
from typing import Any, List, Tuple

import pytest

from dstream_exactly_once.kafka._offsets import OffsetRange, TopicAndPartition
from dstream_exactly_once.stores import PlannedBatch, TransactionalStore, Writes, open_store

N_BATCHES = 40


def plan(batch_id: int) -> PlannedBatch:
    return PlannedBatch(batch_id, 1000 * batch_id,
                        tuple(OffsetRange("t", p, 10 * batch_id, 10 * batch_id + 10) for p in (0, 1)))


def _commit_partitions(store: TransactionalStore, epoch: int, partitions: Tuple[int, ...], marker: bool,
                       barrier: Any, results: Any) -> None:
    """Executor-like worker: the store arrives pickled as (url, app_id) and connects lazily.

    All workers commit their partitions of a batch at the same time; then the ``marker`` worker
    plays the driver and writes the commit-log entry before the next batch starts.
    """
    outcomes: List[Tuple[int, int, str]] = []
    for batch_id in range(N_BATCHES):
        batch = plan(batch_id)
        barrier.wait(60)
        for p in partitions:
            writes = Writes().incr("c", "total").incr("c", f"p{p}").put_batch_rows("rows", [p])
            out = store.commit(epoch, batch, writes, ranges=[batch.ranges[p]], complete_batch=False)
            outcomes.append((batch_id, p, out.value))
        barrier.wait(60)
        if marker:
            outcomes.append((batch_id, -1, store.mark_committed(epoch, batch).value))
    results.put(outcomes)


def run_workers(store: TransactionalStore, epoch: int,
                assignments: List[Tuple[int, ...]]) -> List[Tuple[int, int, str]]:
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(len(assignments)), ctx.Queue()
    procs = [ctx.Process(target=_commit_partitions, args=(store, epoch, parts, i == 0, barrier, results))
             for i, parts in enumerate(assignments)]
    for proc in procs:
        proc.start()
    collected = [results.get(timeout=180) for _ in procs]
    for proc in procs:
        proc.join(30)
        assert proc.exitcode == 0
    return [o for outcomes in collected for o in outcomes]


@pytest.fixture(params=["sqlite", "postgresql", "redis"])
def store_url(request: Any, tmp_path: Any) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/shared.db"
    return str(request.getfixturevalue(f"{request.param.replace('postgresql', 'postgres')}_url"))


def test_disjoint_partitions_of_one_batch_from_two_processes(store_url: str, app_id: str) -> None:
    with open_store(store_url, app_id) as store:
        epoch = store.start_epoch()
        outcomes = run_workers(store, epoch, [(0,), (1,)])
        assert len(outcomes) == 3 * N_BATCHES and {o for _, _, o in outcomes} == {"applied"}
        assert store.last_committed_batch_id() == N_BATCHES - 1 and store.pending_batches() == []
        assert store.get_values("c") == {"total": 2 * N_BATCHES, "p0": N_BATCHES, "p1": N_BATCHES}
        assert store.get_batch_rows("rows") == {b: [0, 1] for b in range(N_BATCHES)}
        assert store.load_offsets() == {TopicAndPartition("t", p): 10 * N_BATCHES for p in (0, 1)}


def test_duplicate_tasks_apply_each_range_once(store_url: str, app_id: str) -> None:
    """Speculative/retried tasks racing on the same ranges: exactly one of them applies each."""
    with open_store(store_url, app_id) as store:
        epoch = store.start_epoch()
        outcomes = run_workers(store, epoch, [(0, 1), (0, 1), (1, 0)])
        for batch_id in range(N_BATCHES):
            for p in (0, 1):
                mine = sorted(o for b, q, o in outcomes if (b, q) == (batch_id, p))
                assert mine == ["applied", "replayed", "replayed"], (batch_id, p, mine)
        assert all(store.is_committed(b) for b in range(N_BATCHES))
        assert store.get_values("c") == {"total": 2 * N_BATCHES, "p0": N_BATCHES, "p1": N_BATCHES}
