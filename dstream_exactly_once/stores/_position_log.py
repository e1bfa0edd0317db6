"""The position log: how a flat whole-batch commit stores its positions without a row per partition.

A whole-batch commit that the flat rule applies (:func:`._commit_rules.decide_flat`) writes the
positions it moves as **one entry** of the app's position log (SQL: a ``deo_pos_log`` row; Redis: a
field of the ``plog`` hash), keyed by its batch id, instead of one position row (hash field) per
partition. An entry is the JSON array ``[set keys, set positions, init keys, init positions,
documents]``:

- set keys and positions — the position keys of the commit's non-empty ranges and their next
  positions, in two arrays of one length (stored whatever was there);
- init keys and positions — likewise for its empty ranges whose position may be absent (stored only
  for a partition without a position, as an empty range's commit does);
- ``documents`` — ``{position key: JSON text}`` of those with a document
  (:meth:`SourceRange.position_meta`); a set key without one has no document.

Keys and positions go as two arrays rather than one ``{key: position}`` object because Python's
``json`` encodes a list of strings and a list of ints three times faster than the same dict.

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
from operator import attrgetter
from typing import Dict, FrozenSet, Iterable, List, NamedTuple, Optional, Sequence, Tuple

from ..core.ranges import Position, SourceRange
from ..errors import StoreError
from ._commit_rules import CommitPlan, stored_position

__all__ = ["FOLD_AT", "Merged", "apply", "entry_json", "merge"]

#: A flat commit finding this many entries in the log folds them into the rows first (SQL: and writes
#: its own positions as rows): the log, and what a read merges, stays bounded.
FOLD_AT = 32

_KEY, _END = attrgetter("position_key"), attrgetter("end")

class Merged(NamedTuple):
    """Entries merged into one change: next positions and document texts of the keys set (stored
    whatever was there) and of the keys initialised (stored only where no position is)."""

    set_pos: Dict[str, int]
    set_doc: Dict[str, str]
    init_pos: Dict[str, int]
    init_doc: Dict[str, str]


def entry_json(plan: CommitPlan, empty: Sequence[SourceRange]) -> str:
    """The position-log entry of ``plan`` applied flat; ``empty``: its empty ranges whose position
    may be absent."""
    docs = plan.metas
    if docs and len(empty) != len(plan.empty):
        left_out = set(map(_KEY, plan.empty)).difference(map(_KEY, empty))
        docs = {k: v for k, v in docs.items() if k not in left_out}
    return json.dumps([list(map(_KEY, plan.todo)), list(map(_END, plan.todo)), list(map(_KEY, empty)),
                       list(map(_END, empty)), docs], separators=(",", ":"))


def supersedes(plan: CommitPlan, known: Optional[FrozenSet[str]]) -> bool:
    """Whether the entry of ``plan`` sets every position stored before it (``known``: the position
    keys stored then, if known): the log's earlier entries then change nothing a reader sees, and
    the entry replaces them (a batch in which every partition moves keeps the log at one entry)."""
    return known is not None and len(plan.todo) >= len(known) and known.issubset(map(_KEY, plan.todo))


def merge(app_id: str, entries: Iterable[str]) -> Merged:
    """The entries (JSON texts, in batch order) as one change: the last set of each key wins; an init
    counts only for a key no entry sets or inits before it. A damaged entry raises :class:`StoreError`."""
    out = Merged({}, {}, {}, {})
    set_pos, set_doc, init_pos, init_doc = out
    for text in entries:
        try:
            set_keys, set_ends, init_keys, init_ends, docs = json.loads(text)
            sets = dict(zip(set_keys, set_ends, strict=True))
            inits = dict(zip(init_keys, init_ends, strict=True))
            docs = dict(docs)
        except (TypeError, ValueError) as exc:
            raise StoreError(f"app {app_id!r}: a position-log entry is damaged ({text!r:.200}): {exc}") from exc
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
