"""The statements the SQL stores run on every commit, and the cursor adapter they run them through.

:class:`Bulk` is a multi-row ``INSERT`` into one table (one statement per call where the dialect
can); the ``*_VALUE``/``*_POSITION``/... specs are the upserts of ``deo_values``,
``deo_positions``, ``deo_batch_rows`` and ``deo_labels``; :class:`Cursor` speaks ``?``
placeholders whatever the driver's paramstyle.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

__all__ = ["ADD_VALUE", "BATCH_ROWS", "INIT_POSITION", "LABELS", "SET_POSITION", "SET_VALUE", "Bulk", "Counters",
           "Cursor"]


@dataclass(frozen=True)
class Bulk:
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
SET_VALUE = Bulk("deo_values", _VALUE_COLUMNS + (("doc", "text"),),
                   "ON CONFLICT (app, ns, k) DO UPDATE SET inum = excluded.inum, fnum = excluded.fnum, "
                   "doc = excluded.doc")
# An increment is skipped (and the commit refused, see _write_values) when the row holds a JSON
# document or the sum would leave the 64-bit integer range or the finite doubles: SQLite would turn
# an overflowing integer into an inexact REAL (PostgreSQL NUMERIC would grow past what Redis holds),
# so every store keeps one 64-bit contract. The tests are written so that they cannot overflow
# themselves; the float one halves both terms (max double / 2 = 8.988465674311579e307).
ADD_VALUE = Bulk("deo_values", _VALUE_COLUMNS,  # doc stays NULL
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
_POSITION_COLUMNS = (("app", "text"), ("pkey", "text"), ("next_pos", "bigint"), ("meta", "text"))
SET_POSITION = Bulk("deo_positions", _POSITION_COLUMNS,
                      "ON CONFLICT (app, pkey) DO UPDATE SET next_pos = excluded.next_pos, meta = excluded.meta")
INIT_POSITION = Bulk("deo_positions", _POSITION_COLUMNS, "ON CONFLICT (app, pkey) DO NOTHING")
BATCH_ROWS = Bulk("deo_batch_rows", (("app", "text"), ("ns", "text"), ("batch_id", "bigint"), ("part", "text"),
                                       ("seq", "integer"), ("doc", "text")), "")
LABELS = Bulk("deo_labels", (("app", "text"), ("label", "text")), "ON CONFLICT (app, label) DO NOTHING")


class Counters(NamedTuple):
    """The int increments of one namespace, and the same ``{key: amount}`` as JSON text."""

    namespace: str
    amounts: Dict[str, int]
    json: str


class Cursor:
    """A DB-API cursor speaking ``?`` placeholders whatever the driver's paramstyle."""

    def __init__(self, cursor: Any, placeholder: str) -> None:
        self._cur = cursor
        self._ph = placeholder

    def _q(self, sql: str) -> str:
        return sql if self._ph == "?" else sql.replace("?", self._ph)

    def run(self, sql: str, params: Sequence[Any] = ()) -> int:
        self._cur.execute(self._q(sql), tuple(params))
        return int(self._cur.rowcount)

    def raw(self, sql: str, params: Sequence[Any] = ()) -> None:
        """Run ``sql`` already in the driver's paramstyle (user SQL rendered by ``_sql_text.render``)."""
        self._cur.execute(sql, tuple(params))

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
