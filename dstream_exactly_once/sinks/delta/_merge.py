"""Merge-by-key (upsert) batches of the Delta sink: the batch's newest row per key, and the predicate.

Within one batch a key may occur several times (an update after an insert); Delta's merge refuses
two source rows matching one target row, so the batch keeps each key's last row in batch order (the
order of the batch's tasks, then of their records) before the merge.
"""

from __future__ import annotations

from typing import List, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from ...errors import ConfigurationError

__all__ = ["check_merge_keys", "latest_by_key", "merge_predicate"]

_ORDER = "__deo_order"


def check_merge_keys(keys: Sequence[str], schema: pa.Schema, where: str) -> List[str]:
    """``keys`` checked against ``schema`` (each a column, none repeated); the list."""
    out = list(keys)
    missing = [k for k in out if k not in schema.names]
    if missing:
        raise ConfigurationError(f"{where}: merge_keys {missing!r} are not columns of the batch schema "
                                 f"(columns: {', '.join(schema.names)})")
    if len(set(out)) != len(out):
        raise ConfigurationError(f"{where}: merge_keys {out!r} name a column twice")
    return out


def latest_by_key(table: pa.Table, keys: Sequence[str]) -> pa.Table:
    """``table`` with only the last row of each key (rows in their order otherwise)."""
    if table.num_rows == 0:
        return table
    numbered = table.append_column(_ORDER, pa.array(range(table.num_rows), pa.int64()))
    last = numbered.group_by(list(keys), use_threads=False).aggregate([(_ORDER, "max")])
    keep = pc.is_in(numbered[_ORDER], value_set=last[f"{_ORDER}_max"])
    return numbered.filter(keep).drop_columns([_ORDER])


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def merge_predicate(keys: Sequence[str], source: str = "s", target: str = "t") -> str:
    """The merge's match condition: every key equal (a NULL key never matches, as in SQL)."""
    return " AND ".join(f"{target}.{_quoted(k)} = {source}.{_quoted(k)}" for k in keys)
