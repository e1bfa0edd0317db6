"""Store layout and positions, on every backend against the real servers of the session fixtures:

- opening and reading write nothing (a fresh store stays absent; a version-1 store byte-identical);
- a store in layout version 1 (written here directly, as the previous release left it) is read as
  it is and upgraded by the first write, after which its pending batch commits from the stored offset;
- positions of a non-Kafka source keep their document (``position_meta()``);
- ``reset_positions`` is epoch-checked and writes nothing when refused.
"""

from __future__ import annotations

import json
import os
import sqlite3
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

import pytest

from dstream_exactly_once.core._ranges import Position, SourceRange, register_range_kind
from dstream_exactly_once.errors import (
    ConfigurationError,
    FencedError,
    OffsetConflictError,
    StoreUnavailableError,
)
from dstream_exactly_once.kafka._offsets import OffsetRange, TopicAndPartition
from dstream_exactly_once.stores import (
    SCHEMA_VERSION,
    CommitOutcome,
    PlannedBatch,
    TransactionalStore,
    Writes,
    open_store,
)

from ..conftest import raw_redis_client
from .fixtures import ContractFixtures

APPLIED, REPLAYED = CommitOutcome.APPLIED, CommitOutcome.REPLAYED
P0, P1 = TopicAndPartition("t", 0), TopicAndPartition("t", 1)


@register_range_kind
@dataclass(frozen=True)
class DocRange(SourceRange):
    """A test source whose positions carry a document, like the file source's fingerprints."""

    kind = "test-doc"

    name: str
    first: int
    last: int
    fingerprint: Optional[str] = None

    @property
    def position_key(self) -> str:
        return f"doc:{self.name}"

    @property
    def start(self) -> int:
        return self.first

    @property
    def end(self) -> int:
        return self.last

    def position_meta(self) -> Optional[Dict[str, Any]]:
        return None if self.fingerprint is None else {"fp": self.fingerprint, "path": f"/logs/{self.name}"}

    def to_json_obj(self) -> Any:
        return {"name": self.name, "first": self.first, "last": self.last, "fp": self.fingerprint}

    @classmethod
    def from_json_obj(cls, obj: Any) -> DocRange:
        return cls(obj["name"], obj["first"], obj["last"], obj["fp"])


# ---------------------------------------------------------------- the version-1 store of the fixtures
# Two applications, as the previous release wrote them: app A with epoch 3, batch 0 committed and
# batch 1 logged but not committed; app B with one offset. Kafka ranges are 4-element lists.
V1_B0 = PlannedBatch(0, 1000, (OffsetRange("t", 0, 0, 10), OffsetRange("t", 1, 0, 5)))
V1_B1 = PlannedBatch(1, 2000, (OffsetRange("t", 0, 10, 15), OffsetRange("t", 1, 5, 5)))
V1_RANGES = {0: '[["t",0,0,10],["t",1,0,5]]', 1: '[["t",0,10,15],["t",1,5,5]]'}
V1_ENTRIES = {b: f'{{"batch_id":{b},"batch_time_ms":{1000 * (b + 1)},"ranges":{r}}}' for b, r in V1_RANGES.items()}
V1_SQL_DDL = (  # dstream_exactly_once/stores/sql.py at bd896e9
    "CREATE TABLE IF NOT EXISTS deo_meta (app TEXT PRIMARY KEY, schema_version INTEGER NOT NULL, "
    "epoch BIGINT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS deo_offsets (app TEXT NOT NULL, topic TEXT NOT NULL, partition_id INTEGER NOT NULL, "
    "next_offset BIGINT NOT NULL, PRIMARY KEY (app, topic, partition_id)){options}",
    "CREATE TABLE IF NOT EXISTS deo_batches (app TEXT NOT NULL, batch_id BIGINT NOT NULL, "
    "batch_time_ms BIGINT NOT NULL, ranges TEXT NOT NULL, PRIMARY KEY (app, batch_id))",
    "CREATE TABLE IF NOT EXISTS deo_commits (app TEXT NOT NULL, batch_id BIGINT NOT NULL, epoch BIGINT NOT NULL, "
    "PRIMARY KEY (app, batch_id))",
    "CREATE TABLE IF NOT EXISTS deo_values (app TEXT NOT NULL, ns TEXT NOT NULL, k TEXT NOT NULL, inum {int}, "
    "fnum {float}, doc TEXT, PRIMARY KEY (app, ns, k)){options}",
    "CREATE TABLE IF NOT EXISTS deo_batch_rows (app TEXT NOT NULL, ns TEXT NOT NULL, batch_id BIGINT NOT NULL, "
    "part TEXT NOT NULL, seq INTEGER NOT NULL, doc TEXT NOT NULL, PRIMARY KEY (app, ns, batch_id, part, seq))",
    "CREATE TABLE IF NOT EXISTS deo_labels (app TEXT NOT NULL, label TEXT NOT NULL, PRIMARY KEY (app, label))",
)


