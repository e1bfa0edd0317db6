"""SQLiteStore: the default store, one local file shared by the driver and the executors of one host."""

from __future__ import annotations

import os
import sqlite3
from typing import Any, Optional
from urllib.parse import quote

from ...errors import ConfigurationError, StoreError, StoreUnavailableError
from .._url import bool_option, check_options, float_option, parse_qsl_dict, redact_url
from ._statements import Cursor
from ._store import SQLStore

__all__ = ["SQLiteStore"]

_OPTIONS = ("timeout", "create_dirs")


def _split_sqlite_url(url: str) -> tuple[str, str]:
    """``(path, query)`` of ``sqlite:///relative.db`` or ``sqlite:////absolute.db``."""
    if not isinstance(url, str) or not url.lower().startswith("sqlite:///"):
        raise ConfigurationError(f"SQLite store URLs look like sqlite:///relative/path.db or "
                                 f"sqlite:////absolute/path.db, got {redact_url(str(url))!r}")
    path, _, query = url[len("sqlite:///"):].partition("?")
    if not path or path == ":memory:":
        raise ConfigurationError(f"SQLite store URL {redact_url(url)!r} needs a file path (an in-memory "
                                 f"database cannot be shared with executors)")
    return path, query


class SQLiteStore(SQLStore):
    """Offsets and results in one SQLite file (stdlib ``sqlite3``, WAL mode).

    Unit of atomicity: one :meth:`commit` — a ``BEGIN IMMEDIATE`` transaction, which takes the
    file's write lock, so commits from the driver and executor processes are serialized (waiting
    up to ``timeout`` seconds, default 30, before :class:`StoreUnavailableError`).

    Delivery guarantee: exactly-once for everything written through :meth:`commit`, as long as all
    writers share the file on one host's local disk (``local[N]`` or a single-host cluster). SQLite
    locking is not reliable on network file systems: use PostgreSQL or Redis across hosts.

    URL: ``sqlite:///relative/path.db`` (resolved against the current directory when the store is
    created, so executors open the same file) or ``sqlite:////absolute/path.db``; option
    ``?timeout=SECONDS``. The file is created by the first write (``start_epoch``, ``commit``, …),
    never by opening or reading: until then reads return empty results. Its directory must exist —
    a path in a missing directory is refused when the store is first read (a mistyped path would
    otherwise start a new, empty application) — unless the URL says ``?create_dirs=true``: then the
    first write creates the missing directories. An existing file is read through a read-only
    connection (which may add SQLite's own ``-wal``/``-shm`` files beside a WAL database, never
    change the database file).

    Counters and offsets are written with SQLite's ``json_each`` (built in since SQLite 3.38,
    and in most earlier builds); without it they are bound row by row, with the same results.
    """

    scheme = "sqlite"

    def __init__(self, url: str, app_id: str) -> None:
        path, query = _split_sqlite_url(url)
        options = parse_qsl_dict(query)
        check_options(url, options, _OPTIONS)
        self.timeout = float_option(url, options, "timeout", 30.0)
        self.create_dirs = bool_option(url, options, "create_dirs", False)
        self.path = os.path.abspath(path)
        super().__init__("sqlite:///" + self.path + (f"?{query}" if query else ""), app_id)

    def _open_connection(self, write: bool) -> Any:
        if not write:
            if not os.path.exists(self.path):
                self._check_creatable()
                return None
            target, uri = "file:" + quote(self.path, safe="/") + "?mode=ro", True
        else:
            if self.create_dirs:
                os.makedirs(os.path.dirname(self.path), exist_ok=True)
            else:
                self._check_directory()
            target, uri = self.path, False
        conn = sqlite3.connect(target, timeout=self.timeout, isolation_level=None, check_same_thread=False,
                               uri=uri)
        try:
            if write:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=FULL")
            try:
                conn.execute("SELECT key FROM json_each('{}')")
            except sqlite3.OperationalError:  # an SQLite built without JSON: counters are bound row by row
                self.json_pairs = ""
        except BaseException:
            conn.close()
            raise
        return conn

    def _check_directory(self) -> None:
        """Refuse a path in a missing directory (without ``create_dirs=true``), naming it."""
        directory = os.path.dirname(self.path)
        if not os.path.isdir(directory):
            raise ConfigurationError(
                f"SQLite store {self.path}: directory {directory} does not exist; check the path (a new path "
                f"starts a new, empty application), create the directory, or add ?create_dirs=true to the store "
                f"URL to let the first write create it")

    def _check_creatable(self) -> None:
        """Refuse a path whose file the first write could not create, without creating anything."""
        if not self.create_dirs:
            self._check_directory()
        parent = os.path.dirname(self.path)
        while not os.path.exists(parent):
            parent = os.path.dirname(parent)
        if not os.path.isdir(parent) or not os.access(parent, os.W_OK | os.X_OK):
            raise StoreUnavailableError(f"cannot create SQLite database {self.path}: {parent} is not a "
                                        f"writable directory")

    begin_sql = "BEGIN IMMEDIATE"
    json_pairs = "json_each(?)"
    tables_sql = ("SELECT name FROM sqlite_master WHERE type = 'table' AND name IN "
                  "('deo_meta', 'deo_offsets', 'deo_positions', 'deo_pos_log')")
    read_only_reads = True

    def _transaction_id(self, cur: Cursor) -> Any:
        """SQLite has one transaction per connection: whether it is still open (``BEGIN`` cannot
        follow an ended one, since user SQL is one statement and ``BEGIN`` is refused)."""
        return True if self._conn is not None and self._conn.in_transaction else None

    def _translate(self, exc: Exception) -> Optional[StoreError]:
        if isinstance(exc, sqlite3.OperationalError):
            # the primary result code (SQLITE_BUSY_SNAPSHOT is a SQLITE_BUSY, ...)
            code = str(getattr(exc, "sqlite_errorname", "")).split("_")[:2]
            if code in (["SQLITE", "BUSY"], ["SQLITE", "LOCKED"]):
                return StoreUnavailableError(f"SQLite database {self.path} stayed locked by another process "
                                             f"for {self.timeout:g}s ({exc})")
            if code in (["SQLITE", "CANTOPEN"], ["SQLITE", "IOERR"]):
                return StoreUnavailableError(f"cannot open SQLite database {self.path}: {exc}")
        if isinstance(exc, sqlite3.Error):
            return StoreError(f"SQLite database {self.path}: {exc}")
        if isinstance(exc, OSError):
            return StoreUnavailableError(f"cannot create the directory of SQLite database {self.path}: {exc}")
        return None
