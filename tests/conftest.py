"""Session fixtures: real Kafka, Redis, PostgreSQL and Spark, started by the project's own helpers.

Nothing here skips: a service that cannot start raises, so its tests error and the run fails.
Each test gets its own uuid-named topic / key prefix / database.
"""

from __future__ import annotations

import os
import sys
import uuid
from typing import Any, Iterator

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
_paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
os.environ["PYTHONPATH"] = os.pathsep.join([ROOT] + _paths)

from dstream_exactly_once.testing import LocalKafka, LocalPostgres, LocalRedis  # noqa: E402
from dstream_exactly_once.testing._redis_cluster import LocalRedisCluster  # noqa: E402

INTEGRATION_DIR = os.path.join(ROOT, "tests", "integration") + os.sep


#: Seconds the slow tests of a file took in a full local run (the two slow parts and the rest side by
#: side on a loaded machine), for ``--shard``'s balance; a file not listed counts 20 s per slow test.
#: Only the balance depends on these: every file runs in one shard.
SHARD_SECONDS = {
    "test_delta_sink_faults.py": 840, "test_structured_kafka_source_faults.py": 700, "test_exactly_once_faults.py": 575,
    "test_structured_sink_faults.py": 400, "test_kafka_planner_faults.py": 370, "test_structured_kafka_source.py": 350,
    "test_structured_aof_faults.py": 335, "test_planner_faults.py": 300, "test_structured_doris_sink.py": 240,
    "test_structured_anchored.py": 235, "test_structured_kafka_sink_faults.py": 235, "test_deploy_routes.py": 235,
    "test_spark_connect.py": 220, "test_file_faults.py": 220, "test_sink_faults.py": 205,
    "test_yarn_exactly_once.py": 175, "test_service_reaper.py": 135, "test_demo.py": 125,
    "test_cluster_exactly_once.py": 125, "test_doc_snippets.py": 120, "test_structured_migration.py": 90,
    "test_security_docs.py": 80, "test_files_cluster.py": 70, "test_cluster.py": 55, "test_cli_live_file_lag.py": 30,
}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--shard", default=None, metavar="I/N",
                     help="run only the I-th (1-based) of N groups of test files, balanced by SHARD_SECONDS in "
                          "tests/conftest.py (scripts/run-tests.sh runs the slow tests as two shards side by side)")


def _shard(config: pytest.Config, items: list) -> None:
    spec = config.getoption("--shard")
    if not spec:
        return
    try:
        index, count = (int(x) for x in str(spec).split("/"))
        if not 1 <= index <= count:
            raise ValueError(spec)
    except ValueError:
        raise pytest.UsageError(f"--shard must be I/N with 1 <= I <= N, got {spec!r}") from None
    cost: dict = {}
    for item in items:
        name = item.path.name
        slow = item.get_closest_marker("slow") is not None
        cost[item.path] = cost.get(item.path, 0.0) + (0.0 if name in SHARD_SECONDS else 20.0 if slow else 0.01)
    for path in cost:
        cost[path] += SHARD_SECONDS.get(path.name, 0)
    loads = [0.0] * count
    owner = {}
    for path in sorted(cost, key=lambda p: (-cost[p], str(p))):  # the longest first, to the lightest shard
        i = loads.index(min(loads))
        owner[path], loads[i] = i + 1, loads[i] + cost[path]
    kept = [item for item in items if owner[item.path] == index]
    dropped = [item for item in items if owner[item.path] != index]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def pytest_collection_modifyitems(config: pytest.Config, items: list) -> None:
    """Every test under tests/integration gets the ``integration`` marker (``-m "not integration"``
    runs the rest); the files themselves do not repeat it. ``--shard I/N`` keeps one group of files."""
    for item in items:
        if str(item.path).startswith(INTEGRATION_DIR):
            item.add_marker(pytest.mark.integration)
    _shard(config, items)