def v1_sql_rows(a: str, b: str) -> List[Tuple[str, Tuple[Any, ...]]]:
    """``(INSERT with ? placeholders, params)`` of the version-1 fixture's rows."""
    return [
        ("INSERT INTO deo_meta VALUES (?, 1, 3)", (a,)),
        ("INSERT INTO deo_meta VALUES (?, 1, 1)", (b,)),
        ("INSERT INTO deo_offsets VALUES (?, 't', 0, 10)", (a,)),
        ("INSERT INTO deo_offsets VALUES (?, 't', 1, 5)", (a,)),
        ("INSERT INTO deo_offsets VALUES (?, 'x', 0, 7)", (b,)),
        ("INSERT INTO deo_batches VALUES (?, 0, 1000, ?)", (a, V1_RANGES[0])),
        ("INSERT INTO deo_batches VALUES (?, 1, 2000, ?)", (a, V1_RANGES[1])),
        ("INSERT INTO deo_commits VALUES (?, 0, 3)", (a,)),
        ("INSERT INTO deo_values VALUES (?, 'counts', 'n', 1, NULL, NULL)", (a,)),
        ("INSERT INTO deo_batch_rows VALUES (?, 'rows', 0, '', 0, '\"r0\"')", (a,)),
        ("INSERT INTO deo_labels VALUES (?, 'L0')", (a,)),
    ]


POSITIONS_SQL = "SELECT app, pkey, next_pos, meta FROM deo_positions ORDER BY app, pkey"


def read_everything(store: TransactionalStore) -> Tuple[Any, ...]:
    """Every read method of the contract, once."""
    return (store.current_epoch(), store.load_positions(), store.load_offsets(), store.pending_batches(),
            store.get_batch(0), store.get_batch(1), store.last_logged_batch_id(), store.last_committed_batch_id(),
            store.is_committed(0), store.get_value("counts", "n"), store.get_values("counts"),
            store.get_batch_rows("rows"), store.has_label("L0"))


