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

from dstream_exactly_once.demo import verify

from .faults import run_with_kills

N = 100_000
PARTITIONS = 4

pytestmark = [pytest.mark.integration, pytest.mark.slow]


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


@pytest.mark.parametrize("pattern", ["batch", "partition"])
@pytest.mark.parametrize("kind", ["sqlite", "postgres", "redis"])
def test_sum_is_exact_after_repeated_sigkills(kind, pattern, kafka, numbers_topic, tmp_path, redis_server,
                                              postgres_server):
    url = store_url(kind, tmp_path, redis_server, postgres_server)
    app = f"faults-{kind}-{pattern}-{uuid.uuid4().hex[:6]}"
    stats = run_with_kills(kafka.bootstrap, numbers_topic, url, app, pattern, min_kills=10,
                           seed=hash((kind, pattern)) & 0xFFFF)
    assert stats.kills + stats.self_crashes >= 10, stats
    assert verify(url, app, N, pattern) == []
