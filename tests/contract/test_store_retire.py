"""Retiring an application, on every backend (real servers): the inventory lists every kind of state,
``delete_app`` deletes all of it in one fenced transaction and nothing of another app, and a driver
of the retired app still running (a zombie) is refused before it writes anything."""

from __future__ import annotations

import uuid
from typing import Any, Dict, List

import pytest

from dstream_exactly_once.admin import retire_app
from dstream_exactly_once.errors import FencedError
from dstream_exactly_once.kafka._offsets import OffsetRange
from dstream_exactly_once.stores import PlannedBatch, TransactionalStore, Writes, open_store

from .fixtures import ContractFixtures


def _batch(i: int) -> PlannedBatch:
    return PlannedBatch(i, 1000 * (i + 1), (OffsetRange("t", 0, 10 * i, 10 * i + 10), OffsetRange("t", 1, 0, 0)))


def _fill(store: TransactionalStore) -> int:
    """Every kind of state: positions (rows and position log), both logs, values in two namespaces,
    batch rows, labels, an incident record, the heartbeat; returns the epoch."""
    epoch = store.start_epoch()
    for i in range(3):
        b = _batch(i)
        store.log_batch(epoch, b)
        store.commit(epoch, b, Writes().incr("counts", f"k{i}", i + 1).put("docs", "d", {"i": i})
                     .put_batch_rows("rows", [{"i": i}]).add_label(f"label-{i}")
                     .record_incident("skip", i, {"i": i}))
    store.log_batch(epoch, _batch(3))  # pending: in the offset log only
    store.heartbeat(epoch, {"epoch": epoch, "host": "h", "pid": 1, "last_batch": 2, "time": 1.0})
    return epoch


def _counts(rows: List[Dict[str, Any]]) -> Dict[Any, int]:
    return {(r["kind"], r["namespace"]): r["count"] for r in rows}


class RetireContract(ContractFixtures):
    def test_inventory_lists_every_kind_of_state(self, store: TransactionalStore) -> None:
        assert store.app_inventory() == []
        _fill(store)
        counts = _counts(store.app_inventory())
        assert counts[("epoch", None)] == 1
        assert counts[("offset log", None)] == 4 and counts[("commit log", None)] == 3
        assert counts[("values", "counts")] == 3 and counts[("values", "docs")] == 1
        assert counts[("values", "__deo__")] == 3  # the incident records
        assert counts[("batch rows", "rows")] == 3 and counts[("labels", None)] == 3
        assert counts[("heartbeat", None)] == 1
        assert counts.get(("positions", None), 0) + counts.get(("position log", None), 0) >= 1

    def test_delete_app_deletes_all_of_it_and_nothing_of_another_app(self, store: TransactionalStore,
                                                                     store_url: str) -> None:
        other_id = "other-" + uuid.uuid4().hex[:8]
        with open_store(store_url, other_id) as other:
            _fill(other)
            other_before = other.app_inventory()
            epoch = _fill(store)
            inventory = store.app_inventory()
            assert store.delete_app(epoch) == inventory
            assert store.app_inventory() == []
            assert store.app_id not in store.list_apps() and other_id in store.list_apps()
            assert store.current_epoch() == 0 and store.load_positions() == {}
            assert store.last_logged_batch_id() is None and store.last_committed_batch_id() is None
            assert store.get_values("counts") == {} and store.get_batch_rows("rows") == {}
            assert not store.has_label("label-0") and store.load_heartbeat() is None
            assert other.app_inventory() == other_before
            assert other.get_value("counts", "k2") == 3 and other.has_label("label-2")
            assert other.load_heartbeat() is not None and other.last_committed_batch_id() == 2

    def test_a_zombie_driver_of_a_retired_app_writes_nothing(self, store: TransactionalStore, store_url: str,
                                                              app_id: str) -> None:
        zombie_epoch = _fill(store)
        plan = retire_app(store_url, app_id, execute=True, force=True)  # the driver's heartbeat is old
        assert plan.executed and plan.epoch == zombie_epoch + 1 and plan.total > 0
        b3 = _batch(3)
        # the zombie's own connection, and a new one (SQL: the layout set-up path), both refused
        with open_store(store_url, app_id) as fresh:
            for zombie in (store, fresh):
                with pytest.raises(FencedError):
                    zombie.commit(zombie_epoch, b3, Writes().incr("counts", "k0", 100).add_label("zombie"))
                with pytest.raises(FencedError):
                    zombie.log_batch(zombie_epoch, _batch(4))
                with pytest.raises(FencedError):
                    zombie.heartbeat(zombie_epoch, {"epoch": zombie_epoch})
                with pytest.raises(FencedError):
                    zombie.delete_app(zombie_epoch)
            assert fresh.app_inventory() == [] and app_id not in fresh.list_apps()

    def test_delete_app_with_a_stale_epoch_deletes_nothing(self, store: TransactionalStore) -> None:
        old = _fill(store)
        store.start_epoch()  # a driver started after the operator's epoch
        before = store.app_inventory()
        with pytest.raises(FencedError):
            store.delete_app(old)
        assert store.app_inventory() == before

    def test_retire_refuses_an_app_with_nothing_stored(self, store: TransactionalStore, store_url: str) -> None:
        from dstream_exactly_once.errors import ConfigurationError

        with pytest.raises(ConfigurationError, match="has nothing stored"):
            retire_app(store, store.app_id, execute=True)
        assert store.app_inventory() == [] and store.app_id not in store.list_apps()

    def test_retire_refuses_while_the_driver_is_live_unless_forced(self, store: TransactionalStore) -> None:
        import time

        from dstream_exactly_once.errors import DriverLiveError

        epoch = _fill(store)
        store.heartbeat(epoch, {"epoch": epoch, "host": "h", "pid": 1, "time": time.time(), "interval_s": 10})
        before = store.app_inventory()
        with pytest.raises(DriverLiveError, match="live"):
            retire_app(store, store.app_id, execute=True)
        assert store.app_inventory() == before and store.current_epoch() == epoch
        assert retire_app(store, store.app_id).items == tuple(before)  # a dry run lists it and writes nothing
        assert retire_app(store, store.app_id, execute=True, force=True).executed
        assert store.app_inventory() == []


