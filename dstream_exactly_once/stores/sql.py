"""The SQL implementation shared by :class:`SQLiteStore` and :class:`PostgresStore`.

Tables, every row scoped by ``app`` (the application id)::

    deo_meta       (app PK, schema_version, epoch)                  one row per app; commits lock it
    deo_offsets    (app, topic, partition_id, next_offset)          next offset to read
    deo_batches    (app, batch_id, batch_time_ms, ranges)           offset log (ranges as JSON)
    deo_commits    (app, batch_id, epoch)                           commit log
    deo_values     (app, ns, k, inum, fnum, doc)                    incr/put values (int part, float
                                                                    part, or a JSON document)
    deo_batch_rows (app, ns, batch_id, part, seq, doc)              time-keyed rows, replaced per
                                                                    (batch, part); part "" = whole batch
    deo_labels     (app, label)                                     labels applied

Dialects differ only in column types, placeholders, the row lock taken first in every write
transaction (PostgreSQL ``SELECT … FOR UPDATE`` on the app's meta row; SQLite ``BEGIN IMMEDIATE``
locks the whole file) and their error translation. Increments are native upserts
(``ON CONFLICT … DO UPDATE SET inum = inum + excluded.inum``). The rows every commit rewrites —
int increments of one namespace, offsets of one topic — go as one JSON object parameter expanded
by ``json_each`` in a single statement: a 1,000-key commit is one upsert, not 1,000 executions.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from abc import abstractmethod
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple

from ..errors import ConfigurationError, DStreamExactlyOnceError, OffsetConflictError, StoreError, StoreVersionError
from ..offsets import OffsetRange, TopicAndPartition
from . import _plan
from .base import SCHEMA_VERSION, CommitOutcome, PlannedBatch, TransactionalStore, Writes
from .url import redact_url

__all__ = ["SQLStore"]

_DDL = (
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

@dataclass(frozen=True)
class _Bulk:
    """A multi-row ``INSERT`` into one table, run as one statement per call where the dialect can.

    ``columns`` pairs each column with its PostgreSQL type (to cast the fields of a JSON row);
    ``tail`` is the ``ON CONFLICT`` clause, which may refer to the table and to ``excluded``.
    """

    table: str
    columns: Tuple[Tuple[str, str], ...]
    tail: str

    @cached_property
    def row_sql(self) -> str:
        """One row per execution: ``INSERT … VALUES (?, …) <tail>``."""
        names = ", ".join(c for c, _ in self.columns)
        return f"INSERT INTO {self.table} ({names}) VALUES ({', '.join('?' * len(self.columns))}) {self.tail}"

    @cached_property
    def json_sql(self) -> str:
        """All rows at once as one JSON parameter: ``INSERT … SELECT * FROM json_to_recordset(?) AS x(c0 t, …)``.

        One parameter and one statement whatever the row count: the ``json`` module encodes it in
        C, and the server parses it in one pass — much faster than binding thousands of parameters.
        """
        names = ", ".join(c for c, _ in self.columns)
        fields = ", ".join(f"c{i} {t}" for i, (_, t) in enumerate(self.columns))
        return f"INSERT INTO {self.table} ({names}) SELECT * FROM json_to_recordset(?::json) AS x({fields}) {self.tail}"

    def json_param(self, rows: Sequence[Sequence[Any]]) -> str:
        """``rows`` as the JSON array of objects ``{"c0": …, "c1": …}`` that :meth:`json_sql` reads."""
        names = [f"c{i}" for i in range(len(self.columns))]
        return json.dumps([dict(zip(names, row, strict=True)) for row in rows], separators=(",", ":"), allow_nan=False)


_VALUE_COLUMNS = (("app", "text"), ("ns", "text"), ("k", "text"), ("inum", "numeric"), ("fnum", "float8"))
_SET_VALUE = _Bulk("deo_values", _VALUE_COLUMNS + (("doc", "text"),),
                   "ON CONFLICT (app, ns, k) DO UPDATE SET inum = excluded.inum, fnum = excluded.fnum, "
                   "doc = excluded.doc")
# An increment is skipped (and the commit refused, see _write_values) when the row holds a JSON
# document or the sum would leave the 64-bit integer range or the finite doubles: SQLite would turn
# an overflowing integer into an inexact REAL (PostgreSQL NUMERIC would grow past what Redis holds),
# so every store keeps one 64-bit contract. The tests are written so that they cannot overflow
# themselves; the float one halves both terms (max double / 2 = 8.988465674311579e307).
_ADD_VALUE = _Bulk("deo_values", _VALUE_COLUMNS,  # doc stays NULL
                   "ON CONFLICT (app, ns, k) DO UPDATE SET inum = COALESCE(deo_values.inum, 0) + excluded.inum, "
                   "fnum = CASE WHEN deo_values.fnum IS NULL AND excluded.fnum IS NULL THEN NULL "
                   "ELSE COALESCE(deo_values.fnum, 0) + COALESCE(excluded.fnum, 0) END "
                   "WHERE deo_values.doc IS NULL "
                   "AND ((excluded.inum >= 0 "
                   "AND COALESCE(deo_values.inum, 0) <= 9223372036854775807 - excluded.inum) "
                   "OR (excluded.inum < 0 "
                   "AND COALESCE(deo_values.inum, 0) >= -9223372036854775807 - 1 - excluded.inum)) "
                   "AND (excluded.fnum IS NULL "
                   "OR abs(COALESCE(deo_values.fnum, 0) / 2 + excluded.fnum / 2) <= 8.988465674311579e307)")
_OFFSET_COLUMNS = (("app", "text"), ("topic", "text"), ("partition_id", "integer"), ("next_offset", "bigint"))
_SET_OFFSET = _Bulk("deo_offsets", _OFFSET_COLUMNS,
                    "ON CONFLICT (app, topic, partition_id) DO UPDATE SET next_offset = excluded.next_offset")
_INIT_OFFSET = _Bulk("deo_offsets", _OFFSET_COLUMNS, "ON CONFLICT (app, topic, partition_id) DO NOTHING")
_BATCH_ROWS = _Bulk("deo_batch_rows", (("app", "text"), ("ns", "text"), ("batch_id", "bigint"), ("part", "text"),
                                       ("seq", "integer"), ("doc", "text")), "")
_LABELS = _Bulk("deo_labels", (("app", "text"), ("label", "text")), "ON CONFLICT (app, label) DO NOTHING")


class _Counters(NamedTuple):
    """The int increments of one namespace, and the same ``{key: amount}`` as JSON text."""

    namespace: str
    amounts: Dict[str, int]
    json: str


class _Cursor:
    """A DB-API cursor speaking ``?`` placeholders whatever the driver's paramstyle."""

    def __init__(self, cursor: Any, placeholder: str) -> None:
        self._cur = cursor
        self._ph = placeholder

    def _q(self, sql: str) -> str:
        return sql if self._ph == "?" else sql.replace("?", self._ph)

    def run(self, sql: str, params: Sequence[Any] = ()) -> int:
        self._cur.execute(self._q(sql), tuple(params))
        return int(self._cur.rowcount)

    def many(self, sql: str, rows: Sequence[Sequence[Any]]) -> int:
        """Run ``sql`` once per row; returns the total row count."""
        if not rows:
            return 0
        self._cur.executemany(self._q(sql), rows)
        return int(self._cur.rowcount)

    def one(self, sql: str, params: Sequence[Any] = ()) -> Optional[Tuple[Any, ...]]:
        self._cur.execute(self._q(sql), tuple(params))
        row = self._cur.fetchone()
        return None if row is None else tuple(row)

    def all(self, sql: str, params: Sequence[Any] = ()) -> List[Tuple[Any, ...]]:
        self._cur.execute(self._q(sql), tuple(params))
        return [tuple(r) for r in self._cur.fetchall()]


