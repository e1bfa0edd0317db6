"""The decision every store takes on a commit, whatever the backend: which ranges a commit covers,
the epoch check and the position compare-and-set, with their messages.

Argument checks are :mod:`._commit_args`'s; how values are encoded is :mod:`._value_codec`'s.

Every backend runs the same decisions (``core.fencing.check_epoch``, ``decide``) inside its own transaction;
Redis mirrors them in Lua, so the messages built here are shared by all three. Nothing here knows a
source: ranges are :class:`~dstream_exactly_once.core._ranges.SourceRange` values, named by their
``position_key`` and compared by ``start``/``end``.
"""

from __future__ import annotations

import json
import operator
from itertools import compress
from operator import attrgetter
from typing import Any, Dict, FrozenSet, Iterable, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from ..core._fencing import check_epoch as check_epoch  # the backends call it as rules.check_epoch
from ..core._ranges import Position, SourceRange
from ..errors import ConfigurationError, OffsetConflictError, StoreError
from ._commit_args import check_batch_arg, check_epoch_arg, check_writes_arg
from ._writes import PlannedBatch, Writes

_KEY, _START, _END = attrgetter("position_key"), attrgetter("start"), attrgetter("end")


def stored_position(app_id: str, key: Any, offset: Any, meta: Any) -> Tuple[str, Position]:
    """One position as a backend read it (``meta``: JSON text or None); a damaged one (a non-int
    position, a document that is not JSON) raises :class:`StoreError` naming the app and key."""
    try:
        return str(key), Position(int(offset), None if meta is None else json.loads(meta))
    except (TypeError, ValueError) as exc:
        raise StoreError(f"app {app_id!r}: the stored position {key!r} is damaged (position {offset!r}, document "
                         f"{meta!r}): {exc}") from exc


class CommitPlan(NamedTuple):
    """A checked :meth:`~TransactionalStore.commit` call, handed to the backend's transaction body.

    ``todo`` are the non-empty ranges (compare-and-set, then store ``end``), ``empty`` the empty ones
    (store ``end`` only for a partition without a position); ``metas`` maps the position keys of
    those with a document to the JSON text of the range's ``position_meta()`` (absent: none); ``part`` names
    the commit's batch rows (``""`` for a whole batch); ``log_entry`` says the commit also writes the
    batch's offset-log entry (idempotent for an identical entry, a conflict for another).
    """

    epoch: int
    batch: PlannedBatch
    writes: Writes
    todo: List[SourceRange]
    empty: List[SourceRange]
    metas: Dict[str, Optional[str]]
    part: str
    complete_batch: bool
    log_entry: bool = False
    #: a whole-batch commit (every range of the batch, commit-log entry included): the flat rule applies
    whole: bool = False
    #: the position keys of ``todo`` (the flat rule's set checks compare whole sets, without a loop here)
    moved: FrozenSet[str] = frozenset()


def batch_ranges(batch: PlannedBatch) -> List[SourceRange]:
    """The ranges of ``batch`` as a list (a :class:`PlannedBatch` refuses non-ranges, mixed kinds and a
    partition named twice when it is made, and its ranges are an immutable tuple)."""
    return list(batch.ranges)


def commit_ranges(
    batch: PlannedBatch, ranges: Optional[Sequence[SourceRange]]
) -> Tuple[List[SourceRange], List[SourceRange]]:
    """The ranges a commit covers, split into ``(non_empty, empty)``; each must belong to ``batch``."""
    chosen = batch_ranges(batch)
    if ranges is not None:
        members = set(chosen)
        seen = set()
        for r in ranges:
            if not isinstance(r, SourceRange) or r not in members:
                raise ConfigurationError(
                    f"range {r!r} is not one of batch {batch.batch_id}'s ranges {list(batch.ranges)!r}")
            if r.position_key in seen:
                raise ConfigurationError(f"partition {r.position_key} appears twice in the ranges of a commit")
            seen.add(r.position_key)
        chosen = list(ranges)
    moved = list(map(operator.gt, map(_END, chosen), map(_START, chosen)))  # without a Python loop: dense batches
    return list(compress(chosen, moved)), list(compress(chosen, map(operator.not_, moved)))