@pytest.fixture(scope="session")
def kafka() -> Iterator[LocalKafka]:
    """A real single-node KRaft broker shared by the session (each test makes its own topics)."""
    broker = LocalKafka(sasl_users={"admin": "admin-secret", "alice": "alice-secret"},
                        broker_config={"log.segment.bytes": 1024 * 1024})
    broker.start()
    yield broker
    broker.stop()


@pytest.fixture
def topic_name() -> str:
    return "t-" + uuid.uuid4().hex[:12]


@pytest.fixture(scope="session")
def redis_server() -> Iterator[LocalRedis]:
    server = LocalRedis(appendonly=True)
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[LocalPostgres]:
    server = LocalPostgres()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def postgres_url(postgres_server: LocalPostgres) -> str:
    """URL of a fresh uuid-named database."""
    return postgres_server.url(postgres_server.create_database())


@pytest.fixture
def redis_url(redis_server: LocalRedis) -> str:
    return redis_server.url


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[LocalRedisCluster]:
    """A real Redis Cluster (three masters, a replica each) shared by the session; each test uses
    its own uuid-named app ids (hash tags), so tests do not see each other's keys."""
    cluster = LocalRedisCluster()
    cluster.start()
    yield cluster
    cluster.stop()


@pytest.fixture(params=["redis", "redis-cluster"])
def any_redis_url(request: pytest.FixtureRequest) -> str:
    """The URL of the single Redis server, then of the Redis Cluster: the Redis store tests run on both."""
    if request.param == "redis-cluster":
        return str(request.getfixturevalue("redis_cluster").url)
    return str(request.getfixturevalue("redis_url"))


def raw_redis_client(url: str, **kw: object):  # type: ignore[no-untyped-def]
    """A redis-py client of a store URL (``RedisCluster`` for ``redis+cluster://``), for tests that
    look at or tamper with the keys directly."""
    import redis
    from redis.cluster import ClusterNode, RedisCluster

    from dstream_exactly_once.stores._url import parse_url

    if url.startswith("redis+cluster://"):
        parsed = parse_url(url, multi_host=True)
        return RedisCluster(startup_nodes=[ClusterNode(h, p or 6379) for h, p in parsed.hosts], **kw)
    return redis.Redis.from_url(url, **kw)


@pytest.fixture
def app_id() -> str:
    return "app-" + uuid.uuid4().hex[:12]


@pytest.fixture(scope="session")
def sc():  # type: ignore[no-untyped-def]
    """A local[2] SparkContext shared by the session."""
    from dstream_exactly_once.testing._spark import make_spark_context

    context = make_spark_context("local[2]", "deo-tests")
    yield context
    context.stop()


@pytest.fixture(scope="session")
def spark_connect():  # type: ignore[no-untyped-def]
    """A Spark Connect server (local[2]) shared by the session, with Spark's Kafka source jars; each
    test opens its own Connect session on it (``spark_connect.session()``)."""
    from dstream_exactly_once.testing import LocalSparkConnect

    server = LocalSparkConnect(kafka=True)
    server.start()
    yield server
    server.stop()


def pytest_configure(config: pytest.Config) -> None:
    config.deo_bad_input_cases = []  # type: ignore[attr-defined]  # filled by test_bad_input_generated.py


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """How much of the option registry the generated bad-input test covered in this run."""
    ran = getattr(config, "deo_bad_input_cases", [])
    if ran:
        from dstream_exactly_once.cli._option_entries import every_entry_point
        from dstream_exactly_once.option_registry import option_count

        bad = [r for r in ran if r[0] == "bad input"]
        secret = [r for r in ran if r[0] == "password"]
        entries = every_entry_point()
        terminalreporter.write_line(
            f"option registry: {len(entries)} entry points, {option_count(entries)} options; generated cases run: "
            f"{len(bad)} bad-input cases over {len({r[1:] for r in bad})} options, {len(secret)} password cases "
            f"over {len({r[1:] for r in secret})} options")
