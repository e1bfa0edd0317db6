"""PostgresStore: offsets and results in PostgreSQL tables (psycopg 3)."""

from __future__ import annotations

import functools
import math
from typing import Any, Optional, Tuple

from ..._redaction import redact_exception_chain
from ...errors import ConfigurationError, StoreAuthError, StoreBusyError, StoreError, StoreUnavailableError
from .._url import LIBPQ_OPTION_VALUES, check_option_values, check_options, float_option, parse_url, redact_url
from .._writes import Writes
from ._statements import Cursor
from ._store import SQLStore

__all__ = ["PostgresStore"]

_AUTH_MARKERS = ("password authentication failed", "no password supplied", "no pg_hba.conf entry")
_UNAVAILABLE_STATES = ("57P01", "57P02", "57P03", "53300")  # shutdown, crash, starting up, too many connections


@functools.lru_cache(maxsize=1)
def libpq_options() -> Tuple[str, ...]:
    """The connection parameters libpq accepts in a URL query (``()`` when psycopg is missing)."""
    try:
        from psycopg import pq
    except ImportError:
        return ()
    return tuple(sorted({o.keyword.decode() for o in pq.Conninfo.get_defaults()} | {"ssl"}))


class PostgresStore(SQLStore):
    """Offsets and results in the ``deo_*`` tables of one PostgreSQL database.

    Unit of atomicity: one :meth:`commit` — a single transaction that first locks the
    application's ``deo_meta`` row (``SELECT … FOR UPDATE``), so commits of one application
    serialize across the driver and every executor while other applications proceed.

    Delivery guarantee: exactly-once for everything written through :meth:`commit`. When the
    connection drops during ``COMMIT`` the outcome is unknown to the client; the caller retries
    and the offset compare-and-set turns an already applied commit into a REPLAYED no-op.

    URL: ``postgresql://user:password@host:port/dbname`` (or ``postgres://``), with any libpq
    parameter in the query (another name is refused, listing libpq's; the values of parameters with
    a fixed set — ``sslmode``, ``target_session_attrs``, … — are checked before connecting);
    ``connect_timeout`` defaults to 5 seconds. ``#``, ``?``, ``/``, ``@`` and ``%`` in a user name or password must be
    percent-encoded (``urllib.parse.quote(password, safe="")``); a URL with them raw is refused.

    Tables: ``deo_values`` and ``deo_positions`` are created ``WITH (fillfactor = 50)``: every
    commit rewrites its counters and positions, and the free space keeps those updates HOT (no new
    index entry per row version). Tables created by an earlier version keep their fill factor; apply
    it with ``ALTER TABLE … SET (fillfactor = 50)`` followed by ``VACUUM FULL`` if wanted.

    Opening and reading never write (no table is created by ``open_store``); the first write
    creates the tables, or upgrades a version-1 layout, in its own transaction under a
    transaction-scoped advisory lock, so concurrent first writers of any application serialize.
    Tables are found through the connection's ``search_path``.
    """

    scheme = "postgresql"
    int_type = "NUMERIC"  # arbitrary-precision integer increments
    float_type = "DOUBLE PRECISION"
    placeholder = "%s"
    lock_meta_sql = " FOR UPDATE"
    positions_agg = "json_object_agg(p.pkey, p.next_pos)"
    json_bulk = True
    json_pairs = "json_each_text(?::json)"
    # every commit rewrites its counters and offsets: free space on each page keeps those updates HOT
    # (no index entry per new row version), so the tables and their indexes stay small
    table_options = " WITH (fillfactor = 50)"

    def __init__(self, url: str, app_id: str) -> None:
        parsed = parse_url(url)  # refuses a password with unencoded reserved characters
        if parsed.scheme not in ("postgresql", "postgres"):
            raise ConfigurationError(f"PostgreSQL store URLs start with postgresql:// or postgres://, "
                                     f"got {redact_url(url)!r}")
        self._parsed = parsed
        allowed = libpq_options()
        if allowed:
            check_options(url, parsed.options(), allowed)
        check_option_values(url, parsed.options(), LIBPQ_OPTION_VALUES)
        self._connect_timeout = max(2, math.ceil(float_option(url, parsed.options(), "connect_timeout", 5.0)))
        self._address = parsed.address(5432)
        self._user = parsed.username
        try:
            from psycopg.conninfo import conninfo_to_dict

            conninfo_to_dict(url)
        except ImportError:
            pass  # reported on first use
        except Exception as exc:  # noqa: BLE001 - psycopg.ProgrammingError: bad libpq parameter
            raise ConfigurationError(f"bad PostgreSQL URL {redact_url(url)!r}: {self._scrub(str(exc))}") from None
        super().__init__(url, app_id)

    def _scrub(self, text: str) -> str:
        return self._parsed.scrub(text)

    tables_sql = ("SELECT c.relname FROM pg_catalog.pg_class c WHERE c.relname IN "
                  "('deo_meta', 'deo_offsets', 'deo_positions', 'deo_pos_log') AND c.relkind IN ('r', 'p') "
                  "AND pg_catalog.pg_table_is_visible(c.oid)")

    def _open_connection(self, write: bool) -> Any:
        try:
            import psycopg
        except ImportError as exc:
            raise ConfigurationError("PostgresStore needs psycopg 3: pip install 'psycopg[binary]'") from exc
        return psycopg.connect(self.url, autocommit=True, connect_timeout=self._connect_timeout,
                               application_name="dstream-exactly-once")

    def _lock_schema(self, cur: Cursor) -> None:
        cur.run("SELECT pg_advisory_xact_lock(hashtext('dstream_exactly_once.schema'))")

    def _check_writes(self, writes: Writes) -> None:
        """PostgreSQL text cannot hold the NUL character: refuse names and SQL parameters carrying it
        (JSON values and rows are stored escaped and keep it)."""
        names = [("namespace", ns) for ns in writes.batch_rows]
        names += [("label", label) for label in writes.labels]
        names += [(what, name) for pair in writes.puts for what, name in zip(("namespace", "key"), pair, strict=True)]
        names += [(what, name) for pair in writes.increments for what, name in zip(("namespace", "key"), pair,
                                                                                   strict=True)]
        names += [("Writes.execute parameter", p) for _, params in writes.statements for p in params
                  if isinstance(p, str)]
        for what, name in names:
            if "\x00" in name:
                raise ConfigurationError(f"{what} {name!r} contains the NUL character, which PostgreSQL text cannot "
                                         f"hold; nothing was written")

    def _transaction_id(self, cur: Cursor) -> Any:
        """The server's id of the open transaction (assigned here if it had none), or ``None`` outside one."""
        from psycopg import pq

        if self._conn is None or self._conn.info.transaction_status != pq.TransactionStatus.INTRANS:
            return None
        row = cur.one("SELECT txid_current_if_assigned()")
        if row is None or row[0] is None:
            row = cur.one("SELECT txid_current()")
        return None if row is None else int(row[0])

    def _is_broken(self, conn: Any) -> bool:
        return bool(conn.closed or conn.broken)

    def _translate(self, exc: Exception) -> Optional[StoreError]:
        import psycopg

        if not isinstance(exc, psycopg.Error):
            return None
        redact_exception_chain(exc)
        state = exc.sqlstate or ""
        text = self._scrub(str(exc).strip().replace("\n", " "))
        if state.startswith("28") or any(m in text for m in _AUTH_MARKERS) or (
                "role" in text and "does not exist" in text):
            return StoreAuthError(f"PostgreSQL at {self._address} refused the credentials of user "
                                  f"{self._user!r}: {text}")
        if "does not exist" in text:  # e.g. the database: retrying cannot help
            return StoreError(f"PostgreSQL at {self._address}: {text}")
        if isinstance(exc, psycopg.OperationalError) and (
                not state or state.startswith("08") or state in _UNAVAILABLE_STATES):
            return StoreUnavailableError(f"PostgreSQL at {self._address} is unavailable: {text}")
        if state in ("40001", "40P01", "55P03"):  # serialization failure, deadlock, lock not available
            return StoreBusyError(f"PostgreSQL at {self._address}: {text}")
        return StoreError(f"PostgreSQL at {self._address}: {text}")
