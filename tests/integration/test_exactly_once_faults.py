"""Exactly-once under SIGKILL: the integers 1..N through real Kafka, Spark and each real store.

Each test restarts the pipeline driver (a child process group: Python driver, JVM, Python
workers) until it catches up; at least 10 runs die by SIGKILL — at random moments chosen by the
test (start-up, planning, mid-batch) and at crash points inside the child (after the offset log
write, on executors mid-batch, between output and commit, right after commit). The stored sum must
be exactly N(N+1)/2, the count exactly N, the per-key word counts exact and each batch's
time-keyed rows present once.
"""

from __future__ import annotations

import uuid

import pytest

from dstream_exactly_once.teaching._pipeline import verify

from ..helpers import eventually
from .faults import run_with_kills

N = 100_000
PARTITIONS = 4

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def numbers_topic(kafka):
    name = "numbers-" + uuid.uuid4().hex[:8]
    kafka.create_topic(name, PARTITIONS)
    kafka.produce(name, range(1, N + 1), partitions=PARTITIONS)
    assert sum(end for _, end in kafka.offsets(name).values()) == N
    return name


def store_url(kind, tmp_path, redis_server, postgres_server):
    if kind == "sqlite":
        return f"sqlite:///{tmp_path}/state.db"
    if kind == "postgres":
        return postgres_server.url(postgres_server.create_database())
    return redis_server.url


KINDS = ("sqlite", "postgres", "redis")


def test_sum_is_exact_after_repeated_sigkills(kafka, numbers_topic, tmp_path, redis_server, postgres_server):
    """One driver runs both output patterns as two applications (``<app>-batch`` committing per
    batch on the driver, ``<app>-partition`` committing per partition on executors) on each of the
    three stores, so every kill hits all six."""
    urls = [store_url(kind, tmp_path, redis_server, postgres_server) for kind in KINDS]
    app = f"faults-{uuid.uuid4().hex[:6]}"
    stats = run_with_kills(kafka.bootstrap, numbers_topic, urls, app, "both", min_kills=10, seed=11)
    assert stats.kills + stats.self_crashes >= 10, stats
    for url in urls:
        assert verify(url, f"{app}-batch", N, "batch") == [], url
        assert verify(url, f"{app}-partition", N, "partition") == [], url


def test_offset_log_in_commit_is_exact_after_repeated_sigkills(kafka, numbers_topic, tmp_path, redis_server,
                                                               postgres_server):
    """``commit_each_batch(offset_log="in_commit")`` on each of the three stores in one driver: one
    store transaction per batch; a batch cut short by a kill is planned afresh by the next driver,
    and the results stay exact."""
    from dstream_exactly_once.stores import open_store

    urls = [store_url(kind, tmp_path, redis_server, postgres_server) for kind in KINDS]
    app = f"faults-1tx-{uuid.uuid4().hex[:6]}"
    stats = run_with_kills(kafka.bootstrap, numbers_topic, urls, app, "batch", min_kills=8, seed=21,
                           extra=["--offset-log", "in_commit"])
    assert stats.kills + stats.self_crashes >= 8, stats
    for url in urls:
        assert verify(url, app, N, "batch") == [], url
        with open_store(url, app) as store:  # every logged batch is a committed one: nothing was logged ahead
            assert store.pending_batches() == []
            assert store.last_logged_batch_id() == store.last_committed_batch_id()


def _committed(url, app):
    from dstream_exactly_once.stores import open_store

    try:
        with open_store(url, app) as store:
            return store.last_committed_batch_id()
    except Exception:  # noqa: BLE001 - store may be restarting
        return None


def _epoch(url, app):
    from dstream_exactly_once.stores import open_store

    try:
        with open_store(url, app) as store:  # read-only: writes nothing
            return store.current_epoch()
    except Exception:  # noqa: BLE001 - a busy SQLite file: ask again
        return None


def _read_epoch(url, app, timeout=60):
    """The store's epoch, asking again while the SQLite file is busy."""
    eventually(lambda: _epoch(url, app) is not None, "a readable epoch", timeout)
    epoch = None
    while epoch is None:
        epoch = _epoch(url, app)
    return epoch


# The zombie's rate cap: it plans at most ZOMBIE_RATE records per partition per 1-second batch and
# Spark makes at most one batch per second of wall time, so it cannot read all N records in less
# than N / (PARTITIONS * ZOMBIE_RATE) = 250 s, however loaded the machine is.
ZOMBIE_RATE = 100


def test_zombie_driver_is_fenced_and_results_stay_exact(kafka, numbers_topic, tmp_path):
    """A second driver takes a newer epoch; the first (the zombie) is fenced at its next commit.

    Ordered by store state, not by sleeps: the second starts once the first has committed two
    batches, and the zombie's fate is checked only once the store shows the second's epoch. The
    zombie is rate-capped so it cannot finish the topic before that (it used to run at the same
    rate as the second and, under heavy load, could read everything while the second's Spark was
    still starting, then exit 0 with DONE instead of being fenced).
    """
    from .faults import kill_group, start_pipeline

    url = f"sqlite:///{tmp_path}/zombie.db"
    app = "zombie-" + uuid.uuid4().hex[:6]
    first = start_pipeline(kafka.bootstrap, numbers_topic, url, app, "batch", rate=ZOMBIE_RATE)
    second = None
    try:
        eventually(lambda: (_committed(url, app) or -1) >= 1, "the first driver to commit two batches", 300)
        first_epoch = _read_epoch(url, app)
        assert first_epoch >= 1
        assert first.poll() is None, "the rate-capped first driver finished before the second started"
        second = start_pipeline(kafka.bootstrap, numbers_topic, url, app, "batch", rate=2000)
        eventually(lambda: (_epoch(url, app) or 0) > first_epoch, "the second driver to take a newer epoch", 300)
        out_first, _ = first.communicate(timeout=300)
        assert first.returncode == 3, out_first[-3000:]
        assert "FencedError" in out_first and "epoch" in out_first, out_first[-3000:]
        out_second, _ = second.communicate(timeout=400)
        assert "DONE" in out_second, out_second[-3000:]
    finally:
        kill_group(first)
        if second is not None:
            kill_group(second)
    assert verify(url, app, N, "batch") == []


@pytest.mark.parametrize("kind", ["redis", "postgres"])
def test_store_server_restart_mid_stream(kind, kafka, numbers_topic):
    from dstream_exactly_once.testing import LocalPostgres, LocalRedis

    from .faults import kill_group, start_pipeline

    server = LocalRedis(appendonly=True) if kind == "redis" else LocalPostgres()
    server.start()
    try:
        url = server.url if kind == "redis" else server.url(server.create_database())
        app = f"restart-{kind}-" + uuid.uuid4().hex[:6]
        restarted = False
        for _run in range(8):
            proc = start_pipeline(kafka.bootstrap, numbers_topic, url, app, "batch", rate=1500)
            try:
                if not restarted:
                    eventually(lambda: (_committed(url, app) or -1) >= 1, "two committed batches", 120)
                    server.kill()  # SIGKILL the store server mid-stream
                    server.start()
                    restarted = True
                out, _ = proc.communicate(timeout=240)
            finally:
                kill_group(proc)
            if "DONE" in out:
                break
        else:
            raise AssertionError("the pipeline never finished after the store restart")
        assert restarted
        assert verify(url, app, N, "batch") == []
    finally:
        server.stop()
