"""The SQL stores' side of the flat rule of whole-batch commits (see ``stores._commit_rules.decide_flat``).

The marker is a row of the reserved value namespace (``deo_values``, key ``stores._commit_rules.FLAT_KEY``,
a JSON string ``"<epoch>:<batch id>"``): no layout change, and a version of the library without it
never reads it (such a process cannot hold the epoch a marker names: an operator, or a driver, takes
a new one before it writes). A whole-batch commit replaces it; a per-partition commit,
``mark_committed`` and ``reset_positions`` delete it in their own transaction.

The positions of a flat commit go to the position log (``deo_pos_log``, one row per commit: see
``stores._position_log``); :func:`fold` moves them into ``deo_positions`` before any other writer
reads or writes a position row, and :func:`load_positions` reads both in one statement.
"""

from __future__ import annotations

import json
from typing import Any, Dict, FrozenSet, Optional, Tuple

from ...core._ranges import Position
from .. import _commit_rules as rules
from .. import _position_log as plog
from .._writes import RESERVED_NAMESPACE
from ._statements import INIT_POSITION, SET_POSITION

__all__ = ["append", "clear_marker", "commit_state", "fold", "load_positions", "stored_keys", "stored_positions",
           "write_marker"]

_MARKER = "(SELECT v.doc FROM deo_values v WHERE v.app = {app} AND v.ns = ? AND v.k = ?)"
_LOGGED = "(SELECT COUNT(*) FROM deo_pos_log l WHERE l.app = {app})"


def commit_state(store: Any, cur: Any, epoch: int, batch_id: int) -> Tuple[bool, Optional[Tuple[int, int]], int]:
    """In a commit's transaction: the epoch check (locking the app's meta row), whether ``batch_id`` is
    in the commit log, the flat marker and how many entries the position log holds — one statement
    on SQLite, two on PostgreSQL."""
    app, ns, key = store.app_id, RESERVED_NAMESPACE, rules.FLAT_KEY
    if store.lock_meta_sql or not store.json_pairs:
        # A row lock (PostgreSQL) is taken by a statement of its own, and the state is read by the
        # next one: a statement that waited for the lock still reads with the snapshot it started
        # with (READ COMMITTED), so reading in the locking statement would miss the commit of the
        # transaction it waited for, and apply a range twice (tests/integration/test_store_concurrency.py).
        store._check_epoch(cur, epoch)
        row = cur.one("SELECT EXISTS (SELECT 1 FROM deo_commits c WHERE c.app = ? AND c.batch_id = ?), "
                      + _MARKER.format(app="?") + ", " + _LOGGED.format(app="?"),
                      (app, batch_id, app, ns, key, app))
        assert row is not None
        return bool(row[0]), rules.parse_flat_marker(row[1]), int(row[2])
    # SQLite: BEGIN IMMEDIATE already holds the write lock; one statement reads it all
    row = cur.one("SELECT m.epoch, EXISTS (SELECT 1 FROM deo_commits c WHERE c.app = m.app AND c.batch_id = ?), "
                  + _MARKER.format(app="m.app") + ", " + _LOGGED.format(app="m.app")
                  + " FROM deo_meta m WHERE m.app = ?",
                  (batch_id, ns, key, app))
    rules.check_epoch(app, int(row[0]) if row else 0, epoch)
    assert row is not None
    return bool(row[1]), rules.parse_flat_marker(row[2]), int(row[3])


def fold(store: Any, cur: Any) -> None:
    """In a write transaction: the position log folded into the position rows (see ``stores._position_log``)."""
    entries = cur.all("SELECT doc FROM deo_pos_log WHERE app = ? ORDER BY batch_id", (store.app_id,))
    if not entries:
        return
    merged = plog.merge(store.app_id, (str(e[0]) for e in entries))
    store._write_positions(cur, SET_POSITION, plog.rows_of(merged.set_pos, merged.set_doc))
    store._write_positions(cur, INIT_POSITION, plog.rows_of(merged.init_pos, merged.init_doc))
    cur.run("DELETE FROM deo_pos_log WHERE app = ?", (store.app_id,))


def append(store: Any, cur: Any, batch_id: int, entry: str, replace: bool = False) -> None:
    """In a flat commit's transaction: its positions as one position-log entry (``replace``: instead of
    the log's entries, which it supersedes)."""
    if replace:
        cur.run("DELETE FROM deo_pos_log WHERE app = ?", (store.app_id,))
    cur.run("INSERT INTO deo_pos_log (app, batch_id, doc) VALUES (?, ?, ?)", (store.app_id, batch_id, entry))


def stored_keys(store: Any, cur: Any) -> FrozenSet[str]:
    """The stored position keys: of the rows and of the position log's entries."""
    rows = cur.all("SELECT pkey, NULL FROM deo_positions WHERE app = ? UNION ALL "
                   "SELECT NULL, doc FROM deo_pos_log WHERE app = ?", (store.app_id, store.app_id))
    merged = plog.merge(store.app_id, (str(d) for k, d in rows if k is None))
    return frozenset(str(k) for k, _ in rows if k is not None).union(merged.set_pos, merged.init_pos)


def load_positions(store: Any, cur: Any) -> Dict[str, Position]:
    """The stored positions: rows and position log read by one statement (one snapshot), merged."""
    rows = cur.all("SELECT pkey, next_pos, meta FROM deo_positions WHERE app = ? UNION ALL "
                   "SELECT NULL, batch_id, doc FROM deo_pos_log WHERE app = ?", (store.app_id, store.app_id))
    entries = sorted((int(o), str(m)) for k, o, m in rows if k is None)
    positions = dict(rules.stored_position(store.app_id, k, o, m) for k, o, m in rows if k is not None)
    if not entries:
        return positions
    return plog.apply(store.app_id, positions, plog.merge(store.app_id, (e for _, e in entries)))


def stored_positions(store: Any, cur: Any) -> Dict[str, int]:
    """The app's stored positions (for the per-range rule), as one JSON object where the dialect can."""
    if not store.json_pairs:
        rows = cur.all("SELECT pkey, next_pos FROM deo_positions WHERE app = ?", (store.app_id,))
        return {str(k): int(o) for k, o in rows}
    row = cur.one(f"SELECT {store.positions_agg} FROM deo_positions p WHERE p.app = ?", (store.app_id,))
    stored = None if row is None else row[0]
    if isinstance(stored, (str, bytes)):
        stored = json.loads(stored)
    return {str(k): int(o) for k, o in (stored or {}).items()}


def write_marker(store: Any, cur: Any, epoch: int, batch_id: int) -> None:
    cur.run("INSERT INTO deo_values (app, ns, k, inum, fnum, doc) VALUES (?, ?, ?, NULL, NULL, ?) "
            "ON CONFLICT (app, ns, k) DO UPDATE SET inum = NULL, fnum = NULL, doc = excluded.doc",
            (store.app_id, RESERVED_NAMESPACE, rules.FLAT_KEY, json.dumps(rules.flat_marker(epoch, batch_id))))


def clear_marker(store: Any, cur: Any) -> None:
    cur.run("DELETE FROM deo_values WHERE app = ? AND ns = ? AND k = ?",
            (store.app_id, RESERVED_NAMESPACE, rules.FLAT_KEY))
