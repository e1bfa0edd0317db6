"""The operator part of the :class:`TransactionalStore` contract, on every backend (real servers):
the driver's heartbeat (epoch-checked, apart from commits) and the list of applications."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from dstream_exactly_once.errors import ConfigurationError, FencedError
from dstream_exactly_once.kafka._offsets import OffsetRange
from dstream_exactly_once.stores import CommitOutcome, PlannedBatch, TransactionalStore, Writes, open_store

from .fixtures import ContractFixtures

B0 = PlannedBatch(0, 1000, (OffsetRange("t", 0, 0, 10),))


class OperatorContract(ContractFixtures):
    def test_no_heartbeat_before_one_is_written(self, store: TransactionalStore) -> None:
        assert store.load_heartbeat() is None

    def test_heartbeat_round_trip_and_replace(self, store: TransactionalStore, store_url: str, app_id: str) -> None:
        epoch = store.start_epoch()
        store.heartbeat(epoch, {"epoch": epoch, "host": "h1", "pid": 12, "last_batch": None, "time": 1.5})
        store.heartbeat(epoch, {"epoch": epoch, "host": "h1", "pid": 12, "last_batch": 3, "time": 2.5})
        with open_store(store_url, app_id) as other:
            assert other.load_heartbeat() == {"epoch": epoch, "host": "h1", "pid": 12, "last_batch": 3, "time": 2.5}

    def test_fenced_heartbeat_is_refused_and_writes_nothing(self, store: TransactionalStore) -> None:
        old = store.start_epoch()
        store.heartbeat(old, {"pid": 1})
        store.start_epoch()
        with pytest.raises(FencedError, match="fenced"):
            store.heartbeat(old, {"pid": 2})
        assert store.load_heartbeat() == {"pid": 1}

    def test_heartbeat_needs_a_json_object(self, store: TransactionalStore) -> None:
        epoch = store.start_epoch()
        with pytest.raises(ConfigurationError, match="mapping"):
            store.heartbeat(epoch, ["x"])  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError, match="JSON"):
            store.heartbeat(epoch, {"x": float("nan")})
        assert store.load_heartbeat() is None

    def test_heartbeat_does_not_touch_commits(self, store: TransactionalStore) -> None:
        epoch = store.start_epoch()
        store.log_batch(epoch, B0)
        store.heartbeat(epoch, {"last_batch": 0})
        assert store.commit(epoch, B0, Writes().incr("c", "n", 10)) is CommitOutcome.APPLIED
        store.heartbeat(epoch, {"last_batch": 0, "after": True})
        assert store.load_offsets() == {OffsetRange("t", 0, 0, 10).topicPartition(): 10}
        assert store.get_value("c", "n") == 10
        assert store.last_committed_batch_id() == 0 and store.pending_batches() == []
        assert store.load_heartbeat() == {"last_batch": 0, "after": True}

    def test_list_apps_lists_every_app_with_state(self, store: TransactionalStore, store_url: str,
                                                  app_id: str) -> None:
        other_id = "other-" + uuid.uuid4().hex[:8]
        assert app_id not in store.list_apps()
        store.start_epoch()
        with open_store(store_url, other_id) as other:
            other.start_epoch()
            apps = other.list_apps()
        assert {app_id, other_id} <= set(apps)
        assert apps == sorted(apps)


class TestSQLiteOperators(OperatorContract):
    @pytest.fixture
    def store_url(self, tmp_path: Any) -> str:
        return f"sqlite:///{tmp_path}/ops.db"

    def test_list_apps_of_a_missing_file_is_empty(self, tmp_path: Any) -> None:
        with open_store(f"sqlite:///{tmp_path}/none.db", "x") as s:
            assert s.list_apps() == [] and s.load_heartbeat() is None
        assert not (tmp_path / "none.db").exists()


class TestPostgresOperators(OperatorContract):
    @pytest.fixture
    def store_url(self, postgres_url: str) -> str:
        return postgres_url


class TestRedisOperators(OperatorContract):
    """On a single Redis server and on a Redis Cluster (``list_apps`` scans every master)."""

    @pytest.fixture
    def store_url(self, any_redis_url: str) -> str:
        return any_redis_url
