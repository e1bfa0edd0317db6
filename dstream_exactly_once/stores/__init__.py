"""Transactional stores: offsets, results, the offset/commit log and labels in one transaction.

:func:`open_store` picks the backend from the URL scheme:

- ``sqlite:///path.db`` — :class:`SQLiteStore` (default; one host)
- ``postgresql://…`` / ``postgres://…`` — :class:`PostgresStore`
- ``redis://…`` / ``rediss://…`` — :class:`RedisStore`
- ``redis+cluster://…`` / ``rediss+cluster://…`` — :class:`RedisClusterStore` (Redis Cluster)

Every backend is a :class:`TransactionalStore`, composed of the small interfaces of
``_interfaces.py`` (:class:`EpochStore`, :class:`PositionStore`, :class:`BatchLog`,
:class:`LogRetention`, :class:`CommitStore`, :class:`HeartbeatStore`, :class:`AppDirectory`,
:class:`AppRetirement`, :class:`ResultReader`): code that needs one job of a store types against that part.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, Mapping, Tuple, Type

from ..errors import ConfigurationError
from ._app_id import APP_ID_PATTERN, check_app_id
from ._base import SCHEMA_VERSION, CommitOutcome, PlannedBatch, TransactionalStore, Writes
from ._interfaces import (
    AppDirectory,
    AppRetirement,
    BatchLog,
    CommitStore,
    EpochStore,
    HeartbeatStore,
    LogRetention,
    PositionStore,
    ResultReader,
)
from ._url import SECRET_OPTIONS, check_server_url, redact_url, unknown_options_error, url_scheme, with_options
from ._writes import RESERVED_NAMESPACE
from .redis._cluster import RedisClusterStore
from .redis._store import _OPTIONS as _REDIS_OPTIONS
from .redis._store import RedisStore
from .sql._postgres import PostgresStore, libpq_options
from .sql._sqlite import _OPTIONS as _SQLITE_OPTIONS
from .sql._sqlite import SQLiteStore

__all__ = [
    "APP_ID_PATTERN",
    "RESERVED_NAMESPACE",
    "SCHEMA_VERSION",
    "AppDirectory",
    "AppRetirement",
    "BatchLog",
    "CommitOutcome",
    "CommitStore",
    "EpochStore",
    "HeartbeatStore",
    "LogRetention",
    "PlannedBatch",
    "PositionStore",
    "PostgresStore",
    "RedisClusterStore",
    "RedisStore",
    "ResultReader",
    "SQLiteStore",
    "TransactionalStore",
    "Writes",
    "check_app_id",
    "check_store_url",
    "open_store",
    "redact_url",
    "store_schemes",
]

#: the options each backend understands (PostgreSQL: libpq's connection parameters)
_ALLOWED_OPTIONS: Dict[Type[TransactionalStore], Callable[[], Tuple[str, ...]]] = {
    SQLiteStore: lambda: _SQLITE_OPTIONS,
    PostgresStore: libpq_options,
    RedisStore: lambda: _REDIS_OPTIONS,
    RedisClusterStore: lambda: _REDIS_OPTIONS,
}

_BACKENDS: Dict[str, Type[TransactionalStore]] = {
    "sqlite": SQLiteStore,
    "postgresql": PostgresStore,
    "postgres": PostgresStore,
    "redis": RedisStore,
    "rediss": RedisStore,
    "redis+cluster": RedisClusterStore,
    "rediss+cluster": RedisClusterStore,
}


def store_schemes() -> Tuple[str, ...]:
    """The URL schemes :func:`open_store` accepts, sorted (``sqlite``, ``postgresql``, ``redis+cluster`` …):
    the one list every option taking a store URL is checked against."""
    return tuple(sorted(_BACKENDS))


def open_store(url: str, app_id: str, **options: Any) -> TransactionalStore:
    """Open the store at ``url`` for application ``app_id`` and connect to it now.

    URL forms: ``sqlite:///relative/path.db``, ``sqlite:////absolute/path.db``,
    ``postgresql://user:password@host:port/dbname`` (or ``postgres://``),
    ``redis://[user:password@]host[:port][/db]`` (or ``rediss://`` for TLS),
    ``redis+cluster://[user:password@]host:port[,host:port…]`` (or ``rediss+cluster://``). A ``#``, ``?``, ``/``,
    ``@`` or ``%`` in a user name or password must be percent-encoded
    (``urllib.parse.quote(password, safe="")``); a URL with them raw is refused, never guessed at.

    ``app_id`` follows one rule in every store: 1 to 200 characters of ``A-Z a-z 0-9 . _ : -``
    (:data:`APP_ID_PATTERN`, :func:`check_app_id`).

    ``options`` (e.g. ``timeout=10`` for SQLite, ``connect_timeout=3`` for PostgreSQL/Redis) are
    merged into the URL's query string, overriding items of the same name, so a store pickled to an
    executor keeps them; an option the backend does not know is refused, naming it and the allowed
    ones. Connecting eagerly reports an unknown scheme (:class:`ConfigurationError`), an unreachable
    server (:class:`StoreUnavailableError`), bad credentials (:class:`StoreAuthError`) or a store
    written by a newer version (:class:`StoreVersionError`) before a stream starts. No error, ``repr``
    or log line shows a password.
    """
    backend = _backend(url, app_id)
    _check_options(url_scheme(url), _ALLOWED_OPTIONS[backend](), options)
    store = backend(with_options(url, options), app_id)
    return store.connect()


def _backend(url: str, app_id: str) -> Type[TransactionalStore]:
    """The backend class of ``url`` after the checks that need no backend: the URL's type and scheme,
    ``app_id``, and a server URL's form (before options are merged: a message shows it as written)."""
    if not isinstance(url, str):
        raise ConfigurationError(f"store URL must be a str, got {type(url).__name__}")
    scheme = url_scheme(url)
    backend = _BACKENDS.get(scheme)
    if backend is None:
        raise ConfigurationError(
            f"unsupported store URL scheme {scheme or '(none)'!r} in {redact_url(url)!r}; "
            f"supported schemes: {', '.join(store_schemes())}")
    check_app_id(app_id)
    if backend is not SQLiteStore:
        check_server_url(url)
    return backend


def check_store_url(url: str, app_id: str) -> None:
    """Everything :func:`open_store` checks before it connects — scheme, application id, the URL's form
    and its options' names and values, and for SQLite that the file exists or could be created — without
    connecting or writing anything. Raises :class:`ConfigurationError` naming what is wrong (never a
    password)."""
    store = _backend(url, app_id)(url, app_id)
    if isinstance(store, SQLiteStore) and not os.path.exists(store.path):
        store._check_creatable()


def _check_options(scheme: str, allowed: Tuple[str, ...], options: Mapping[str, Any]) -> None:
    """Refuse an option ``scheme`` stores do not know, or whose value is not a str or a number."""
    unknown = sorted(set(options) - set(allowed)) if allowed else []
    if unknown:
        raise unknown_options_error(unknown, allowed, f"for {scheme}:// stores")
    for name, value in options.items():
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            shown = "***" if name.lower() in SECRET_OPTIONS else repr(value)
            raise ConfigurationError(f"store option {name} must be a str or a number, got {shown}")
