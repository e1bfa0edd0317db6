"""The local service helpers against the real services they start (issue "Foundation").

Kafka, Redis, PostgreSQL and Spark are the session fixtures from ``tests/conftest.py``; tests that
crash and restart a service use their own instance so the shared ones stay untouched. Every test
uses its own uuid-named topic / key prefix / database. Nothing is mocked and nothing skips.
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from typing import List, Tuple

import psycopg
import pytest
import redis
from kafka import KafkaConsumer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType
from redis.backoff import NoBackoff
from redis.retry import Retry

from dstream_exactly_once.errors import ServiceError
from dstream_exactly_once.testing import LocalKafka, LocalPostgres, LocalRedis
from dstream_exactly_once.testing._process import port_open


# ---------------------------------------------------------------------------------------------- Kafka
def read_by_offsets(bootstrap: str, topic: str, partition: int, start: int, end: int,
                    isolation_level: str = "read_uncommitted", timeout: float = 30.0) -> List[Tuple[int, str]]:
    """``[(offset, value)]`` of ``topic-partition`` from ``start`` until the position reaches ``end``,
    read with a plain consumer (assign + seek + poll; no group, no auto commit)."""
    tp = TopicPartition(topic, partition)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None,
                             isolation_level=isolation_level, auto_offset_reset="none",
                             consumer_timeout_ms=1000)
    got: List[Tuple[int, str]] = []
    try:
        consumer.assign([tp])
        consumer.seek(tp, start)
        deadline = time.monotonic() + timeout
        while consumer.position(tp) < end:
            assert time.monotonic() < deadline, (
                f"{topic}-{partition}: position {consumer.position(tp)} never reached {end}; got {len(got)}")
            for records in consumer.poll(timeout_ms=500).values():
                got += [(r.offset, r.value.decode()) for r in records if r.offset < end]
    finally:
        consumer.close()
    return got


def test_kafka_round_trip_by_explicit_offsets(kafka, topic_name):
    kafka.create_topic(topic_name, 3)
    assert kafka.produce(topic_name, range(1000), partitions=3) == 1000  # value i -> partition i % 3
    offsets = kafka.offsets(topic_name)
    assert sorted(offsets) == [0, 1, 2]
    seen: List[int] = []
    for p, (earliest, latest) in offsets.items():
        assert earliest == 0
        records = read_by_offsets(kafka.bootstrap, topic_name, p, earliest, latest)
        assert [o for o, _ in records] == list(range(earliest, latest)), f"partition {p} offsets not contiguous"
        values = [int(v) for _, v in records]
        assert values == list(range(p, 1000, 3)), f"partition {p} holds other values or order"
        seen += values
    assert sorted(seen) == list(range(1000))  # every record exactly once
    # a read from the middle by explicit offset returns exactly that slice
    assert read_by_offsets(kafka.bootstrap, topic_name, 1, 100, 103) == [(100, "301"), (101, "304"), (102, "307")]


def test_transactional_producer_aborted_batch(kafka, topic_name):
    kafka.create_topic(topic_name, 1)
    committed1, aborted, committed2 = ["c0", "c1", "c2"], ["a0", "a1"], ["c3", "c4"]
    kafka.produce_transactional(topic_name, [(committed1, True), (aborted, False), (committed2, True)])
    earliest, latest = kafka.offsets(topic_name)[0]
    # 7 records + 3 control markers (commit, abort, commit)
    assert (earliest, latest) == (0, 10)

    rc = read_by_offsets(kafka.bootstrap, topic_name, 0, 0, latest, isolation_level="read_committed")
    assert [v for _, v in rc] == committed1 + committed2
    # c0..c2 at 0..2, commit marker 3, a0 a1 at 4..5, abort marker 6, c3 c4 at 7..8, commit marker 9
    assert [o for o, _ in rc] == [0, 1, 2, 7, 8]
    gaps = [(a, b) for (a, _), (b, _) in zip(rc, rc[1:], strict=False) if b - a != 1]
    assert gaps == [(2, 7)], "offsets 3..6 (two markers, two aborted records) are a gap"

    ru = read_by_offsets(kafka.bootstrap, topic_name, 0, 0, latest, isolation_level="read_uncommitted")
    assert [v for _, v in ru] == committed1 + aborted + committed2
    assert [o for o, _ in ru] == [0, 1, 2, 4, 5, 7, 8]  # only the markers are missing


def test_kafka_delete_records_moves_earliest(kafka, topic_name):
    kafka.create_topic(topic_name, 2)
    kafka.produce(topic_name, range(100), partitions=2)
    assert kafka.offsets(topic_name) == {0: (0, 50), 1: (0, 50)}
    kafka.delete_records(topic_name, {0: 20})
    assert kafka.offsets(topic_name) == {0: (20, 50), 1: (0, 50)}
    records = read_by_offsets(kafka.bootstrap, topic_name, 0, 20, 50)
    assert [o for o, _ in records] == list(range(20, 50))
    assert [int(v) for _, v in records] == list(range(40, 100, 2))
    # reading below the new log start is out of range (auto_offset_reset="none" -> no silent reset)
    with pytest.raises(Exception, match="(?i)out ?of ?range|OffsetOutOfRange"):
        read_by_offsets(kafka.bootstrap, topic_name, 0, 0, 50, timeout=10)


def test_kafka_add_partitions_grows_topic(kafka, topic_name):
    kafka.create_topic(topic_name, 1)
    assert sorted(kafka.offsets(topic_name)) == [0]
    kafka.add_partitions(topic_name, 4)
    assert kafka.offsets(topic_name) == {p: (0, 0) for p in range(4)}
    kafka.produce(topic_name, ["new"], partition=3)
    assert read_by_offsets(kafka.bootstrap, topic_name, 3, 0, 1) == [(0, "new")]


def _topic_config(kafka: LocalKafka, topic: str) -> dict[str, Tuple[str, str]]:
    """``{key: (value, source)}`` of the topic's non-default configs, as the broker describes them."""
    described = kafka.admin().describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    return {k: (v["value"], v["config_source"]) for k, v in described["topic"][topic].items()}


