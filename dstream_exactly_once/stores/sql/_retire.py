"""Retiring an application of a SQL store: its inventory, and deleting all of it in one transaction.

Every table of the layout has the application in its key (``app``), so an application's state is
exactly its rows in ``deo_meta`` (epoch), ``deo_positions``, ``deo_pos_log``, ``deo_batches``,
``deo_commits``, ``deo_values`` (the reserved namespace holds the heartbeat and the commit marker
besides incident records), ``deo_batch_rows`` and ``deo_labels``. The deletion runs in one write
transaction that first checks (and on PostgreSQL row-locks) the app's epoch, as a commit does; a
commit of the app waiting on that lock then finds no epoch and is refused.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from .._base import SCHEMA_VERSION
from .._commit_rules import FLAT_KEY
from .._interfaces import inventory_row, sorted_inventory
from .._writes import RESERVED_NAMESPACE
from ._operators import HEARTBEAT_KEY
from ._statements import Cursor

__all__ = ["SQLRetireMixin"]

#: The tables holding one application's rows, and the inventory kind each counts as (values and batch
#: rows are counted per namespace).
_COUNTED = (("deo_positions", "positions"), ("deo_pos_log", "position log"), ("deo_batches", "offset log"),
            ("deo_commits", "commit log"), ("deo_labels", "labels"))
_TABLES = ("deo_meta", "deo_positions", "deo_pos_log", "deo_batches", "deo_commits", "deo_values",
           "deo_batch_rows", "deo_labels")


class SQLRetireMixin:
    """``app_inventory`` and ``_delete_app`` for :class:`~dstream_exactly_once.stores.sql.SQLStore`."""

    app_id: str

    # provided by SQLStore
    _transaction: Any
    _read: Any
    _check_epoch: Any

    def _inventory(self, cur: Cursor, layout: int) -> List[Dict[str, Any]]:
        """The app's rows per kind, read with ``cur`` (a store in layout ``layout``)."""
        app = (self.app_id,)
        rows: List[Dict[str, Any]] = []
        if cur.one("SELECT 1 FROM deo_meta WHERE app = ?", app) is not None:
            rows.append(inventory_row("epoch", None, 1))
        counted = list(_COUNTED)
        if layout == 1:  # not upgraded yet: Kafka offsets in deo_offsets, no position log
            counted[0] = ("deo_offsets", "positions")
        if layout < 3:
            counted = [c for c in counted if c[0] != "deo_pos_log"]
        for table, what in counted:
            row = cur.one(f"SELECT COUNT(*) FROM {table} WHERE app = ?", app)  # noqa: S608 - a fixed table name
            rows.append(inventory_row(what, None, int(row[0]) if row else 0))
        for ns, key, n in cur.all("SELECT ns, CASE WHEN ns = ? AND k IN (?, ?) THEN k END AS special, COUNT(*) "
                                  "FROM deo_values WHERE app = ? GROUP BY ns, special",
                                  (RESERVED_NAMESPACE, HEARTBEAT_KEY, FLAT_KEY, self.app_id)):
            kind: Optional[str] = {HEARTBEAT_KEY: "heartbeat", FLAT_KEY: "commit marker"}.get(key) if key else None
            rows.append(inventory_row(kind or "values", None if kind else str(ns), int(n)))
        for ns, n in cur.all("SELECT ns, COUNT(*) FROM (SELECT DISTINCT ns, batch_id, part FROM deo_batch_rows "
                             "WHERE app = ?) AS entries GROUP BY ns", app):
            rows.append(inventory_row("batch rows", str(ns), int(n)))
        return sorted_inventory(rows)

    def app_inventory(self) -> List[Dict[str, Any]]:
        with self._read() as (cur, layout):
            return [] if cur is None else self._inventory(cur, layout)

    def _delete_app(self, epoch: int) -> List[Dict[str, Any]]:
        with self._transaction() as cur:  # the layout is the current one here (upgraded by the transaction)
            self._check_epoch(cur, epoch)
            deleted = self._inventory(cur, SCHEMA_VERSION)
            for table in _TABLES:
                cur.run(f"DELETE FROM {table} WHERE app = ?", (self.app_id,))  # noqa: S608 - a fixed table name
        return deleted
