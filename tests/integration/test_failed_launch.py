"""A failed launch writes nothing and fences nobody (, defect 1), on every real store.

A healthy driver (``createExactlyOnceStream`` + ``commit_each_batch`` in a running
StreamingContext) has caught up and is idle. Launches on the same app with a typo'd topic, an
explicit fromOffsets beyond the log end, ``retain_batches=0``, ``monitor_group=''`` and a bad
kafkaParam each fail with a clear error; the store then holds exactly what it held (SQLite and
PostgreSQL: every row of every ``deo_`` table; Redis: every key of the app with its serialized value)
except the live driver's own heartbeat, which it rewrites once per batch interval; and the live
driver still commits new records. The same launches against a fresh store leave nothing (no SQLite
file, no tables, no keys).
"""

from __future__ import annotations

import time
import uuid
from contextlib import closing
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest
from pyspark.streaming import StreamingContext

from dstream_exactly_once import DStreamExactlyOnceError, KafkaUtils, TopicAndPartition
from dstream_exactly_once.stores import Writes, open_store
from dstream_exactly_once.stores._writes import RESERVED_NAMESPACE

from ..helpers import eventually


def _params(kafka, **extra):
    return {"bootstrap.servers": kafka.bootstrap, "auto.offset.reset": "earliest", **extra}


def bad_launches(kafka, topic: str) -> List[Tuple[str, Dict[str, Any], str]]:
    """(what, createExactlyOnceStream arguments, a word the error must contain)."""
    return [
        ("typo'd topic", {"kafkaParams": _params(kafka), "topics": [topic + "-typo"]}, topic + "-typo"),
        ("fromOffsets beyond the log end",
         {"kafkaParams": _params(kafka), "topics": {TopicAndPartition(topic, 0): 10**6}}, "1000000"),
        ("retain_batches=0", {"kafkaParams": _params(kafka), "topics": [topic], "retain_batches": 0},
         "retain_batches"),
        ("monitor_group=''", {"kafkaParams": _params(kafka), "topics": [topic], "monitor_group": ""},
         "monitor_group"),
        ("bad kafkaParam", {"kafkaParams": _params(kafka, **{"enable.auto.commit": "true"}), "topics": [topic]},
         "enable.auto.commit"),
    ]


# ---------------------------------------------------------------- store snapshots
# A running driver rewrites its heartbeat every batch interval (SQL stores: the row ('__deo__',
# 'heartbeat') of deo_values; Redis: the app's ``heartbeat`` key); ``live=True`` leaves it out.
def _sqlite_snapshot(path: Path, live: bool) -> Any:
    """Without ``live``: the database file and its write-ahead log, byte for byte (``-shm`` is a
    shared-memory index). With it: every row of every ``deo_`` table but the heartbeat."""
    if not live:
        return {p.name: p.read_bytes() for p in sorted(path.parent.glob(path.name + "*"))
                if not p.name.endswith("-shm")}
    import sqlite3

    with closing(sqlite3.connect(path)) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                             "AND name LIKE 'deo\\_%' ESCAPE '\\' ORDER BY name")]
        return {t: sorted((r for r in conn.execute(f'SELECT * FROM "{t}"') if not _heartbeat_row(t, r)), key=repr)
                for t in tables}


def _heartbeat_row(table: str, row: Tuple[Any, ...]) -> bool:
    return table == "deo_values" and row[1] == RESERVED_NAMESPACE and row[2] == "heartbeat"


def _postgres_snapshot(url: str, live: bool) -> Dict[str, List[Tuple[Any, ...]]]:
    import psycopg

    with psycopg.connect(url) as conn:
        tables = [r[0] for r in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() "
            "AND table_name LIKE 'deo\\_%' ORDER BY table_name")]
        return {t: sorted((r for r in conn.execute(f'SELECT * FROM "{t}"').fetchall()
                           if not (live and _heartbeat_row(t, r))), key=repr) for t in tables}


def _redis_snapshot(redis_server, app: str, live: bool) -> Dict[bytes, Tuple[bytes, int]]:
    client = redis_server.client()
    try:
        keys = sorted(k for k in client.scan_iter(match="{deo:" + app + "}*")
                      if not (live and k == ("{deo:" + app + "}:heartbeat").encode()))
        return {k: (client.dump(k), client.pttl(k)) for k in keys}
    finally:
        client.close()