def test_kafka_topic_config_applied(kafka, topic_name):
    kafka.create_topic(topic_name, 1, {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": 0.01,
                                       "segment.ms": 100})
    configs = _topic_config(kafka, topic_name)
    assert configs["cleanup.policy"] == ("compact", "DYNAMIC_TOPIC_CONFIG"), configs
    assert float(configs["min.cleanable.dirty.ratio"][0]) == 0.01, configs
    assert configs["segment.ms"][0] == "100", configs
    plain = "p-" + topic_name
    kafka.create_topic(plain, 1)
    assert "cleanup.policy" not in _topic_config(kafka, plain)  # the broker default: delete


def test_kafka_kill_and_restart_keeps_data(topic_name):
    with LocalKafka() as broker:  # its own broker: the session one is never killed
        port = broker.port
        broker.create_topic(topic_name, 2)
        broker.produce(topic_name, range(200), partitions=2)
        assert broker.offsets(topic_name) == {0: (0, 100), 1: (0, 100)}
        broker.kill()
        assert not broker.running and not port_open(port)
        broker.start()
        assert broker.running and broker.port == port and broker.bootstrap == f"127.0.0.1:{port}"
        assert broker.offsets(topic_name) == {0: (0, 100), 1: (0, 100)}
        for p in (0, 1):
            records = read_by_offsets(broker.bootstrap, topic_name, p, 0, 100)
            assert [o for o, _ in records] == list(range(100))
            assert [int(v) for _, v in records] == list(range(p, 200, 2))
        broker.produce(topic_name, ["after"], partition=0)  # and it takes writes again
        assert read_by_offsets(broker.bootstrap, topic_name, 0, 100, 101) == [(100, "after")]
    assert not broker.running


def test_kafka_that_cannot_start_raises_service_error():
    # The config parses (so storage format succeeds) but the broker dies loading the authorizer.
    broker = LocalKafka(broker_config={"authorizer.class.name": "no.such.Authorizer"})
    began = time.monotonic()
    try:
        with pytest.raises(ServiceError, match="exited with code") as info:
            broker.start(timeout=60)
        assert "no.such.Authorizer" in str(info.value)  # the log tail says why
        assert not broker.running
    finally:
        broker.stop()
    assert time.monotonic() - began < 45, "a dead broker must be reported promptly, not after the timeout"


# ---------------------------------------------------------------------------------------------- Redis
def test_redis_round_trip_with_aof(redis_server):
    prefix = "t:" + uuid.uuid4().hex[:12] + ":"
    client = redis_server.client()
    try:
        client.set(prefix + "a", "1")
        client.hset(prefix + "h", mapping={"x": "y"})
        assert client.get(prefix + "a") == b"1"
        assert client.hgetall(prefix + "h") == {b"x": b"y"}
        assert client.config_get("appendonly")["appendonly"] == "yes"
        workdir = client.config_get("dir")["dir"]
        aof_dir = client.config_get("appenddirname").get("appenddirname", "appendonlydir")
        aof = list((Path(workdir) / aof_dir).glob("*.aof")) or list(Path(workdir).glob("appendonly.aof*"))
        assert aof, f"no AOF file in {workdir}"
        assert any(prefix.encode() in f.read_bytes() for f in aof), "the write is not in the AOF"
    finally:
        client.delete(prefix + "a", prefix + "h")
        client.close()
    assert redis_server.url.startswith(f"redis://127.0.0.1:{redis_server.port}/")