def meta_json(r: SourceRange) -> Optional[str]:
    """The JSON text of ``r.position_meta()`` (a JSON object or ``None``), checked before anything is written."""
    meta = r.position_meta()
    if meta is None:
        return None
    if not isinstance(meta, dict):
        raise ConfigurationError(f"position_meta() of {r.describe()} must be a dict or None, got {meta!r}")
    try:
        return json.dumps(meta, separators=(",", ":"), sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(f"position_meta() of {r.describe()} cannot be stored as JSON: {meta!r} "
                                 f"({exc})") from exc


def plan_commit(epoch: object, batch: object, writes: object, ranges: Optional[Sequence[SourceRange]],
                complete_batch: bool, log_entry: bool = False) -> CommitPlan:
    """Check a commit's arguments and work out what it covers (the shared preamble of every backend)."""
    epoch, batch, writes = check_epoch_arg(epoch), check_batch_arg(batch), check_writes_arg(writes)
    if not isinstance(log_entry, bool) or not isinstance(complete_batch, bool):
        raise ConfigurationError(f"complete_batch and log_entry must be bools, got {complete_batch!r} and "
                                 f"{log_entry!r}")
    if log_entry and (ranges is not None or not complete_batch):
        raise ConfigurationError("log_entry=True writes a whole batch's offset-log entry: it needs the whole batch "
                                 "(ranges=None, complete_batch=True)")
    todo, empty = commit_ranges(batch, ranges)
    chosen = todo + empty
    kept = sorted({r.position_key for r in chosen} & set(writes.dropped_positions)) if writes.dropped_positions else []
    if kept:
        raise ConfigurationError(f"the commit of batch {batch.batch_id} cannot drop the positions {kept}: its own "
                                 f"ranges store them; drop a position only when no range of the commit has it")
    metas: Dict[str, Optional[str]] = {}
    if chosen and type(chosen[0]).position_meta is not SourceRange.position_meta:  # a kind that keeps documents
        metas = {r.position_key: text for r in chosen if (text := meta_json(r)) is not None}
    return CommitPlan(epoch, batch, writes, todo, empty, metas, part_name(chosen, complete_batch),
                      complete_batch, log_entry, complete_batch and ranges is None, frozenset(map(_KEY, todo)))


def part_name(ranges: Sequence[SourceRange], complete_batch: bool) -> str:
    """Key of a commit's batch rows: ``""`` for a whole batch, the position keys (``"t/0,t/1"``) otherwise.

    The keys follow the range type's own order where it has one (Kafka: topic, then partition
    number), as in layout version 1, so a partition retried across an upgrade replaces its rows.
    """
    if complete_batch:
        return ""
    try:
        ordered = sorted(ranges)  # type: ignore[type-var]
    except TypeError:
        ordered = sorted(ranges, key=lambda r: r.position_key)
    return ",".join(r.position_key for r in ordered)


def conflict_error(batch_id: int, r: SourceRange, stored: int | str) -> OffsetConflictError:
    return OffsetConflictError(
        f"position conflict on {r.describe()} in batch {batch_id}: stored {r.position_unit} {stored} is neither "
        f"{r.start_name} {r.start} nor {r.end_name} {r.end}; nothing was written")


def mixed_error(batch_id: int, applied: Iterable[str], done: Iterable[str],
                ranges: Sequence[SourceRange] = ()) -> OffsetConflictError:
    start_name, end_name = (ranges[0].start_name, ranges[0].end_name) if ranges else ("start", "end")
    return OffsetConflictError(
        f"position conflict in batch {batch_id}: partitions {sorted(done)} are already at the range {end_name} "
        f"but {sorted(applied)} are at the range {start_name} (a commit is all-or-nothing); nothing was written")


def logged_conflict_error(batch: PlannedBatch, existing: PlannedBatch) -> OffsetConflictError:
    return OffsetConflictError(f"batch {batch.batch_id} is already in the offset log as {existing}; refusing to "
                               f"log it again as {batch}")


def uncommitted_error(batch_id: int, r: SourceRange, stored: Optional[int | str]) -> OffsetConflictError:
    return OffsetConflictError(
        f"batch {batch_id} cannot be marked committed: {r.describe()} is at {r.position_unit} "
        f"{'none' if stored in (None, '') else stored}, not its {r.end_name} {r.end}")


def decide(batch_id: int, ranges: Sequence[SourceRange], stored: Mapping[str, int]) -> bool:
    """The position compare-and-set: ``True`` → apply, ``False`` → replay; raises on a conflict.

    ``stored`` maps position keys to the stored next position.
    """
    applied: List[str] = []
    done: List[str] = []
    for r in ranges:
        cur = stored.get(r.position_key)
        if cur is None or cur == r.start:
            applied.append(r.position_key)
        elif cur == r.end:
            done.append(r.position_key)
        else:
            raise conflict_error(batch_id, r, cur)
    if done and applied:
        raise mixed_error(batch_id, applied, done, ranges)
    return not done


# ---------------------------------------------------------------- the flat rule of whole-batch commits
#: Reserved-namespace key (SQL ``deo_values``) of the flat-commit marker; Redis keeps it in ``:flat``.
FLAT_KEY = "flat"


def flat_marker(epoch: int, batch_id: int) -> str:
    """The marker a whole-batch commit leaves: the positions are exactly those of ``batch_id``'s commit
    under ``epoch`` (``"<epoch>:<batch id>"``)."""
    return f"{epoch}:{batch_id}"


def parse_flat_marker(text: Any) -> Optional[Tuple[int, int]]:
    """``(epoch, batch id)`` of a stored marker; ``None`` for none (or one this version cannot read:
    the per-range rule then decides, which is always safe)."""
    if isinstance(text, bytes):
        text = text.decode("ascii", "replace")
    if not isinstance(text, str):
        return None
    if text.startswith('"') and text.endswith('"'):  # SQL keeps it as a JSON string
        text = text[1:-1]
    epoch, _, batch_id = text.partition(":")
    return (int(epoch), int(batch_id)) if epoch.isdigit() and batch_id.isdigit() else None


def decide_flat(app_id: str, batch_id: int, epoch: int, marker: Optional[Tuple[int, int]]) -> bool:
    """The flat rule of a whole-batch commit whose ``batch_id`` is not in the commit log yet: ``True`` →
    apply without comparing positions; ``False`` → the per-range compare-and-set (:func:`decide`) decides.

    The marker names the last batch committed whole under the committer's epoch, and only whole-batch
    commits of that epoch leave one: per-partition commits, :meth:`mark_committed` and
    :meth:`reset_positions` delete it, and an operator (skip, reset) or another driver takes a new epoch.
    So the stored positions are exactly those that batch's commit left, and the committer of the epoch
    planned the next batch from them: the batch right after it applies as is. Any other batch under
    the same epoch is a gap (or a batch older than the marker whose commit-log entry is gone) and is
    refused, naming what the store holds. Without a marker of this epoch (the first commit of a
    driver, or positions moved outside the batch sequence) the per-range rule decides.
    """
    if marker is None or marker[0] != epoch:
        return False
    if batch_id == marker[1] + 1:
        return True
    raise OffsetConflictError(
        f"app {app_id!r}: batch {batch_id} does not follow batch {marker[1]}, the last batch committed under epoch "
        f"{epoch} (the store holds the positions that batch {marker[1]} left); batches commit in id order, one "
        f"after the other; nothing was written")


class FlatMemo:
    """The position keys stored after one whole-batch commit ``(epoch, batch id)`` of this store
    instance; ``None`` keys: not known (the commit applied flat without reading them).

    It spares a flat commit the insert-if-absent of its empty ranges (the positions of partitions
    without data, stored only for a partition that has none yet): valid only while the store's
    marker still names that commit, which the backend checks inside the commit's transaction.
    """

    __slots__ = ("marker", "keys")

    def __init__(self) -> None:
        self.marker: Optional[Tuple[int, int]] = None
        self.keys: Optional[FrozenSet[str]] = None

    def empties_to_store(self, marker: Optional[Tuple[int, int]], empty: List[SourceRange]) -> List[SourceRange]:
        """The empty ranges whose position may be absent (and is then stored), given the marker read in
        the transaction: all of them unless the memo is of that very commit."""
        if self.keys is None or marker is None or marker != self.marker:
            return empty
        return [r for r in empty if r.position_key not in self.keys]

    def after(self, plan: CommitPlan, before: Optional[FrozenSet[str]]) -> Tuple[Tuple[int, int],
                                                                                   Optional[FrozenSet[str]]]:
        """The memo after ``plan`` applied whole, from the keys known before it (``None``: unknown)."""
        keys = before
        if before is not None:
            dropped = plan.writes.dropped_positions
            if dropped or not (plan.moved <= before and before.issuperset(map(_KEY, plan.empty))):
                keys = before.union(plan.moved, map(_KEY, plan.empty)).difference(dropped)
        return (plan.epoch, plan.batch.batch_id), keys

    def known_before(self, marker: Optional[Tuple[int, int]]) -> Optional[FrozenSet[str]]:
        return self.keys if marker is not None and marker == self.marker else None