class LayoutContract(ContractFixtures):
    """Layout, read-only opening and positions; each backend says how to write and dump its layout."""

    def write_v1(self, url: str, a: str, b: str) -> None:
        """Write the version-1 fixture directly (old DDL / keys and rows)."""
        raise NotImplementedError

    def dump(self, url: str, *apps: str) -> Any:
        """Everything the store holds for ``apps``, byte for byte where the backend allows."""
        raise NotImplementedError

    def assert_nothing_created(self, url: str, app_id: str) -> None:
        raise NotImplementedError

    def assert_upgraded(self, url: str, a: str, b: str) -> None:
        raise NotImplementedError

    # ---------------------------------------------------------------- reading writes nothing
    def test_opening_and_reading_a_fresh_store_writes_nothing(self, store_url: str, app_id: str) -> None:
        with open_store(store_url, app_id) as store:
            assert read_everything(store) == (0, {}, {}, [], None, None, None, None, False, None, {}, {}, False)
        self.assert_nothing_created(store_url, app_id)

    def test_version_1_store_is_read_unchanged_then_upgraded_by_the_first_write(self, store_url: str,
                                                                                app_id: str) -> None:
        other = app_id + "-b"
        self.write_v1(store_url, app_id, other)
        before = self.dump(store_url, app_id, other)
        with open_store(store_url, app_id) as store:
            assert read_everything(store) == (
                3, {"t/0": Position(10), "t/1": Position(5)}, {P0: 10, P1: 5}, [V1_B1], V1_B0, V1_B1, 1, 0, True,
                1, {"n": 1}, {0: ["r0"]}, True)
            assert self.dump(store_url, app_id, other) == before  # reads left it byte-identical

            epoch = store.start_epoch()  # the first write upgrades the whole store
            assert epoch == 4
            self.assert_upgraded(store_url, app_id, other)
            assert store.load_positions() == {"t/0": Position(10), "t/1": Position(5)}
            assert store.pending_batches() == [V1_B1]
            assert store.commit(epoch, V1_B1, Writes().incr("counts", "n", 2)) is APPLIED  # CAS from offset 10
            b2 = PlannedBatch(2, 3000, (OffsetRange("t", 0, 15, 20), OffsetRange("t", 1, 5, 6)))
            store.log_batch(epoch, b2)
            assert store.commit(epoch, b2, Writes().incr("counts", "n", 3).put_batch_rows("rows", ["r2"])) is APPLIED
            assert store.commit(epoch, V1_B1, Writes().incr("counts", "n", 100)) is REPLAYED
            assert store.load_offsets() == {P0: 20, P1: 6}
            assert store.load_positions() == {"t/0": Position(20), "t/1": Position(6)}
            assert store.get_value("counts", "n") == 6
            assert store.get_batch_rows("rows") == {0: ["r0"], 2: ["r2"]}
            assert store.pending_batches() == [] and store.last_committed_batch_id() == 2
            assert store.get_batch(0) == V1_B0 and store.get_batch(2) == b2 and store.has_label("L0")
            epoch = store.start_epoch()  # the first commit of an epoch compares every range
            with pytest.raises(OffsetConflictError, match=r"t-0.*stored offset 20.*fromOffset 10"):
                store.commit(epoch, PlannedBatch(3, 4000, (OffsetRange("t", 0, 10, 30),)), Writes())
        with open_store(store_url, other) as b:
            assert b.current_epoch() == 1 and b.load_offsets() == {TopicAndPartition("x", 0): 7}
            assert b.start_epoch() == 2

    def test_newest_entry_layout_tells_an_older_release_from_this_one(self, store_url: str, app_id: str) -> None:
        """What refuses to pack an upgraded app's tasks silently: the encoding of its newest log entry."""
        other = app_id + "-b"
        self.write_v1(store_url, app_id, other)
        before = self.dump(store_url, app_id, other)
        with open_store(store_url, app_id) as store, open_store(store_url, other) as b:
            assert store.newest_entry_layout() == 2 and b.newest_entry_layout() is None
            assert self.dump(store_url, app_id, other) == before  # a read
            epoch = store.start_epoch()  # upgrades the layout; the entries stay as they were written
            assert store.newest_entry_layout() == 2
            store.log_batch(epoch, PlannedBatch(2, 3000, (OffsetRange("t", 0, 15, 20),)))
            assert store.newest_entry_layout() == 3
        with open_store(store_url, app_id + "-fresh") as fresh:
            assert fresh.newest_entry_layout() is None

    # ---------------------------------------------------------------- positions of other sources
    def test_positions_keep_the_source_document(self, store: TransactionalStore) -> None:
        epoch = store.start_epoch()
        b0 = PlannedBatch(0, 1000, (DocRange("a", 0, 10, "fp1"), DocRange("b", 4, 4, "fp2")))
        store.log_batch(epoch, b0)
        assert store.get_batch(0) == b0
        assert store.commit(epoch, b0, Writes().incr("counts", "n")) is APPLIED
        doc = {"a": {"fp": "fp1", "path": "/logs/a"}, "b": {"fp": "fp2", "path": "/logs/b"}}
        assert store.load_positions() == {"doc:a": Position(10, doc["a"]), "doc:b": Position(4, doc["b"])}
        assert store.load_offsets() == {}  # not Kafka positions
        b1 = PlannedBatch(1, 2000, (DocRange("a", 10, 12), DocRange("b", 4, 6, "fp3")))
        assert store.commit(epoch, b1, Writes().incr("counts", "n"), ranges=[b1.ranges[0]],
                            complete_batch=False) is APPLIED
        assert store.commit(epoch, b1, Writes().incr("counts", "n"), ranges=[b1.ranges[1]],
                            complete_batch=False) is APPLIED
        assert store.mark_committed(epoch, b1) is APPLIED
        assert store.load_positions() == {"doc:a": Position(12), "doc:b": Position(6, {"fp": "fp3", "path": "/logs/b"})}
        assert store.commit(epoch, b1, Writes().incr("counts", "n")) is REPLAYED
        with pytest.raises(OffsetConflictError) as info:
            store.commit(epoch, PlannedBatch(2, 3000, (DocRange("a", 5, 9, "x"),)), Writes().incr("counts", "n"))
        assert all(s in str(info.value) for s in ("doc:a", "12", "5", "9"))
        assert store.get_value("counts", "n") == 3

    def test_reset_positions_is_fenced_and_clears_documents(self, store: TransactionalStore) -> None:
        old = store.start_epoch()
        store.commit(old, PlannedBatch(0, 1000, (OffsetRange("t", 0, 0, 10), OffsetRange("t", 1, 0, 5))), Writes())
        store.commit(old, PlannedBatch(1, 2000, (DocRange("a", 0, 7, "fp"),)), Writes())
        new = store.start_epoch()
        before = store.load_positions()
        with pytest.raises(FencedError, match=f"epoch {old}.*{new}"):
            store.reset_positions(old, {"t/0": 3})
        for bad in ({"t/0": -1}, {"": 1}, {"t/0": True}, {"t/0": 2**63}, {7: 1}, [("t/0", 1)]):
            with pytest.raises(ConfigurationError):
                store.reset_positions(new, bad)  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError, match="epoch"):
            store.reset_positions(0, {"t/0": 1})
        assert store.load_positions() == before
        store.reset_positions(new, {"t/0": 3, "doc:a": 2, "new/0": 9})
        assert store.load_positions() == {"t/0": Position(3), "t/1": Position(5), "doc:a": Position(2),
                                          "new/0": Position(9)}
        assert store.commit(new, PlannedBatch(2, 3000, (OffsetRange("t", 0, 3, 8),)), Writes()) is APPLIED
        assert store.load_offsets() == {P0: 8, P1: 5, TopicAndPartition("new", 0): 9}
        store.reset_positions(new, {})  # nothing to do
        assert store.current_epoch() == new

    def test_reset_positions_stores_the_documents_given(self, store: TransactionalStore) -> None:
        epoch = store.start_epoch()
        store.commit(epoch, PlannedBatch(0, 1000, (DocRange("a", 0, 7, "fp"), DocRange("b", 0, 4, "fq"))), Writes())
        before = store.load_positions()
        for bad in ({"doc:zz": {"x": 1}}, {"doc:a": "text"}, {"doc:a": {"x": float("nan")}}, [("doc:a", {})]):
            with pytest.raises(ConfigurationError):
                store.reset_positions(epoch, {"doc:a": 2}, bad)  # type: ignore[arg-type]
        assert store.load_positions() == before
        store.reset_positions(epoch, {"doc:a": 2, "doc:b": 1}, {"doc:a": {"fp": "fp", "path": "/logs/a", "at": 2}})
        assert store.load_positions() == {"doc:a": Position(2, {"fp": "fp", "path": "/logs/a", "at": 2}),
                                          "doc:b": Position(1)}


