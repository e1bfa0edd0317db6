"""The pytest plugin of :mod:`dstream_exactly_once.testing`: real local services as session fixtures.

Installed with the package and loaded by pytest through the ``pytest11`` entry point named
``dstream_exactly_once`` (``pytest -p no:dstream_exactly_once`` turns it off). Every fixture name
starts with ``deo_``, so it never shadows a project's own ``kafka`` or ``redis`` fixture:

==========================  ========  ===========================================================
fixture                     scope     what it is
==========================  ========  ===========================================================
``deo_kafka``               session   :class:`~.LocalKafka`, a single-node KRaft broker
``deo_redis``               session   :class:`~.LocalRedis`, ``redis-server``
``deo_redis_cluster``       session   :class:`~.LocalRedisCluster`, three masters with a replica each
``deo_postgres``            session   :class:`~.LocalPostgres`, a throwaway PostgreSQL cluster
``deo_spark_context``       session   a ``local[2]`` ``SparkContext`` (:func:`~.make_spark_context`)
``deo_spark_cluster``       session   :class:`~.LocalSparkCluster`, a standalone master + 2 workers
``deo_spark_connect``       session   :class:`~.LocalSparkConnect`, a Spark Connect server (``local[2]``;
                                      ``.session()`` opens a Connect session on it)
``deo_app_id``              test      a fresh application id (``app-<12 hex>``)
``deo_topic_name``          test      a fresh topic name (``t-<12 hex>``; create it with
                                      ``deo_kafka.create_topic(deo_topic_name, partitions)``)
``deo_redis_url``           test      the ``redis://`` URL of ``deo_redis``
``deo_postgres_url``        test      the URL of a fresh database of ``deo_postgres``
==========================  ========  ===========================================================

A service starts the first time a test asks for it and stops at the end of the session. One that
cannot start raises :class:`~dstream_exactly_once.errors.ServiceError`: the tests that need it
error, they are not skipped. A session that dies without finishing (SIGTERM, SIGKILL, a CI timeout)
leaves no service running: the reaper of :mod:`._reaper` kills them and deletes their data.
Nothing heavy is imported until a fixture is used.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, Iterator

import pytest

if TYPE_CHECKING:
    from ._kafka import LocalKafka
    from ._postgres import LocalPostgres
    from ._redis import LocalRedis
    from ._redis_cluster import LocalRedisCluster
    from ._spark import LocalSparkCluster
    from ._spark_connect import LocalSparkConnect

#: the plugin's name in pytest (the entry point's): ``-p no:dstream_exactly_once`` disables it
PLUGIN_NAME = "dstream_exactly_once"


@pytest.fixture(scope="session")
def deo_kafka() -> Iterator[LocalKafka]:
    """A single-node KRaft Kafka broker on 127.0.0.1 shared by the session (``.bootstrap``)."""
    from ._kafka import LocalKafka

    with LocalKafka() as broker:
        yield broker


@pytest.fixture(scope="session")
def deo_redis() -> Iterator[LocalRedis]:
    """A ``redis-server`` on a free loopback port shared by the session (``.url``)."""
    from ._redis import LocalRedis

    with LocalRedis() as server:
        yield server


@pytest.fixture(scope="session")
def deo_redis_cluster() -> Iterator[LocalRedisCluster]:
    """A Redis Cluster (three masters, a replica each) shared by the session (``.url``:
    ``redis+cluster://…``)."""
    from ._redis_cluster import LocalRedisCluster

    with LocalRedisCluster() as cluster:
        yield cluster


@pytest.fixture(scope="session")
def deo_postgres() -> Iterator[LocalPostgres]:
    """A throwaway PostgreSQL cluster shared by the session (``.url(dbname)``, ``.create_database()``)."""
    from ._postgres import LocalPostgres

    with LocalPostgres() as server:
        yield server


@pytest.fixture(scope="session")
def deo_spark_context() -> Iterator[Any]:
    """A ``local[2]`` SparkContext shared by the session (loopback networking, quiet logs)."""
    from ._spark import make_spark_context

    sc = make_spark_context("local[2]", "deo-pytest")
    try:
        yield sc
    finally:
        sc.stop()


@pytest.fixture(scope="session")
def deo_spark_cluster() -> Iterator[LocalSparkCluster]:
    """A Spark standalone master with two one-core workers shared by the session (``.master_url``)."""
    from ._spark import LocalSparkCluster

    with LocalSparkCluster(workers=2) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def deo_spark_connect() -> Iterator[LocalSparkConnect]:
    """A Spark Connect server (``local[2]``) shared by the session; ``.session()`` opens a Connect
    session on it, whose Python workers import the packages this process imports."""
    from ._spark_connect import LocalSparkConnect

    with LocalSparkConnect() as server:
        yield server


@pytest.fixture
def deo_app_id() -> str:
    """A fresh application id, so tests sharing a store never see each other's state."""
    return "app-" + uuid.uuid4().hex[:12]


@pytest.fixture
def deo_topic_name() -> str:
    """A fresh Kafka topic name (not created: ``deo_kafka.create_topic(deo_topic_name, partitions)``)."""
    return "t-" + uuid.uuid4().hex[:12]


@pytest.fixture
def deo_redis_url(deo_redis: LocalRedis) -> str:
    """The ``redis://`` URL of the session's Redis server (use a fresh ``deo_app_id`` per test)."""
    return deo_redis.url


@pytest.fixture
def deo_postgres_url(deo_postgres: LocalPostgres) -> str:
    """The URL of a fresh, uuid-named database of the session's PostgreSQL cluster."""
    return deo_postgres.url(deo_postgres.create_database())
