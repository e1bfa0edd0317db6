"""How ``dstream-eo`` prints: aligned tables, JSON documents and times (UTC)."""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone
from typing import Any, Iterable, Mapping, Optional, Sequence, TextIO

__all__ = ["emit_json", "fmt_time", "print_table", "unit_column"]


def fmt_time(epoch_s: Optional[float]) -> str:
    """``epoch_s`` as ``YYYY-MM-DD HH:MM:SSZ``; ``-`` for None, the number itself when no date holds it."""
    if epoch_s is None:
        return "-"
    try:
        return datetime.fromtimestamp(epoch_s, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")
    except (OverflowError, OSError, ValueError):  # a time no calendar date holds: shown as the number
        return f"{epoch_s}s"


def print_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str], out: Optional[TextIO] = None) -> None:
    """A plain aligned table (``-`` for missing values) on ``out`` (default: the current stdout)."""
    out = sys.stdout if out is None else out
    if not rows:
        out.write("(none)\n")
        return
    cells = [[("-" if r.get(c) is None else str(r.get(c))) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    out.write("  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip() + "\n")
    for row in cells:
        out.write("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() + "\n")


def emit_json(doc: Any, out: Optional[TextIO] = None) -> None:
    """``doc`` as indented JSON with sorted keys on ``out`` (default: the current stdout)."""
    out = sys.stdout if out is None else out
    out.write(json.dumps(doc, indent=2, sort_keys=True, default=str) + "\n")


def unit_column(units: Iterable[str], plural: bool = False) -> str:
    """The column name of positions counted in ``units`` (the range kinds' ``position_unit``: Kafka
    ``offset``, files ``byte``): the unit when all rows share one, else ``position``."""
    found = set(units)
    name = found.pop() if len(found) == 1 else "position"
    return name + "s" if plural else name