def _store(kind: str, tmp_path: Path, postgres_server, redis_server):
    """(store URL, snapshot function ``(app, live=False)``) for a fresh store of ``kind``."""
    if kind == "sqlite":
        path = tmp_path / f"state-{uuid.uuid4().hex[:6]}.db"
        return f"sqlite:///{path}", lambda app, live=False: _sqlite_snapshot(path, live)
    if kind == "postgres":
        url = postgres_server.url(postgres_server.create_database())
        return url, lambda app, live=False: _postgres_snapshot(url, live)
    return redis_server.url, lambda app, live=False: _redis_snapshot(redis_server, app, live)


def _launch_fails(ssc, store_url: str, app: str, what: str, kwargs: Dict[str, Any], word: str) -> None:
    with pytest.raises(DStreamExactlyOnceError) as info:
        KafkaUtils.createExactlyOnceStream(ssc, store=store_url, app_id=app, **kwargs)
    message = str(info.value)
    assert word in message, f"{what}: {message}"


@pytest.mark.parametrize("kind", ["sqlite", "postgres", "redis"])
def test_failed_launches_leave_the_store_unchanged_and_do_not_fence_the_live_driver(
        kind, kafka, topic_name, sc, tmp_path, postgres_server, redis_server):
    kafka.create_topic(topic_name, 2)
    kafka.produce(topic_name, [str(i) for i in range(1, 101)], partitions=2)
    url, snapshot = _store(kind, tmp_path, postgres_server, redis_server)
    app = "live-" + uuid.uuid4().hex[:8]

    ssc = StreamingContext(sc, 1)
    stream = KafkaUtils.createExactlyOnceStream(ssc, _params(kafka), [topic_name], store=url, app_id=app)

    def per_batch(batch, rdd):
        values = rdd.map(lambda kv: int(kv[1])).collect()
        return Writes().incr("totals", "sum", sum(values)).incr("totals", "count", len(values))

    stream.commit_each_batch(per_batch)

    def count() -> int:
        with open_store(url, app) as st:  # read-only
            return st.get_value("totals", "count") or 0

    def settled() -> bool:
        """The first 100 records committed and no batch logged but not committed (none in flight)."""
        with open_store(url, app) as st:
            return st.get_value("totals", "count") == 100 and st.pending_batches() == []

    ssc.start()
    try:
        eventually(settled, "the live driver to commit the first 100 records, no batch in flight", 120)
        # the live driver's heartbeat is its one write on idle batches: hold it while the store is compared
        stream.committer.heartbeat.min_gap_s = float("inf")
        time.sleep(1)  # a heartbeat already being written lands before the first snapshot
        epoch_before = stream.epoch
        before = snapshot(app, live=True)
        assert before, "the snapshot is empty: it would prove nothing"
        for what, kwargs, word in bad_launches(kafka, topic_name):
            _launch_fails(ssc, url, app, what, kwargs, word)
            assert snapshot(app, live=True) == before, f"{what}: the failed launch changed the store"
        with open_store(url, app) as st:
            assert st.current_epoch() == epoch_before
        stream.committer.heartbeat.min_gap_s = 0.5
        # the live driver is not fenced: it commits new records
        kafka.produce(topic_name, [str(i) for i in range(101, 151)], partitions=2)
        eventually(lambda: count() == 150, "the live driver to commit after the failed launches", 120)
        with open_store(url, app) as st:
            assert st.get_value("totals", "sum") == 150 * 151 // 2
            assert st.current_epoch() == epoch_before
    finally:
        ssc.stop(stopSparkContext=False, stopGraceFully=False)


@pytest.mark.parametrize("kind", ["sqlite", "postgres", "redis"])
def test_failed_launch_on_a_fresh_store_leaves_nothing(kind, kafka, topic_name, sc, tmp_path, postgres_server,
                                                       redis_server):
    kafka.create_topic(topic_name, 2)
    kafka.produce(topic_name, ["1", "2"], partitions=2)
    url, snapshot = _store(kind, tmp_path, postgres_server, redis_server)
    app = "fresh-" + uuid.uuid4().hex[:8]
    ssc = StreamingContext(sc, 1)
    for what, kwargs, word in bad_launches(kafka, topic_name):
        _launch_fails(ssc, url, app, what, kwargs, word)
        assert snapshot(app) == {}, f"{what}: the failed launch wrote {snapshot(app)!r}"
    if kind == "sqlite":
        assert list(tmp_path.iterdir()) == [], "a failed launch created a file"
