"""The position log: how a flat whole-batch commit stores its positions without a row per partition.

A whole-batch commit that the flat rule applies (:func:`._commit_rules.decide_flat`) writes the
positions it moves as **one entry** of the app's position log (SQL: a ``deo_pos_log`` row; Redis: a
field of the ``plog`` hash), keyed by its batch id, instead of one position row (hash field) per
partition. An entry is the batch's ranges in the text its offset-log entry holds them
(:meth:`PlannedBatch.ranges_json`: the range kind's encoding of many ranges, made once per batch),
read as a commit applies them:

- a range with data sets its partition's next position to the range's end (stored whatever was
  there), with the range's document (:meth:`SourceRange.position_meta`; none: no document);
- an empty range initialises it: its end and document are stored only for a partition without a
  position.

So a flat commit encodes nothing per partition beyond the offset-log entry it writes anyway.

The stored positions are the position rows, then the entries applied over them in batch order
(:func:`merge` then :func:`apply`). Every writer outside the flat sequence — a per-range
commit, a whole-batch commit the per-range rule decides, a commit that drops positions,
``mark_committed``, ``reset_positions`` — first **folds** the log into the rows (the merged entries
written as rows, the entries deleted) in its own transaction, so it reads and writes rows as if
there were no log; a flat commit folds too once the log holds :data:`FOLD_AT` entries, and a
flat commit that sets every stored position replaces the entries instead (:func:`supersedes`). Folding
changes no stored position, so a crash before, during or after it leaves the same positions.
"""

from __future__ import annotations

import json
from typing import Dict, FrozenSet, Iterable, List, NamedTuple, Optional, Tuple

from ..core._ranges import Position, SourceRange, decode_ranges
from ..errors import StoreError
from ._commit_rules import CommitPlan, meta_json, stored_position

__all__ = ["FOLD_AT", "Merged", "apply", "entry_text", "merge", "supersedes"]

#: A flat commit finding this many entries in the log folds them into the rows first (SQL: and writes
#: its own positions as rows): the log, and what a read merges, stays bounded.
FOLD_AT = 32


class Merged(NamedTuple):
    """Entries merged into one change: next positions and document texts of the keys set (stored
    whatever was there) and of the keys initialised (stored only where no position is)."""

    set_pos: Dict[str, int]
    set_doc: Dict[str, str]
    init_pos: Dict[str, int]
    init_doc: Dict[str, str]


def entry_text(plan: CommitPlan) -> str:
    """The position-log entry of ``plan`` (a whole batch) applied flat: its batch's ranges as the
    offset log holds them, encoded once per batch."""
    return plan.batch.ranges_json()


def supersedes(plan: CommitPlan, known: Optional[FrozenSet[str]]) -> bool:
    """Whether the entry of ``plan`` sets every position stored before it (``known``: the position
    keys stored then, if known): the log's earlier entries then change nothing a reader sees, and
    the entry replaces them (a batch in which every partition moves keeps the log at one entry)."""
    return known is not None and len(plan.moved) >= len(known) and known <= plan.moved


def _changes(app_id: str, text: str) -> Tuple[Dict[str, int], Dict[str, int], Dict[str, str]]:
    """One entry as ``(sets, inits, documents)``; a damaged entry raises :class:`StoreError`."""
    try:
        ranges = decode_ranges(json.loads(text))
    except (TypeError, ValueError, KeyError, IndexError) as exc:
        raise StoreError(f"app {app_id!r}: a position-log entry is damaged ({text!r:.200}): {exc}") from exc
    sets = {r.position_key: r.end for r in ranges if r.end > r.start}
    inits = {r.position_key: r.end for r in ranges if r.end <= r.start}
    docs: Dict[str, str] = {}
    if ranges and type(ranges[0]).position_meta is not SourceRange.position_meta:  # a kind that keeps documents
        docs = {r.position_key: doc for r in ranges if (doc := meta_json(r)) is not None}
    return sets, inits, docs


def merge(app_id: str, entries: Iterable[str]) -> Merged:
    """The entries (texts, in batch order) as one change: the last set of each key wins; an init
    counts only for a key no entry sets or inits before it. A damaged entry raises :class:`StoreError`."""
    out = Merged({}, {}, {}, {})
    set_pos, set_doc, init_pos, init_doc = out
    for text in entries:
        sets, inits, docs = _changes(app_id, text)
        if init_pos:
            for k in init_pos.keys() & sets.keys():
                del init_pos[k]
                init_doc.pop(k, None)
        set_pos.update(sets)
        if set_doc or docs:
            for k in set_doc.keys() & sets.keys():
                del set_doc[k]
            set_doc.update((k, v) for k, v in docs.items() if k in sets)
        for k, pos in inits.items():
            if k not in set_pos and k not in init_pos:
                init_pos[k] = pos
                if k in docs:
                    init_doc[k] = docs[k]
    return out


def rows_of(pos: Dict[str, int], doc: Dict[str, str]) -> List[Tuple[str, int, Optional[str]]]:
    """``(key, next position, document or None)`` rows of one side of a :class:`Merged`."""
    return list(zip(pos, pos.values(), map(doc.get, pos), strict=True))


def apply(app_id: str, positions: Dict[str, Position], merged: Merged) -> Dict[str, Position]:
    """``positions`` (read from the rows) with the merged log applied over them."""
    for k, pos, doc in rows_of(merged.set_pos, merged.set_doc):
        positions[k] = stored_position(app_id, k, pos, doc)[1]
    for k, pos, doc in rows_of(merged.init_pos, merged.init_doc):
        if k not in positions:
            positions[k] = stored_position(app_id, k, pos, doc)[1]
    return positions
