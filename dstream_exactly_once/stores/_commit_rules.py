"""The decision every store takes on a commit, whatever the backend: which ranges a commit covers,
the epoch check and the position compare-and-set, with their messages.

Argument checks are :mod:`._commit_args`'s; how values are encoded is :mod:`._value_codec`'s.

Every backend runs the same decisions (``check_epoch``, ``decide``) inside its own transaction;
Redis mirrors them in Lua, so the messages built here are shared by all three. Nothing here knows a
source: ranges are :class:`~dstream_exactly_once.core.ranges.SourceRange` values, named by their
``position_key`` and compared by ``start``/``end``.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Iterable, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from ..core.ranges import Position, SourceRange, check_ranges
from ..errors import ConfigurationError, FencedError, OffsetConflictError, StoreError
from ._commit_args import check_batch_arg, check_epoch_arg, check_writes_arg
from .writes import PlannedBatch, Writes


def stored_position(app_id: str, key: Any, offset: Any, meta: Any) -> Tuple[str, Position]:
    """One position as a backend read it (``meta``: JSON text or None); a damaged one (a non-int
    position, a document that is not JSON) raises :class:`StoreError` naming the app and key."""
    try:
        return str(key), Position(int(offset), None if meta is None else json.loads(meta))
    except (TypeError, ValueError) as exc:
        raise StoreError(f"app {app_id!r}: the stored position {key!r} is damaged (position {offset!r}, document "
                         f"{meta!r}): {exc}") from exc


def check_epoch(app_id: str, stored: int, epoch: int) -> None:
    """Raise :class:`FencedError` unless ``epoch`` is the application's current epoch."""
    if stored > epoch:
        raise FencedError(f"app {app_id!r}: epoch {epoch} is fenced, a newer driver took epoch {stored}; "
                          f"this driver must stop")
    if stored != epoch:
        raise FencedError(f"app {app_id!r}: epoch {epoch} was never taken (current epoch {stored}); "
                          f"take one with start_epoch()")


class CommitPlan(NamedTuple):
    """A checked :meth:`~TransactionalStore.commit` call, handed to the backend's transaction body.

    ``todo`` are the non-empty ranges (compare-and-set, then store ``end``), ``empty`` the empty ones
    (store ``end`` only for a partition without a position); ``metas`` maps each of their position
    keys to the JSON text of the range's ``position_meta()`` (``None``: no document); ``part`` names
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


def batch_ranges(batch: PlannedBatch) -> List[SourceRange]:
    """The ranges of ``batch``, refusing non-ranges, mixed kinds and a partition named twice."""
    return check_ranges(batch.ranges, f"the ranges of batch {batch.batch_id}")


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
    return [r for r in chosen if r.end > r.start], [r for r in chosen if r.end == r.start]


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
    kept = sorted({r.position_key for r in todo + empty} & set(writes.dropped_positions))
    if kept:
        raise ConfigurationError(f"the commit of batch {batch.batch_id} cannot drop the positions {kept}: its own "
                                 f"ranges store them; drop a position only when no range of the commit has it")
    metas = {r.position_key: meta_json(r) for r in todo + empty}
    return CommitPlan(epoch, batch, writes, todo, empty, metas, part_name(todo + empty, complete_batch),
                      complete_batch, log_entry)


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