class TestSQLiteLayout(LayoutContract):
    @pytest.fixture
    def store_url(self, tmp_path: Any) -> str:
        return f"sqlite:///{tmp_path}/sub/dir/store.db?create_dirs=true"  # the first write creates sub/dir

    @staticmethod
    def _path(url: str) -> str:
        return url[len("sqlite:///"):].partition("?")[0]

    def write_v1(self, url: str, a: str, b: str) -> None:
        path = self._path(url)
        os.makedirs(os.path.dirname(path))
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")  # as the previous release left its files
        for ddl in V1_SQL_DDL:
            conn.execute(ddl.format(int="INTEGER", float="REAL", options=""))
        for sql, params in v1_sql_rows(a, b):
            conn.execute(sql, params)
        conn.close()

    def dump(self, url: str, *apps: str) -> Any:
        path = self._path(url)
        folder = os.path.dirname(path)
        # a read-only connection may leave SQLite's own -wal/-shm files; the WAL must hold nothing
        wal = os.path.join(folder, os.path.basename(path) + "-wal")
        assert not os.path.exists(wal) or os.path.getsize(wal) == 0
        with open(path, "rb") as f:
            return f.read(), sorted(n for n in os.listdir(folder) if not n.endswith(("-wal", "-shm")))

    def assert_nothing_created(self, url: str, app_id: str) -> None:
        assert not os.path.exists(os.path.dirname(os.path.dirname(self._path(url))))  # not even sub/

    def test_a_path_no_write_could_create_is_refused_on_open(self, tmp_path: Any, app_id: str) -> None:
        (tmp_path / "plain-file").write_text("x")
        with pytest.raises(ConfigurationError, match="directory .*plain-file/sub does not exist"):
            open_store(f"sqlite:///{tmp_path}/plain-file/sub/store.db", app_id)
        with pytest.raises(StoreUnavailableError, match="plain-file.*not a writable directory"):
            open_store(f"sqlite:///{tmp_path}/plain-file/sub/store.db?create_dirs=true", app_id)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["plain-file"]

    def assert_upgraded(self, url: str, a: str, b: str) -> None:
        with sqlite3.connect(self._path(url)) as conn:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            versions = dict(conn.execute("SELECT app, schema_version FROM deo_meta").fetchall())
            positions = conn.execute(POSITIONS_SQL).fetchall()
        assert "deo_offsets" not in tables and "deo_positions" in tables
        assert versions == {a: SCHEMA_VERSION, b: SCHEMA_VERSION}
        assert positions == [(a, "t/0", 10, None), (a, "t/1", 5, None), (b, "x/0", 7, None)]


