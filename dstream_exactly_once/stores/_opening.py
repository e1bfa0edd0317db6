"""The store a stream was given, opened when it is a URL (used by the engine's committer)."""

from __future__ import annotations

from ..errors import ConfigurationError
from . import open_store
from ._base import TransactionalStore

__all__ = ["store_or_open"]


def store_or_open(store: object, app_id: object) -> TransactionalStore:
    """The store a stream was given: a URL is opened with ``app_id`` (:func:`open_store`; read-only
    until a driver takes its epoch), an opened store is taken as it is (``app_id``, when given, must be
    its own)."""
    if isinstance(store, str):
        return open_store(store, app_id)  # type: ignore[arg-type]  # checked there
    if isinstance(store, TransactionalStore):
        if app_id is not None and app_id != store.app_id:
            raise ConfigurationError(f"app_id {app_id!r} differs from the opened store's app_id {store.app_id!r}")
        return store
    raise ConfigurationError(f"store must be a store URL (sqlite:///…, postgresql://…, redis://…) or a "
                             f"TransactionalStore, got {store!r}")