class SQLStore(TransactionalStore):
    """Common SQL logic; subclasses supply connections, dialect details and error translation."""

    int_type = "INTEGER"
    float_type = "REAL"
    placeholder = "?"
    begin_sql = "BEGIN"
    lock_meta_sql = ""  # appended to the meta-row SELECT that opens every write transaction
    json_bulk = False  # multi-row inserts as one statement over a JSON array of rows (PostgreSQL)
    # FROM clause of the (key, value) pairs of a JSON object parameter: counters ({key: int} per
    # namespace) and offsets ({partition: offset} per topic) are then one statement each instead of
    # one per row; "" binds them row by row
    json_pairs = ""
    table_options = ""  # WITH (...) of the tables updated by every commit (deo_values, deo_offsets)

    def __init__(self, url: str, app_id: str) -> None:
        super().__init__(url, app_id)
        pairs = f"FROM {self.json_pairs} WHERE true"  # WHERE: SQLite would read ON CONFLICT as a join clause
        self._counters_sql = (f"INSERT INTO deo_values (app, ns, k, inum, fnum) SELECT ?, ?, key, "
                              f"CAST(value AS {self.int_type}), NULL {pairs} {_ADD_VALUE.tail}")
        offsets = ("INSERT INTO deo_offsets (app, topic, partition_id, next_offset) SELECT ?, ?, "
                   f"CAST(key AS INTEGER), CAST(value AS BIGINT) {pairs} ")
        self._offsets_sql = {_SET_OFFSET: offsets + _SET_OFFSET.tail, _INIT_OFFSET: offsets + _INIT_OFFSET.tail}
        self._lock = threading.RLock()
        self._conn: Any = None
        self._pid = 0

    # ---------------------------------------------------------------- dialect hooks
    @abstractmethod
    def _open_connection(self) -> Any:
        """A new DB-API connection in autocommit mode (transactions are explicit)."""

    @abstractmethod
    def _translate(self, exc: Exception) -> Optional[StoreError]:
        """The library error for a driver/OS exception, or ``None`` if ``exc`` is not one."""

    def _is_broken(self, conn: Any) -> bool:
        """Whether ``conn`` must be replaced after an error."""
        return False

    def _lock_schema(self, cur: _Cursor) -> None:
        """Serialize concurrent schema creation (PostgreSQL); SQLite's BEGIN IMMEDIATE suffices."""

    # ---------------------------------------------------------------- connection + error boundary
    def _cursor(self) -> _Cursor:
        if self._conn is None or self._pid != os.getpid():
            self._conn = None  # a connection inherited through fork() is never reused
            conn = self._open_connection()
            try:
                self._setup(_Cursor(conn.cursor(), self.placeholder))
            except BaseException:
                conn.close()
                raise
            self._conn, self._pid = conn, os.getpid()
        return _Cursor(self._conn.cursor(), self.placeholder)

    @contextmanager
    def _transaction(self, write: bool = True) -> Iterator[_Cursor]:
        """One backend transaction (or one autocommit read); the only place driver errors are translated."""
        with self._lock:
            try:
                cur = self._cursor()
                if write:
                    cur.run(self.begin_sql)
                try:
                    yield cur
                    if write:
                        cur.run("COMMIT")
                except BaseException:
                    if write:
                        self._rollback(cur)
                    raise
            except DStreamExactlyOnceError:
                raise
            except Exception as exc:
                err = self._translate(exc)
                if err is None:
                    raise
                if self._conn is not None and (err.retriable or self._is_broken(self._conn)):
                    self._discard()
                raise err from exc

    def _rollback(self, cur: _Cursor) -> None:
        try:
            cur.run("ROLLBACK")
        except Exception:  # noqa: BLE001 - the connection may be gone; the server rolls back then
            self._discard()

    def _discard(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - closing a broken connection may fail; it is dropped anyway
                pass

    def close(self) -> None:
        with self._lock:
            if self._pid == os.getpid():
                self._discard()
            self._conn = None

    def _setup(self, cur: _Cursor) -> None:
        """Create the tables and this app's meta row; refuse a layout from a newer version."""
        cur.run(self.begin_sql)
        try:
            self._lock_schema(cur)
            for ddl in _DDL:
                cur.run(ddl.format(int=self.int_type, float=self.float_type, options=self.table_options))
            row = cur.one("SELECT MAX(schema_version) FROM deo_meta")
            found = int(row[0]) if row and row[0] is not None else SCHEMA_VERSION
            if found > SCHEMA_VERSION:
                raise StoreVersionError(
                    f"store {redact_url(self.url)} has layout version {found}, newer than version "
                    f"{SCHEMA_VERSION} written by this dstream-exactly-once; upgrade the library")
            cur.run("INSERT INTO deo_meta (app, schema_version, epoch) VALUES (?, ?, 0) ON CONFLICT (app) DO NOTHING",
                    (self.app_id, SCHEMA_VERSION))
            cur.run("COMMIT")
        except BaseException:
            self._rollback_quietly(cur)
            raise

    @staticmethod
    def _rollback_quietly(cur: _Cursor) -> None:
        try:
            cur.run("ROLLBACK")
        except Exception:  # noqa: BLE001 - best effort; the connection is closed by the caller
            pass

    def _bulk(self, cur: _Cursor, spec: _Bulk, rows: Sequence[Sequence[Any]]) -> int:
        """Insert ``rows`` (tuples in ``spec.columns`` order); returns the rows inserted or updated."""
        if not rows:
            return 0
        if self.json_bulk:
            return cur.run(spec.json_sql, (spec.json_param(rows),))
        return cur.many(spec.row_sql, rows)

    # ---------------------------------------------------------------- epochs
    def _check_epoch(self, cur: _Cursor, epoch: int) -> None:
        row = cur.one("SELECT epoch FROM deo_meta WHERE app = ?" + self.lock_meta_sql, (self.app_id,))
        _plan.check_epoch(self.app_id, int(row[0]) if row else 0, epoch)

    def start_epoch(self) -> int:
        with self._transaction() as cur:
            cur.run("UPDATE deo_meta SET epoch = epoch + 1 WHERE app = ?", (self.app_id,))
            row = cur.one("SELECT epoch FROM deo_meta WHERE app = ?", (self.app_id,))
        assert row is not None
        return int(row[0])

    def current_epoch(self) -> int:
        with self._transaction(write=False) as cur:
            row = cur.one("SELECT epoch FROM deo_meta WHERE app = ?", (self.app_id,))
        return int(row[0]) if row else 0

    # ---------------------------------------------------------------- offsets and logs
    def _raw_offsets(self, cur: _Cursor) -> Dict[Tuple[str, int], int]:
        rows = cur.all("SELECT topic, partition_id, next_offset FROM deo_offsets WHERE app = ?", (self.app_id,))
        return {(t, int(p)): int(o) for t, p, o in rows}

    def _offsets(self, cur: _Cursor) -> Dict[TopicAndPartition, int]:
        return {TopicAndPartition(t, p): o for (t, p), o in self._raw_offsets(cur).items()}

    def load_offsets(self) -> Dict[TopicAndPartition, int]:
        with self._transaction(write=False) as cur:
            return self._offsets(cur)

    def log_batch(self, epoch: int, batch: PlannedBatch) -> None:
        epoch, batch = _plan.check_epoch_arg(epoch), _plan.check_batch_arg(batch)
        _plan.commit_ranges(batch, None)
        ranges = json.dumps([r.toTuple() for r in batch.ranges], separators=(",", ":"))
        with self._transaction() as cur:
            self._check_epoch(cur, epoch)
            existing = self._get_batch(cur, batch.batch_id)
            if existing is None:
                cur.run("INSERT INTO deo_batches (app, batch_id, batch_time_ms, ranges) VALUES (?, ?, ?, ?)",
                        (self.app_id, batch.batch_id, batch.batch_time_ms, ranges))
            elif existing != batch:
                raise OffsetConflictError(f"batch {batch.batch_id} is already in the offset log as {existing}; "
                                          f"refusing to log it again as {batch}")

    def _get_batch(self, cur: _Cursor, batch_id: int) -> Optional[PlannedBatch]:
        row = cur.one("SELECT batch_time_ms, ranges FROM deo_batches WHERE app = ? AND batch_id = ?",
                      (self.app_id, batch_id))
        if row is None:
            return None
        ranges = tuple(OffsetRange(t, int(p), int(f), int(u)) for t, p, f, u in json.loads(row[1]))
        return PlannedBatch(batch_id, int(row[0]), ranges)

    def get_batch(self, batch_id: int) -> Optional[PlannedBatch]:
        with self._transaction(write=False) as cur:
            return self._get_batch(cur, batch_id)

    def _max(self, table: str) -> Optional[int]:
        with self._transaction(write=False) as cur:
            row = cur.one(f"SELECT MAX(batch_id) FROM {table} WHERE app = ?", (self.app_id,))
        return None if row is None or row[0] is None else int(row[0])

    def last_logged_batch_id(self) -> Optional[int]:
        return self._max("deo_batches")

    def last_committed_batch_id(self) -> Optional[int]:
        return self._max("deo_commits")

    def _is_committed(self, cur: _Cursor, batch_id: int) -> bool:
        return cur.one("SELECT 1 FROM deo_commits WHERE app = ? AND batch_id = ?", (self.app_id, batch_id)) is not None

    def is_committed(self, batch_id: int) -> bool:
        with self._transaction(write=False) as cur:
            return self._is_committed(cur, batch_id)

    def purge_logs(self, epoch: int, keep: int) -> int:
        epoch, keep = _plan.check_epoch_arg(epoch), _plan.check_keep_arg(keep)
        with self._transaction() as cur:
            self._check_epoch(cur, epoch)
            row = cur.one("SELECT MAX(batch_id) FROM deo_commits WHERE app = ?", (self.app_id,))
            if row is None or row[0] is None or int(row[0]) - keep < 0:
                return 0
            below = int(row[0]) - keep + 1  # drop batch ids < below
            dropped = cur.run("DELETE FROM deo_batches WHERE app = ? AND batch_id < ? AND batch_id IN "
                              "(SELECT batch_id FROM deo_commits WHERE app = ? AND batch_id < ?)",
                              (self.app_id, below, self.app_id, below))
            cur.run("DELETE FROM deo_commits WHERE app = ? AND batch_id < ?", (self.app_id, below))
        return max(dropped, 0)

    # ---------------------------------------------------------------- the transaction
    def commit(
        self,
        epoch: int,
        batch: PlannedBatch,
        writes: Writes,
        *,
        ranges: Optional[Sequence[OffsetRange]] = None,
        complete_batch: bool = True,
    ) -> CommitOutcome:
        epoch, batch = _plan.check_epoch_arg(epoch), _plan.check_batch_arg(batch)
        if not isinstance(writes, Writes):
            raise ConfigurationError(f"writes must be a Writes, got {writes!r}")
        todo, empty = _plan.commit_ranges(batch, ranges)
        sets, adds, counters = self._value_rows(writes)  # raises on bad values before the transaction
        part = _plan.part_name(todo + empty, complete_batch)
        with self._transaction() as cur:
            self._check_epoch(cur, epoch)
            if self._is_committed(cur, batch.batch_id):
                return CommitOutcome.REPLAYED
            if not _plan.decide(batch.batch_id, todo, self._raw_offsets(cur)):
                return CommitOutcome.REPLAYED
            self._write_values(cur, sets, adds, counters)
            for statement, params in writes.statements:
                cur.run(statement, params)
            for ns, rows in writes.batch_rows.items():
                cur.run("DELETE FROM deo_batch_rows WHERE app = ? AND ns = ? AND batch_id = ? AND part = ?",
                        (self.app_id, ns, batch.batch_id, part))
                self._bulk(cur, _BATCH_ROWS, [(self.app_id, ns, batch.batch_id, part, i, row)
                                              for i, row in enumerate(rows)])
            self._bulk(cur, _LABELS, [(self.app_id, label) for label in dict.fromkeys(writes.labels)])
            self._write_offsets(cur, _SET_OFFSET, todo)
            self._write_offsets(cur, _INIT_OFFSET, empty)
            if complete_batch:
                cur.run("INSERT INTO deo_commits (app, batch_id, epoch) VALUES (?, ?, ?)",
                        (self.app_id, batch.batch_id, epoch))
        return CommitOutcome.APPLIED

    def _write_offsets(self, cur: _Cursor, spec: _Bulk, ranges: Sequence[OffsetRange]) -> None:
        """Store each range's untilOffset with ``spec``'s conflict rule: one statement per topic."""
        if not self.json_pairs:
            self._bulk(cur, spec, [(self.app_id, r.topic, r.partition, r.untilOffset) for r in ranges])
            return
        by_topic: Dict[str, Dict[int, int]] = {}
        for r in ranges:
            by_topic.setdefault(r.topic, {})[r.partition] = r.untilOffset
        for topic, offsets in by_topic.items():
            cur.run(self._offsets_sql[spec], (self.app_id, topic, json.dumps(offsets, separators=(",", ":"))))

    def _value_rows(self, writes: Writes) -> Tuple[List[Tuple[Any, ...]], List[Tuple[Any, ...]], List[_Counters]]:
        """``(sets, adds, counters)``: rows for the ``_SET_VALUE`` and ``_ADD_VALUE`` upserts, and the
        int increments of each namespace as one JSON object (see :attr:`json_pairs`)."""
        app = self.app_id
        if not writes.puts:
            ints, floats = _plan.split_increments(writes)
            return [], [(app, ns, key, 0, amount) for ns, key, amount in floats], self._counters(ints)
        sets: List[Tuple[Any, ...]] = []
        adds: List[Tuple[Any, ...]] = []
        by_ns: Dict[str, Dict[str, int]] = {}
        for op in _plan.value_ops(writes):
            if op.op == "set":
                inum, fnum, doc = ((op.value, None, None) if op.kind == "i" else
                                   (0, op.value, None) if op.kind == "f" else (None, None, op.value))
                sets.append((app, op.namespace, op.key, inum, fnum, doc))
            elif op.kind == "i":
                by_ns.setdefault(op.namespace, {})[op.key] = op.value
            else:
                adds.append((app, op.namespace, op.key, 0, op.value))
        return sets, adds, self._counters(by_ns)

    @staticmethod
    def _counters(by_ns: Dict[str, Dict[str, int]]) -> List[_Counters]:
        return [_Counters(ns, amounts, _plan.counters_json(amounts)) for ns, amounts in by_ns.items()]

    def _write_values(self, cur: _Cursor, sets: List[Tuple[Any, ...]], adds: List[Tuple[Any, ...]],
                      counters: List[_Counters]) -> None:
        self._bulk(cur, _SET_VALUE, sets)
        rows, written, expected = list(adds), 0, len(adds)
        for c in counters:
            expected += len(c.amounts)
            if self.json_pairs and "\\u0000" not in c.json:  # NUL in a key: bound row by row (SQLite)
                written += cur.run(self._counters_sql, (self.app_id, c.namespace, c.json))
            else:
                rows += [(self.app_id, c.namespace, key, amount, None) for key, amount in c.amounts.items()]
        written += self._bulk(cur, _ADD_VALUE, rows)
        if written != expected:  # the upsert skips rows holding a JSON document or leaving the 64-bit range
            raise StoreError(f"cannot increment {self._refused_increments(cur, adds, counters)}; nothing was written")

    def _refused_increments(self, cur: _Cursor, adds: List[Tuple[Any, ...]], counters: List[_Counters]) -> str:
        """Which increments the upsert skipped, and why (for the error; the transaction is rolled back).

        Read inside the failed transaction: a key that was incremented there and is now within one
        more increment of the limit is listed too, so the list may be longer, never shorter.
        """
        bad = []
        for ns, k, inc, finc in self._increments(adds, counters):
            row = cur.one("SELECT inum, fnum, doc FROM deo_values WHERE app = ? AND ns = ? AND k = ?",
                          (self.app_id, ns, k))
            if row is None:
                continue
            inum, fnum, doc = row
            if doc is not None:
                bad.append(f"{ns}/{k} (it holds a non-numeric value)")
            elif not _plan.INT64_MIN <= int(inum or 0) + inc <= _plan.INT64_MAX or (
                    finc is not None and abs(float(fnum or 0) / 2 + finc / 2) > sys.float_info.max / 2):
                bad.append(f"{ns}/{k} (it would leave the 64-bit range)")
        return ", ".join(bad) or "some keys (their values changed meanwhile)"

    @staticmethod
    def _increments(adds: List[Tuple[Any, ...]], counters: List[_Counters]) -> Iterator[Tuple[str, str, int, Any]]:
        """``(namespace, key, int amount, float amount or None)`` of every increment of a commit."""
        for _, ns, k, inum, fnum in adds:
            yield ns, k, int(inum), fnum
        for c in counters:
            for k, amount in c.amounts.items():
                yield c.namespace, k, amount, None

    def mark_committed(self, epoch: int, batch: PlannedBatch) -> CommitOutcome:
        epoch, batch = _plan.check_epoch_arg(epoch), _plan.check_batch_arg(batch)
        todo, _ = _plan.commit_ranges(batch, None)
        with self._transaction() as cur:
            self._check_epoch(cur, epoch)
            if self._is_committed(cur, batch.batch_id):
                return CommitOutcome.REPLAYED
            stored = self._raw_offsets(cur)
            for r in todo:
                if stored.get((r.topic, r.partition)) != r.untilOffset:
                    raise _plan.uncommitted_error(batch.batch_id, r, stored.get((r.topic, r.partition)))
            cur.run("INSERT INTO deo_commits (app, batch_id, epoch) VALUES (?, ?, ?)",
                    (self.app_id, batch.batch_id, epoch))
        return CommitOutcome.APPLIED

    # ---------------------------------------------------------------- reading results
    def get_value(self, namespace: str, key: str) -> Any:
        with self._transaction(write=False) as cur:
            row = cur.one("SELECT inum, fnum, doc FROM deo_values WHERE app = ? AND ns = ? AND k = ?",
                          (self.app_id, namespace, key))
        return None if row is None else _plan.decode_value(*row)

    def get_values(self, namespace: str) -> Dict[str, Any]:
        with self._transaction(write=False) as cur:
            rows = cur.all("SELECT k, inum, fnum, doc FROM deo_values WHERE app = ? AND ns = ? ORDER BY k",
                           (self.app_id, namespace))
        return {k: _plan.decode_value(i, f, d) for k, i, f, d in rows}

    def get_batch_rows(self, namespace: str) -> Dict[int, List[Any]]:
        with self._transaction(write=False) as cur:
            rows = cur.all("SELECT batch_id, doc FROM deo_batch_rows WHERE app = ? AND ns = ? "
                           "ORDER BY batch_id, part, seq", (self.app_id, namespace))
        out: Dict[int, List[Any]] = {}
        for batch_id, doc in rows:
            out.setdefault(int(batch_id), []).append(json.loads(doc))
        return out

    def has_label(self, label: str) -> bool:
        with self._transaction(write=False) as cur:
            return cur.one("SELECT 1 FROM deo_labels WHERE app = ? AND label = ?", (self.app_id, label)) is not None