class TestPostgresLayout(LayoutContract):
    @pytest.fixture
    def store_url(self, postgres_url: str) -> str:
        return postgres_url

    def write_v1(self, url: str, a: str, b: str) -> None:
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            for ddl in V1_SQL_DDL:
                conn.execute(ddl.format(int="NUMERIC", float="DOUBLE PRECISION", options=" WITH (fillfactor = 50)"))
            for sql, params in v1_sql_rows(a, b):
                conn.execute(sql.replace("?", "%s"), params)

    def _tables(self, conn: Any) -> List[str]:
        return sorted(r[0] for r in conn.execute(
            "SELECT relname FROM pg_class WHERE relname LIKE 'deo%' AND relkind = 'r'").fetchall())

    def dump(self, url: str, *apps: str) -> Any:
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            tables = self._tables(conn)
            return {t: sorted(map(repr, conn.execute(f"SELECT * FROM {t}").fetchall())) for t in tables}

    def assert_nothing_created(self, url: str, app_id: str) -> None:
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            assert self._tables(conn) == []

    def assert_upgraded(self, url: str, a: str, b: str) -> None:
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            tables = self._tables(conn)
            versions = dict(conn.execute("SELECT app, schema_version FROM deo_meta").fetchall())
            positions = conn.execute(POSITIONS_SQL).fetchall()
            options = conn.execute("SELECT reloptions FROM pg_class WHERE relname = 'deo_positions'").fetchone()
        assert "deo_offsets" not in tables and "deo_positions" in tables
        assert versions == {a: SCHEMA_VERSION, b: SCHEMA_VERSION} and options == (["fillfactor=50"],)
        assert positions == [(a, "t/0", 10, None), (a, "t/1", 5, None), (b, "x/0", 7, None)]


class TestRedisLayout(LayoutContract):
    """On a single Redis server and on a Redis Cluster."""

    @pytest.fixture
    def store_url(self, any_redis_url: str) -> str:
        return any_redis_url

    @staticmethod
    def _client(url: str) -> Any:
        return raw_redis_client(url)

    def write_v1(self, url: str, a: str, b: str) -> None:
        ka, kb = "{deo:" + a + "}:", "{deo:" + b + "}:"
        c = self._client(url)
        c.set(ka + "schema", 1)
        c.set(ka + "epoch", 3)
        c.hset(ka + "offsets", mapping={"t/0": 10, "t/1": 5})
        c.zadd(ka + "batches", {V1_ENTRIES[0]: 0, V1_ENTRIES[1]: 1})
        c.zadd(ka + "commits", {"0": 0})
        c.hset(ka + "vi:counts", "n", 1)
        c.hset(ka + "rows:rows", "0/", json.dumps(["r0"]))
        c.sadd(ka + "labels", "L0")
        c.set(kb + "schema", 1)
        c.set(kb + "epoch", 1)
        c.hset(kb + "offsets", "x/0", 7)

    def dump(self, url: str, *apps: str) -> Any:
        c = self._client(url)
        keys = sorted(k for app in apps for k in c.scan_iter(match="{deo:" + app + "}*"))
        return {k: (c.dump(k), c.pttl(k)) for k in keys}

    def assert_nothing_created(self, url: str, app_id: str) -> None:
        assert self.dump(url, app_id) == {}

    def assert_upgraded(self, url: str, a: str, b: str) -> None:
        c = self._client(url)
        assert c.get("{deo:" + a + "}:schema") == str(SCHEMA_VERSION).encode()
        assert c.get("{deo:" + b + "}:schema") == b"1"  # Redis layouts are per application: b upgrades on its write
        assert c.hgetall("{deo:" + a + "}:offsets") == {b"t/0": b"10", b"t/1": b"5"}
