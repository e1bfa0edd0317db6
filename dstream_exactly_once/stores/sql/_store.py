"""The SQL implementation shared by :class:`SQLiteStore` and :class:`PostgresStore`.

The tables, their layout versions and the upgrade from version 1 are in ``_schema``. Reads
never write: they find the layout first (a database without it reads as empty, one of version 1
is read as it is) and the first write transaction creates or upgrades it.

Dialects differ only in column types, placeholders, the row lock taken first in every write
transaction (PostgreSQL ``SELECT … FOR UPDATE`` on the app's meta row; SQLite ``BEGIN IMMEDIATE``
locks the whole file), how they open a connection (SQLite reads through a read-only one, or none
while the file does not exist) and their error translation. Increments are native upserts
(``ON CONFLICT … DO UPDATE SET inum = inum + excluded.inum``). The rows every commit rewrites —
int increments of one namespace, the positions — go as one JSON parameter expanded by
``json_each``/``json_to_recordset`` in a single statement: a 1,000-key commit is one upsert, not
1,000 executions.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from abc import abstractmethod
from contextlib import contextmanager
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

from ...core._ranges import Position, SourceRange
from ...errors import DStreamExactlyOnceError, StoreError
from .. import _commit_rules as rules
from .. import _position_log as plog
from .. import _value_codec as codec
from .._base import RESERVED_NAMESPACE, SCHEMA_VERSION, CommitOutcome, PlannedBatch, TransactionalStore, Writes
from .._sql_text import parse_sql, render
from . import _flat as flat
from ._operators import SQLOperatorMixin
from ._retire import SQLRetireMixin
from ._schema import ABSENT, ensure_layout, read_layout
from ._statements import (
    ADD_VALUE,
    BATCH_ROWS,
    INIT_POSITION,
    LABELS,
    SET_POSITION,
    SET_VALUE,
    Bulk,
    Counters,
    Cursor,
)

__all__ = ["SQLStore"]


class SQLStore(SQLOperatorMixin, SQLRetireMixin, TransactionalStore):
    """Common SQL logic; subclasses supply connections, dialect details and error translation."""

    int_type = "INTEGER"
    float_type = "REAL"
    placeholder = "?"
    begin_sql = "BEGIN"
    lock_meta_sql = ""  # appended to the meta-row SELECT that opens every write transaction
    positions_agg = "json_group_object(p.pkey, p.next_pos)"  # the app's positions as one JSON object
    json_bulk = False  # multi-row inserts as one statement over a JSON array of rows (PostgreSQL)
    # FROM clause of the (key, value) pairs of a JSON object parameter: counters ({key: int} per
    # namespace) are then one statement each instead of one per row, and the positions one
    # statement over a JSON array of rows; "" binds them row by row
    json_pairs = ""
    table_options = ""  # WITH (...) of the tables updated by every commit (deo_values, deo_positions)
    tables_sql = ""  # which of _schema.MARKERS exist (no parameters)
    read_only_reads = False  # reads open a read-only connection, replaced by a read-write one to write

    def __init__(self, url: str, app_id: str) -> None:
        super().__init__(url, app_id)
        pairs = f"FROM {self.json_pairs} WHERE true"  # WHERE: SQLite would read ON CONFLICT as a join clause
        self._counters_sql = (f"INSERT INTO deo_values (app, ns, k, inum, fnum) SELECT ?, ?, key, "
                              f"CAST(value AS {self.int_type}), NULL {pairs} {ADD_VALUE.tail}")
        positions = ("INSERT INTO deo_positions (app, pkey, next_pos, meta) SELECT ?, json_extract(value, '$[0]'), "
                     f"json_extract(value, '$[1]'), json_extract(value, '$[2]') {pairs} ")
        self._positions_sql = {spec: positions + spec.tail for spec in (SET_POSITION, INIT_POSITION)}
        # positions without documents (Kafka's): one JSON object {key: next position}, like the counters
        bare = (f"INSERT INTO deo_positions (app, pkey, next_pos, meta) SELECT ?, key, CAST(value AS BIGINT), NULL "
                f"{pairs} ")
        self._bare_positions_sql = {spec: bare + spec.tail for spec in (SET_POSITION, INIT_POSITION)}
        self._lock = threading.RLock()
        self._conn: Any = None
        self._pid = 0
        self._writable = False
        self._layout: Optional[int] = None  # SCHEMA_VERSION once seen or made on this connection
        self._ready = False  # this connection created/checked the layout and this app's meta row
        self._flat = rules.FlatMemo()  # position keys known after this instance's last whole-batch commit

    # ---------------------------------------------------------------- dialect hooks
    @abstractmethod
    def _open_connection(self, write: bool) -> Any:
        """A new DB-API connection in autocommit mode (transactions are explicit), or ``None`` when
        ``write`` is false and there is nothing to read (an SQLite file that does not exist)."""

    @abstractmethod
    def _translate(self, exc: Exception) -> Optional[StoreError]:
        """The library error for a driver/OS exception, or ``None`` if ``exc`` is not one."""

    def _is_broken(self, conn: Any) -> bool:
        """Whether ``conn`` must be replaced after an error."""
        return False

    def _lock_schema(self, cur: Cursor) -> None:
        """Serialize concurrent schema creation (PostgreSQL); SQLite's BEGIN IMMEDIATE suffices."""

    @abstractmethod
    def _transaction_id(self, cur: Cursor) -> Any:
        """In a write transaction: what identifies it (compared before and after user statements);
        ``None`` when the connection is not inside a transaction."""

    # ---------------------------------------------------------------- connection + error boundary
    def _connection(self, write: bool) -> Any:
        if self._pid != os.getpid():
            self._conn, self._layout, self._ready = None, None, False  # inherited through fork(): never reused
        if self._conn is not None and (self._writable or not write):
            return self._conn
        self._discard()
        conn = self._open_connection(write)
        if conn is not None:
            self._conn, self._pid, self._writable = conn, os.getpid(), write or not self.read_only_reads
        return conn

    @contextmanager
    def _boundary(self) -> Iterator[None]:
        """The only place driver errors are translated (under the store's lock)."""
        with self._lock:
            try:
                yield
            except DStreamExactlyOnceError:
                raise
            except Exception as exc:
                err = self._translate(exc)
                if err is None:
                    raise
                if self._conn is not None and (err.retriable or self._is_broken(self._conn)):
                    self._discard()
                raise err from exc

    @contextmanager
    def _transaction(self) -> Iterator[Cursor]:
        """One write transaction. The first one of a connection creates or upgrades the layout in it
        (a write that fails leaves no layout behind either)."""
        with self._boundary():
            cur = Cursor(self._connection(True).cursor(), self.placeholder)
            cur.run(self.begin_sql)
            try:
                if not self._ready:
                    self._setup(cur)
                yield cur
                cur.run("COMMIT")
            except BaseException:
                self._rollback(cur)
                raise
            self._layout, self._ready = SCHEMA_VERSION, True

    @contextmanager
    def _read(self) -> Iterator[Tuple[Optional[Cursor], int]]:
        """``(cursor, layout version)`` for autocommit reads; ``(None, ABSENT)`` while the store has no
        layout (read as empty). Never writes."""
        with self._boundary():
            conn = self._connection(False)
            if conn is None:
                yield None, ABSENT
                return
            cur = Cursor(conn.cursor(), self.placeholder)
            layout = self._layout
            if layout != SCHEMA_VERSION:
                layout = read_layout(cur, self.tables_sql, self.url)
                self._layout = SCHEMA_VERSION if layout == SCHEMA_VERSION else None
            yield (None if layout == ABSENT else cur), layout

    def _rollback(self, cur: Cursor) -> None:
        try:
            cur.run("ROLLBACK")
        except Exception:  # noqa: BLE001 - the connection may be gone; the server rolls back then
            self._discard()

    def _discard(self) -> None:
        conn, self._conn, self._layout, self._ready = self._conn, None, None, False
        if conn is not None:
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - closing a broken connection may fail; it is dropped anyway
                pass

    def close(self) -> None:
        with self._lock:
            if self._pid == os.getpid():
                self._discard()
            self._conn, self._layout, self._ready = None, None, False

    def _setup(self, cur: Cursor) -> None:
        """In a write transaction: create or upgrade the layout, and this app's meta row."""
        self._lock_schema(cur)
        ensure_layout(cur, read_layout(cur, self.tables_sql, self.url), int_type=self.int_type,
                      float_type=self.float_type, table_options=self.table_options)
        cur.run("INSERT INTO deo_meta (app, schema_version, epoch) VALUES (?, ?, 0) ON CONFLICT (app) DO NOTHING",
                (self.app_id, SCHEMA_VERSION))

    def _bulk(self, cur: Cursor, spec: Bulk, rows: Sequence[Sequence[Any]]) -> int:
        """Insert ``rows`` (tuples in ``spec.columns`` order); returns the rows inserted or updated."""
        if not rows:
            return 0
        if self.json_bulk:
            return cur.run(spec.json_sql, (spec.json_param(rows),))
        return cur.many(spec.row_sql, rows)

    # ---------------------------------------------------------------- epochs
    def _check_epoch(self, cur: Cursor, epoch: int) -> None:
        row = cur.one("SELECT epoch FROM deo_meta WHERE app = ?" + self.lock_meta_sql, (self.app_id,))
        rules.check_epoch(self.app_id, int(row[0]) if row else 0, epoch)

    def start_epoch(self) -> int:
        with self._transaction() as cur:
            cur.run("UPDATE deo_meta SET epoch = epoch + 1 WHERE app = ?", (self.app_id,))
            row = cur.one("SELECT epoch FROM deo_meta WHERE app = ?", (self.app_id,))
        assert row is not None
        return int(row[0])

    def current_epoch(self) -> int:
        with self._read() as (cur, _):
            row = None if cur is None else cur.one("SELECT epoch FROM deo_meta WHERE app = ?", (self.app_id,))
        return int(row[0]) if row else 0

    # ---------------------------------------------------------------- positions and logs
    def _stored_positions(self, cur: Cursor) -> Dict[str, int]:
        rows = cur.all("SELECT pkey, next_pos FROM deo_positions WHERE app = ?", (self.app_id,))
        return {str(k): int(o) for k, o in rows}

    def load_positions(self) -> Dict[str, Position]:
        with self._read() as (cur, layout):
            if cur is None:
                return {}
            if layout == 1:  # not upgraded yet: Kafka offsets, no documents
                rows = cur.all("SELECT topic, partition_id, next_offset FROM deo_offsets WHERE app = ?",
                               (self.app_id,))
                return {f"{t}/{p}": Position(int(o)) for t, p, o in rows}
            if layout == SCHEMA_VERSION:
                return flat.load_positions(self, cur)
            rows = cur.all("SELECT pkey, next_pos, meta FROM deo_positions WHERE app = ?", (self.app_id,))
        return dict(rules.stored_position(self.app_id, k, o, m) for k, o, m in rows)

    def _reset_positions(self, epoch: int, positions: Dict[str, int], documents: Dict[str, str]) -> None:
        with self._transaction() as cur:
            self._check_epoch(cur, epoch)
            flat.fold(self, cur)
            self._write_positions(cur, SET_POSITION, [(key, pos, documents.get(key)) for key, pos in positions.items()])
            flat.clear_marker(self, cur)  # positions moved outside the whole-batch sequence

    def _log_batch(self, epoch: int, batch: PlannedBatch) -> None:
        with self._transaction() as cur:
            self._check_epoch(cur, epoch)
            self._write_log_entry(cur, batch)

    def _write_log_entry(self, cur: Cursor, batch: PlannedBatch) -> None:
        """Insert ``batch``'s offset-log entry; an identical one is kept, another one is a conflict."""
        if cur.run("INSERT INTO deo_batches (app, batch_id, batch_time_ms, ranges) VALUES (?, ?, ?, ?) "
                   "ON CONFLICT (app, batch_id) DO NOTHING",
                   (self.app_id, batch.batch_id, batch.batch_time_ms, batch.ranges_json())) != 1:
            existing = self._get_batch(cur, batch.batch_id)
            if existing != batch:
                raise rules.logged_conflict_error(batch, existing)  # type: ignore[arg-type]

    def _get_batch(self, cur: Cursor, batch_id: int) -> Optional[PlannedBatch]:
        row = cur.one("SELECT batch_time_ms, ranges FROM deo_batches WHERE app = ? AND batch_id = ?",
                      (self.app_id, batch_id))
        return None if row is None else PlannedBatch(batch_id, int(row[0]), PlannedBatch.ranges_from_json(row[1]))

    def get_batch(self, batch_id: int) -> Optional[PlannedBatch]:
        with self._read() as (cur, _):
            return None if cur is None else self._get_batch(cur, batch_id)

    def _max(self, table: str) -> Optional[int]:
        with self._read() as (cur, _):
            row = None if cur is None else cur.one(f"SELECT MAX(batch_id) FROM {table} WHERE app = ?", (self.app_id,))
        return None if row is None or row[0] is None else int(row[0])

    def last_logged_batch_id(self) -> Optional[int]:
        return self._max("deo_batches")

    def last_committed_batch_id(self) -> Optional[int]:
        return self._max("deo_commits")

    def _is_committed(self, cur: Cursor, batch_id: int) -> bool:
        return cur.one("SELECT 1 FROM deo_commits WHERE app = ? AND batch_id = ?", (self.app_id, batch_id)) is not None

    def is_committed(self, batch_id: int) -> bool:
        with self._read() as (cur, _):
            return cur is not None and self._is_committed(cur, batch_id)

    def _purge_logs(self, epoch: int, keep: int) -> int:
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
    def _commit(self, plan: rules.CommitPlan) -> CommitOutcome:
        batch, writes = plan.batch, plan.writes
        sets, adds, counters = self._value_rows(writes)  # raises on bad values before the transaction
        statements = [(render(parse_sql(sql), self.placeholder), params) for sql, params in writes.statements]
        memo: Any = None
        try:
            with self._transaction() as cur:
                committed, marker, logged = flat.commit_state(self, cur, plan.epoch, batch.batch_id)
                if committed:
                    return CommitOutcome.REPLAYED
                empty, known = plan.empty, self._flat.known_before(marker)
                is_flat = plan.whole and rules.decide_flat(self.app_id, batch.batch_id, plan.epoch, marker)
                if is_flat and known is None:  # another instance committed before: learn the stored keys once
                    known = flat.stored_keys(self, cur)
                replace = bool(logged) and is_flat and plog.supersedes(plan, known)
                into_log = is_flat and not writes.dropped_positions and (logged < plog.FOLD_AT or replace)
                if logged and not into_log:  # rows are read or written: the position log goes into them first
                    flat.fold(self, cur)
                if is_flat:
                    empty = self._flat.empties_to_store(marker, empty)
                else:
                    stored = flat.stored_positions(self, cur)
                    if not rules.decide(batch.batch_id, plan.todo, stored):
                        return CommitOutcome.REPLAYED
                    known = frozenset(stored)
                self._apply(cur, plan, statements, sets, adds, counters, empty, into_log, replace)
                if plan.whole:
                    flat.write_marker(self, cur, plan.epoch, batch.batch_id)
                    memo = self._flat.after(plan, known)
                elif marker is not None:
                    flat.clear_marker(self, cur)
        finally:  # the memo holds only what a finished transaction left
            self._flat.marker, self._flat.keys = memo if memo is not None else (None, None)
        return CommitOutcome.APPLIED

    def _apply(self, cur: Cursor, plan: rules.CommitPlan, statements: List[Tuple[str, Tuple[Any, ...]]],
               sets: List[Tuple[Any, ...]], adds: List[Tuple[Any, ...]], counters: List[Counters],
               empty: Sequence[SourceRange], into_log: bool = False, replace: bool = False) -> None:
        """The writes of an applied commit (``empty``: the empty ranges whose position may be absent;
        ``into_log``: the positions go to the position log, as one entry; ``replace``: that entry
        replaces the log's entries)."""
        batch, writes = plan.batch, plan.writes
        if statements:  # first: a statement that ended the transaction finds nothing of the commit's in it
            self._run_user_statements(cur, batch, statements)
        self._write_values(cur, sets, adds, counters)
        for ns, rows in writes.batch_rows.items():
            cur.run("DELETE FROM deo_batch_rows WHERE app = ? AND ns = ? AND batch_id = ? AND part = ?",
                    (self.app_id, ns, batch.batch_id, plan.part))
            self._bulk(cur, BATCH_ROWS, [(self.app_id, ns, batch.batch_id, plan.part, i, row)
                                          for i, row in enumerate(rows)])
        self._bulk(cur, LABELS, [(self.app_id, label) for label in dict.fromkeys(writes.labels)])
        if into_log:
            flat.append(self, cur, batch.batch_id, plog.entry_text(plan), replace)
        else:
            self._write_positions(cur, SET_POSITION, self._position_rows(plan, plan.todo))
            self._write_positions(cur, INIT_POSITION, self._position_rows(plan, empty))
        for key in writes.dropped_positions:
            cur.run("DELETE FROM deo_positions WHERE app = ? AND pkey = ?", (self.app_id, key))
        if plan.log_entry:
            self._write_log_entry(cur, batch)
        if plan.complete_batch:
            cur.run("INSERT INTO deo_commits (app, batch_id, epoch) VALUES (?, ?, ?)",
                    (self.app_id, batch.batch_id, plan.epoch))

    def _run_user_statements(self, cur: Cursor, batch: PlannedBatch,
                             statements: List[Tuple[str, Tuple[Any, ...]]]) -> None:
        """Run the rendered statements of :meth:`Writes.execute` inside a savepoint, then check that the
        commit's transaction is still the one opened for it: a statement that ended it fails the commit
        instead of leaving part of it applied. A statement the database refuses for good (not a
        deadlock or a lost server) is reported with the batch and the command that skips it."""
        opened = self._transaction_id(cur)
        cur.run("SAVEPOINT deo_user_sql")
        for sql, params in statements:
            try:
                cur.raw(sql, params)
            except Exception as exc:
                err = self._translate(exc)
                if err is None or err.retriable or (self._conn is not None and self._is_broken(self._conn)):
                    raise
                raise StoreError(f"{err}; in the SQL of Writes.execute {sql!r:.300}. "
                                 f"{self._user_sql_way_out(batch)}") from exc
        after = self._transaction_id(cur)
        ended = after is None or after != opened
        if not ended:
            try:
                cur.run("RELEASE SAVEPOINT deo_user_sql")
            except Exception as exc:
                err = self._translate(exc)
                if err is None or err.retriable:
                    raise
                ended = True  # the statements released or rolled back the savepoint
        if ended:
            raise StoreError(f"the SQL of Writes.execute ended the store's transaction or its savepoint; nothing of "
                             f"the commit is kept (statements {[s for s, _ in statements]!r:.300}). "
                             f"{self._user_sql_way_out(batch)}")

    def _user_sql_way_out(self, batch: PlannedBatch) -> str:
        ranges = ", ".join(str(r) for r in batch.ranges[:10]) + (" …" if len(batch.ranges) > 10 else "")
        return (f"Batch {batch.batch_id} (ranges {ranges}) is not committed and fails again on every replay until "
                f"the SQL is fixed; to go on without this batch's output: dstream-eo batches skip --store "
                f"{self.display_url} --app {self.app_id} --batch {batch.batch_id}")

    @staticmethod
    def _position_rows(plan: rules.CommitPlan, ranges: Sequence[SourceRange]) -> List[Tuple[str, int, Optional[str]]]:
        metas = plan.metas
        return [(r.position_key, r.end, metas.get(r.position_key)) for r in ranges]

    def _write_positions(self, cur: Cursor, spec: Bulk, rows: Sequence[Tuple[str, int, Optional[str]]]) -> None:
        """Store ``(key, next position, document JSON)`` rows with ``spec``'s conflict rule, in one
        statement where the dialect can (PostgreSQL ``json_to_recordset``, SQLite ``json_each``)."""
        if not rows:
            return
        if self.json_pairs and all(meta is None for _, _, meta in rows):
            bare = json.dumps({key: pos for key, pos, _ in rows}, ensure_ascii=False, separators=(",", ":"))
            if "\\u0000" not in bare:  # NUL in a key: bound row by row below (SQLite's JSON stops at it)
                cur.run(self._bare_positions_sql[spec], (self.app_id, bare))
                return
        if self.json_bulk or not self.json_pairs:
            self._bulk(cur, spec, [(self.app_id, *row) for row in rows])
            return
        param = json.dumps(rows, separators=(",", ":"))
        if "\\u0000" in param:  # NUL in a key or document: bound row by row (SQLite's JSON stops at it)
            cur.many(spec.row_sql, [(self.app_id, *row) for row in rows])
        else:
            cur.run(self._positions_sql[spec], (self.app_id, param))

    def _value_rows(self, writes: Writes) -> Tuple[List[Tuple[Any, ...]], List[Tuple[Any, ...]], List[Counters]]:
        """``(sets, adds, counters)``: rows for the ``SET_VALUE`` and ``ADD_VALUE`` upserts, and the
        int increments of each namespace as one JSON object (see :attr:`json_pairs`)."""
        app = self.app_id
        if not writes.puts:
            ints, floats = codec.split_increments(writes)
            return [], [(app, ns, key, 0, amount) for ns, key, amount in floats], self._counters(ints)
        sets: List[Tuple[Any, ...]] = []
        adds: List[Tuple[Any, ...]] = []
        by_ns: Dict[str, Dict[str, int]] = {}
        for op in codec.value_ops(writes):
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
    def _counters(by_ns: Dict[str, Dict[str, int]]) -> List[Counters]:
        return [Counters(ns, amounts, codec.counters_json(amounts)) for ns, amounts in by_ns.items()]

    def _write_values(self, cur: Cursor, sets: List[Tuple[Any, ...]], adds: List[Tuple[Any, ...]],
                      counters: List[Counters]) -> None:
        self._bulk(cur, SET_VALUE, sets)
        rows, written, expected = list(adds), 0, len(adds)
        for c in counters:
            expected += len(c.amounts)
            if self.json_pairs and "\\u0000" not in c.json:  # NUL in a key: bound row by row (SQLite)
                written += cur.run(self._counters_sql, (self.app_id, c.namespace, c.json))
            else:
                rows += [(self.app_id, c.namespace, key, amount, None) for key, amount in c.amounts.items()]
        written += self._bulk(cur, ADD_VALUE, rows)
        if written != expected:  # the upsert skips rows holding a JSON document or leaving the 64-bit range
            raise StoreError(f"cannot increment {self._refused_increments(cur, adds, counters)}; nothing was written")

    def _refused_increments(self, cur: Cursor, adds: List[Tuple[Any, ...]], counters: List[Counters]) -> str:
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
            elif not codec.INT64_MIN <= int(inum or 0) + inc <= codec.INT64_MAX or (
                    finc is not None and abs(float(fnum or 0) / 2 + finc / 2) > sys.float_info.max / 2):
                bad.append(f"{ns}/{k} (it would leave the 64-bit range)")
        return ", ".join(bad) or "some keys (their values changed meanwhile)"

    @staticmethod
    def _increments(adds: List[Tuple[Any, ...]], counters: List[Counters]) -> Iterator[Tuple[str, str, int, Any]]:
        """``(namespace, key, int amount, float amount or None)`` of every increment of a commit."""
        for _, ns, k, inum, fnum in adds:
            yield ns, k, int(inum), fnum
        for c in counters:
            for k, amount in c.amounts.items():
                yield c.namespace, k, amount, None

    def _mark_committed(self, epoch: int, batch: PlannedBatch, todo: List[SourceRange],
                        drop: Sequence[str] = ()) -> CommitOutcome:
        with self._transaction() as cur:
            self._check_epoch(cur, epoch)
            if self._is_committed(cur, batch.batch_id):
                return CommitOutcome.REPLAYED
            flat.fold(self, cur)
            stored = self._stored_positions(cur)
            for r in todo:
                if stored.get(r.position_key) != r.end:
                    raise rules.uncommitted_error(batch.batch_id, r, stored.get(r.position_key))
            for key in drop:
                cur.run("DELETE FROM deo_positions WHERE app = ? AND pkey = ?", (self.app_id, key))
            flat.clear_marker(self, cur)  # positions moved outside the whole-batch sequence
            cur.run("INSERT INTO deo_commits (app, batch_id, epoch) VALUES (?, ?, ?)",
                    (self.app_id, batch.batch_id, epoch))
        return CommitOutcome.APPLIED

    # ---------------------------------------------------------------- reading results
    def get_value(self, namespace: str, key: str) -> Any:
        with self._read() as (cur, _):
            row = None if cur is None else cur.one(
                "SELECT inum, fnum, doc FROM deo_values WHERE app = ? AND ns = ? AND k = ?",
                (self.app_id, namespace, key))
        return None if row is None else codec.decode_value(*row)

    def get_values(self, namespace: str) -> Dict[str, Any]:
        with self._read() as (cur, _):
            rows = cur.all("SELECT k, inum, fnum, doc FROM deo_values WHERE app = ? AND ns = ? ORDER BY k",
                           (self.app_id, namespace)) if cur else []
        return {k: codec.decode_value(i, f, d) for k, i, f, d in rows
                if not (namespace == RESERVED_NAMESPACE and k == rules.FLAT_KEY)}  # the commit marker is no value

    def get_batch_rows(self, namespace: str) -> Dict[int, List[Any]]:
        with self._read() as (cur, _):
            rows = cur.all("SELECT batch_id, doc FROM deo_batch_rows WHERE app = ? AND ns = ? "
                           "ORDER BY batch_id, part, seq", (self.app_id, namespace)) if cur else []
        out: Dict[int, List[Any]] = {}
        for batch_id, doc in rows:
            out.setdefault(int(batch_id), []).append(json.loads(doc))
        return out

    def has_label(self, label: str) -> bool:
        with self._read() as (cur, _):
            return cur is not None and cur.one("SELECT 1 FROM deo_labels WHERE app = ? AND label = ?",
                                               (self.app_id, label)) is not None