def test_redis_requirepass():
    password = "pw with spaces \"quotes\" " + uuid.uuid4().hex
    with LocalRedis(password=password) as server:
        assert password not in repr(server) and password not in str(server)
        assert "auth=True" in repr(server)
        no_retry = {"socket_timeout": 5, "retry": Retry(NoBackoff(), 0)}  # redis-py retries auth errors
        anonymous = redis.Redis(host="127.0.0.1", port=server.port, **no_retry)
        wrong = redis.Redis(host="127.0.0.1", port=server.port, password="wrong", **no_retry)
        try:
            with pytest.raises(redis.AuthenticationError):
                anonymous.set("k", "v")
            with pytest.raises(redis.AuthenticationError):
                wrong.ping()
        finally:
            anonymous.close()
            wrong.close()
        client = server.client()
        try:
            assert client.set("k", "v") and client.get("k") == b"v"
        finally:
            client.close()
        # the URL carries the password (that is its purpose); redis-py accepts it
        url_client = redis.Redis.from_url(server.url.replace(password, _quote(password)))
        try:
            assert url_client.get("k") == b"v"
        finally:
            url_client.close()


def _quote(text: str) -> str:
    from urllib.parse import quote

    return quote(text, safe="")


def test_redis_kill_and_restart_keeps_aof_data():
    with LocalRedis(appendonly=True) as server:
        port = server.port
        client = server.client()
        client.mset({f"k{i}": str(i) for i in range(100)})
        client.incrby("counter", 42)
        client.close()
        server.kill()
        assert not port_open(port)
        server.start()
        assert server.port == port
        client = server.client()
        try:
            assert client.get("counter") == b"42"
            assert [int(v) for v in client.mget([f"k{i}" for i in range(100)])] == list(range(100))
        finally:
            client.close()


def test_redis_that_cannot_start_raises_service_error():
    with LocalRedis() as occupant:
        server = LocalRedis()
        server.port = occupant.port  # the port is taken (by a Redis that answers PING): bind fails
        began = time.monotonic()
        try:
            with pytest.raises(ServiceError, match="exited with code") as info:
                server.start(timeout=30)
            assert "Address already in use" in str(info.value)  # the log tail says why
            assert not server._proc.running
        finally:
            server.stop()
        assert time.monotonic() - began < 20
        assert occupant.client().ping()  # the other server is untouched


# ---------------------------------------------------------------------------------------------- PostgreSQL
def test_postgres_round_trip(postgres_url):
    with psycopg.connect(postgres_url, autocommit=False) as conn:
        conn.execute("create table items (id int primary key, name text not null)")
        conn.cursor().executemany("insert into items values (%s, %s)", [(i, f"n{i}") for i in range(10)])
        conn.commit()
    with psycopg.connect(postgres_url) as conn:
        rows = conn.execute("select id, name from items order by id").fetchall()
        assert rows == [(i, f"n{i}") for i in range(10)]
        assert conn.execute("select current_database()").fetchone()[0] == postgres_url.rsplit("/", 1)[1]


def test_postgres_kill_and_restart_keeps_committed_rows():
    with LocalPostgres() as server:  # its own server: the session one is never killed
        assert server._password not in repr(server)
        port = server.port
        dbname = server.create_database()
        with psycopg.connect(server.url(dbname)) as conn:
            conn.execute("create table t (id int primary key)")
            conn.execute("insert into t select generate_series(1, 100)")
            conn.commit()
        pending = psycopg.connect(server.url(dbname))
        pending.execute("insert into t values (1000)")  # never committed
        backend = pending.execute("select pg_backend_pid()").fetchone()[0]
        server.kill()
        # A crash takes the backends with it (they start sessions of their own, so killing the
        # postmaster's process group alone would leave them serving their clients for a while).
        assert not os.path.exists(f"/proc/{backend}") or open(f"/proc/{backend}/stat").read().split(") ")[1][0] == "Z"
        with pytest.raises(psycopg.OperationalError):
            pending.execute("select 1")
        pending.close()
        server.start()
        assert server.port == port
        with psycopg.connect(server.url(dbname)) as conn:
            assert conn.execute("select count(*), min(id), max(id) from t").fetchone() == (100, 1, 100)


# ---------------------------------------------------------------------------------------------- Spark
def test_spark_local_job(sc):
    rdd = sc.parallelize(range(1000), 4).map(lambda x: x * 3 + 1)
    assert rdd.getNumPartitions() == 4
    assert rdd.sum() == 3 * 999 * 1000 // 2 + 1000
    assert sc.master.startswith("local")
