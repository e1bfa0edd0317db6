"""Operator reads and writes of the SQL stores: the driver's heartbeat, the list of applications and
the layout of an application's newest offset-log entry.

Kept apart from ``sql.py`` (the commit protocol). The heartbeat is a JSON document in the reserved
value namespace :data:`~dstream_exactly_once.stores._base.RESERVED_NAMESPACE` (``deo_values``, key
``heartbeat``), so it needs no table of its own and no layout change: it is written in its own
short transaction that checks (and on PostgreSQL row-locks) the app's epoch like a commit, and
touches no position, result or log row.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

from .._base import RESERVED_NAMESPACE

__all__ = ["HEARTBEAT_KEY", "SQLOperatorMixin"]

#: The key of the heartbeat document in the reserved value namespace.
HEARTBEAT_KEY = "heartbeat"


class SQLOperatorMixin:
    """``_heartbeat``, ``load_heartbeat``, ``newest_entry_layout`` and ``list_apps`` for
    :class:`~dstream_exactly_once.stores.sql.SQLStore`."""

    app_id: str

    # provided by SQLStore
    _transaction: Any
    _read: Any
    _check_epoch: Any

    def _heartbeat(self, epoch: int, doc_json: str) -> None:
        with self._transaction() as cur:
            self._check_epoch(cur, epoch)
            cur.run("INSERT INTO deo_values (app, ns, k, inum, fnum, doc) VALUES (?, ?, ?, NULL, NULL, ?) "
                    "ON CONFLICT (app, ns, k) DO UPDATE SET inum = NULL, fnum = NULL, doc = excluded.doc",
                    (self.app_id, RESERVED_NAMESPACE, HEARTBEAT_KEY, doc_json))

    def load_heartbeat(self) -> Optional[Dict[str, Any]]:
        with self._read() as (cur, _):
            row = None if cur is None else cur.one("SELECT doc FROM deo_values WHERE app = ? AND ns = ? AND k = ?",
                                                   (self.app_id, RESERVED_NAMESPACE, HEARTBEAT_KEY))
        if row is None or row[0] is None:
            return None
        doc = json.loads(row[0])
        return doc if isinstance(doc, dict) else None

    def newest_entry_layout(self) -> Optional[int]:
        """See :meth:`~dstream_exactly_once.stores.BatchLog.newest_entry_layout`."""
        with self._read() as (cur, _):
            row = None if cur is None else cur.one("SELECT ranges FROM deo_batches WHERE app = ? "
                                                   "ORDER BY batch_id DESC LIMIT 1", (self.app_id,))
        if row is None or row[0] is None:
            return None
        return 2 if isinstance(json.loads(row[0]), list) else 3

    def list_apps(self) -> List[str]:
        with self._read() as (cur, _):
            rows = [] if cur is None else cur.all("SELECT app FROM deo_meta ORDER BY app")
        return [str(r[0]) for r in rows]
