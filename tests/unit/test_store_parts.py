"""The store is composed of small interfaces: each abstract method belongs to one part, every backend
implements every part, and a caller typed against one part works with an object that has only it."""

from __future__ import annotations

import inspect
from typing import Any, Dict, List, Optional

import pytest

from dstream_exactly_once import stores
from dstream_exactly_once.engine._heartbeat import Heartbeat, driver_status
from dstream_exactly_once.errors import ConfigurationError
from dstream_exactly_once.stores import _interfaces as interfaces
from dstream_exactly_once.stores._base import TransactionalStore

PARTS = [interfaces.EpochStore, interfaces.PositionStore, interfaces.BatchLog, interfaces.LogRetention,
         interfaces.CommitStore, interfaces.HeartbeatStore, interfaces.AppDirectory, interfaces.AppRetirement,
         interfaces.ResultReader]
BACKENDS = [stores.SQLiteStore, stores.PostgresStore, stores.RedisStore, stores.RedisClusterStore]


def _declared(cls: type) -> set:
    """The public and ``_…`` transaction methods ``cls`` itself declares (not inherited ones)."""
    return {name for name, value in vars(cls).items()
            if inspect.isfunction(value) and not (name.startswith("__") and name.endswith("__"))}


def test_the_parts_are_disjoint_and_compose_the_store():
    seen: Dict[str, str] = {}
    for part in PARTS:
        for name in _declared(part):
            assert name not in seen, f"{name} is declared by {seen.get(name)} and {part.__name__}"
            seen[name] = part.__name__
    assert set(PARTS) <= set(TransactionalStore.__mro__)
    # the composition adds the lifecycle only; every other abstract method comes from a part
    own_abstract = {n for n in _declared(TransactionalStore) if n in TransactionalStore.__abstractmethods__}
    assert own_abstract == {"close"}
    assert TransactionalStore.__abstractmethods__ - {"close"} <= set(seen)
    for part in PARTS:
        assert part.__doc__ and part.__doc__.strip(), f"{part.__name__} has no docstring"
        assert getattr(stores, part.__name__) is part  # importable from the stores package too


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.__name__)
def test_every_backend_is_every_part(backend):
    assert not inspect.isabstract(backend)
    for part in PARTS:
        assert issubclass(backend, part)


class _HeartbeatOnly(interfaces.HeartbeatStore):
    """A store that has a heartbeat and epochs, and nothing else."""

    url, app_id = "memory://", "hb-only"

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        self.docs: List[str] = []

    def start_epoch(self) -> int:
        self.epoch += 1
        return self.epoch

    def current_epoch(self) -> int:
        return self.epoch

    def _heartbeat(self, epoch: int, doc_json: str) -> None:
        self.docs.append(doc_json)

    def load_heartbeat(self) -> Optional[Dict[str, Any]]:
        import json

        return json.loads(self.docs[-1]) if self.docs else None


def test_the_heartbeat_and_the_live_check_need_only_the_heartbeat_part():
    store = _HeartbeatOnly(epoch=4)
    assert driver_status(store)["heartbeat"] is None
    beat = Heartbeat(store, 4, 10.0, clock=lambda: 1000.0)
    assert beat.beat(7)
    status = driver_status(store, now=1001.0)
    assert status["live"] and status["epoch"] == 4 and status["heartbeat"]["last_batch"] == 7
    store.start_epoch()  # an operator took an epoch: the old driver's heartbeat no longer counts
    assert not driver_status(store, now=1001.0)["live"]


def test_a_part_checks_its_arguments_before_the_backend_transaction():
    store = _HeartbeatOnly(epoch=1)
    with pytest.raises(ConfigurationError, match="heartbeat document must be a mapping, got 'up'"):
        store.heartbeat(1, "up")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="cannot be stored as JSON"):
        store.heartbeat(1, {"t": float("nan")})
    assert store.docs == []