class TestSQLiteRetire(RetireContract):
    @pytest.fixture
    def store_url(self, tmp_path: Any) -> str:
        return f"sqlite:///{tmp_path}/retire.db"

    def test_a_store_in_layout_1_is_inventoried_and_deleted(self, tmp_path: Any) -> None:
        import sqlite3

        path = tmp_path / "v1.db"
        conn = sqlite3.connect(path)
        conn.executescript(
            "CREATE TABLE deo_meta (app TEXT PRIMARY KEY, schema_version INTEGER NOT NULL, epoch BIGINT NOT NULL);"
            "CREATE TABLE deo_offsets (app TEXT, topic TEXT, partition_id INTEGER, next_offset BIGINT, "
            "PRIMARY KEY (app, topic, partition_id));"
            "CREATE TABLE deo_batches (app TEXT, batch_id BIGINT, batch_time_ms BIGINT, ranges TEXT, "
            "PRIMARY KEY (app, batch_id));"
            "CREATE TABLE deo_commits (app TEXT, batch_id BIGINT, epoch BIGINT, PRIMARY KEY (app, batch_id));"
            "CREATE TABLE deo_values (app TEXT, ns TEXT, k TEXT, inum INTEGER, fnum REAL, doc TEXT, "
            "PRIMARY KEY (app, ns, k));"
            "CREATE TABLE deo_batch_rows (app TEXT, ns TEXT, batch_id BIGINT, part TEXT, seq INTEGER, doc TEXT, "
            "PRIMARY KEY (app, ns, batch_id, part, seq));"
            "CREATE TABLE deo_labels (app TEXT, label TEXT, PRIMARY KEY (app, label));"
            "INSERT INTO deo_meta VALUES ('old', 1, 4), ('keep', 1, 2);"
            "INSERT INTO deo_offsets VALUES ('old', 't', 0, 5), ('old', 't', 1, 6), ('keep', 't', 0, 9);")
        conn.commit()
        conn.close()
        with open_store(f"sqlite:///{path}", "old") as old:
            assert _counts(old.app_inventory()) == {("epoch", None): 1, ("positions", None): 2}
            plan = retire_app(old, "old", execute=True)
            assert _counts(list(plan.items))[("positions", None)] == 2  # upgraded, then deleted
            assert old.app_inventory() == [] and old.list_apps() == ["keep"]
        with open_store(f"sqlite:///{path}", "keep") as keep:
            assert {str(k): v for k, v in keep.load_offsets().items()} != {} and keep.current_epoch() == 2


class TestPostgresRetire(RetireContract):
    @pytest.fixture
    def store_url(self, postgres_url: str) -> str:
        return postgres_url


class TestRedisRetire(RetireContract):
    """On a single Redis server and on a Redis Cluster (the app's keys share one slot)."""

    @pytest.fixture
    def store_url(self, any_redis_url: str) -> str:
        return any_redis_url

    def test_no_key_of_the_app_is_left(self, store: TransactionalStore) -> None:
        epoch = _fill(store)
        prefix = "{deo:" + store.app_id + "}:"
        keys = store._call(lambda c: [str(k) for k in c.scan_iter(match=prefix + "*")])  # type: ignore[attr-defined]
        assert len(keys) >= 10
        store.delete_app(epoch)
        assert store._call(lambda c: list(c.scan_iter(match=prefix + "*"))) == []  # type: ignore[attr-defined]
