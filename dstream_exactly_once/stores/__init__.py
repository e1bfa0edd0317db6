"""Transactional stores: offsets, results, the offset/commit log and labels in one transaction.

:func:`open_store` picks the backend from the URL scheme:

- ``sqlite:///path.db`` — :class:`SQLiteStore` (default; one host)
- ``postgresql://…`` / ``postgres://…`` — :class:`PostgresStore`
- ``redis://…`` / ``rediss://…`` — :class:`RedisStore`
"""

from __future__ import annotations

from typing import Any, Dict, Type

from ..errors import ConfigurationError
from .base import SCHEMA_VERSION, CommitOutcome, PlannedBatch, TransactionalStore, Writes
from .postgres import PostgresStore
from .redis import RedisStore
from .sqlite import SQLiteStore
from .url import redact_url, url_scheme, with_options

__all__ = [
    "SCHEMA_VERSION",
    "CommitOutcome",
    "PlannedBatch",
    "PostgresStore",
    "RedisStore",
    "SQLiteStore",
    "TransactionalStore",
    "Writes",
    "open_store",
    "redact_url",
]

_BACKENDS: Dict[str, Type[TransactionalStore]] = {
    "sqlite": SQLiteStore,
    "postgresql": PostgresStore,
    "postgres": PostgresStore,
    "redis": RedisStore,
    "rediss": RedisStore,
}


def open_store(url: str, app_id: str, **options: Any) -> TransactionalStore:
    """Open the store at ``url`` for application ``app_id`` and connect to it now.

    ``options`` (e.g. ``timeout=10`` for SQLite, ``connect_timeout=3`` for PostgreSQL/Redis) are
    merged into the URL's query string, so a store pickled to an executor keeps them. Connecting
    eagerly reports an unknown scheme (:class:`ConfigurationError`), an unreachable server
    (:class:`StoreUnavailableError`), bad credentials (:class:`StoreAuthError`) or a store written
    by a newer version (:class:`StoreVersionError`) before a stream starts.
    """
    if not isinstance(url, str):
        raise ConfigurationError(f"store URL must be a str, got {type(url).__name__}")
    scheme = url_scheme(url)
    backend = _BACKENDS.get(scheme)
    if backend is None:
        raise ConfigurationError(
            f"unsupported store URL scheme {scheme or '(none)'!r} in {redact_url(url)!r}; "
            f"supported schemes: {', '.join(sorted(_BACKENDS))}")
    store = backend(with_options(url, options), app_id)
    return store.connect()
