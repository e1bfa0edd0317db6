"""The rules every store applies to a commit, whatever the backend: argument checks, which ranges a
commit covers, the position compare-and-set, the messages, and value encoding.

Every backend runs the same decisions (``check_epoch``, ``decide``) inside its own transaction;
Redis mirrors them in Lua, so the messages built here are shared by all three. Nothing here knows a
source: ranges are :class:`~dstream_exactly_once.core.ranges.SourceRange` values, named by their
``position_key`` and compared by ``start``/``end``.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Iterable, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from .._checks import is_int
from ..core.ranges import Position, SourceRange, check_ranges
from ..errors import ConfigurationError, FencedError, OffsetConflictError, StoreError
from .writes import INT64_MAX, INT64_MIN, PlannedBatch, Writes


def check_epoch_arg(epoch: object) -> int:
    if not is_int(epoch) or epoch < 1:
        raise ConfigurationError(f"epoch must be an int >= 1 taken with start_epoch(), got {epoch!r}")
    return epoch


def check_keep_arg(keep: object) -> int:
    if not is_int(keep) or keep < 1:
        raise ConfigurationError(f"keep (batches to retain in the offset and commit logs) must be an int >= 1, "
                                 f"got {keep!r}")
    return keep


def check_batch_arg(batch: object) -> PlannedBatch:
    if not isinstance(batch, PlannedBatch):
        raise ConfigurationError(f"batch must be a PlannedBatch, got {batch!r}")
    return batch


def check_writes_arg(writes: object) -> Writes:
    if not isinstance(writes, Writes):
        raise ConfigurationError(f"writes must be a Writes, got {writes!r}")
    return writes


def check_positions_arg(positions: object) -> Dict[str, int]:
    """``positions`` of :meth:`TransactionalStore.reset_positions` as a dict, checked entry by entry."""
    if not isinstance(positions, Mapping):
        raise ConfigurationError(f"positions must be a mapping {{position_key: next position}}, got {positions!r}")
    out: Dict[str, int] = {}
    for key, pos in positions.items():
        if not isinstance(key, str) or not key:
            raise ConfigurationError(f"position key must be a non-empty str (e.g. 'topic/0'), got {key!r}")
        if not is_int(pos) or not 0 <= pos <= INT64_MAX:
            raise ConfigurationError(f"position of {key!r} must be an int in 0..2**63-1, got {pos!r}")
        out[key] = pos
    return out


def check_documents_arg(documents: object, positions: Mapping[str, int]) -> Dict[str, str]:
    """``documents`` of :meth:`TransactionalStore.reset_positions` as ``{key: JSON text}``: each a
    JSON object for a key of ``positions``."""
    if documents is None:
        return {}
    if not isinstance(documents, Mapping):
        raise ConfigurationError(f"documents must be a mapping {{position_key: dict}}, got {documents!r}")
    out: Dict[str, str] = {}
    for key, doc in documents.items():
        if key not in positions:
            raise ConfigurationError(f"document for {key!r}, which is not one of the positions being set "
                                     f"{sorted(positions)!r}")
        if not isinstance(doc, Mapping):
            raise ConfigurationError(f"document of {key!r} must be a dict, got {doc!r}")
        try:
            out[key] = json.dumps(dict(doc), separators=(",", ":"), sort_keys=True, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ConfigurationError(f"document of {key!r} cannot be stored as JSON: {doc!r} ({exc})") from exc
    return out


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


class ValueOp(NamedTuple):
    """One keyed value write: ``op`` is ``"set"`` or ``"add"``; ``kind`` ``"i"``nt, ``"f"``loat or ``"j"``son."""

    namespace: str
    key: str
    op: str
    kind: str
    value: Any  # int, float, or JSON text for kind "j"


def _number_kind(value: Any) -> Optional[str]:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return "i" if INT64_MIN <= value <= INT64_MAX else None
    if isinstance(value, float):
        return "f"
    return None


def value_ops(writes: Writes) -> List[ValueOp]:
    """One op per key: puts and increments of one key in one :class:`Writes` are folded (put first).

    A put of an int (64-bit) or float is stored as a number, so it can be incremented later; any
    other put is stored as JSON. Raises :class:`ConfigurationError` before anything is written.
    """
    ops: Dict[Tuple[str, str], ValueOp] = {}
    for (ns, key), text in writes.puts.items():
        value = json.loads(text)
        kind = _number_kind(value)
        ops[(ns, key)] = ValueOp(ns, key, "set", kind or "j", value if kind else text)
    for (ns, key), amount in writes.increments.items():
        kind = "f" if isinstance(amount, float) else "i"
        if kind == "i" and not INT64_MIN <= amount <= INT64_MAX:
            raise ConfigurationError(f"increment for {ns}/{key} is outside the 64-bit range: {amount!r}")
        put = ops.get((ns, key))
        if put is None:
            ops[(ns, key)] = ValueOp(ns, key, "add", kind, amount)
        elif put.kind == "j":
            raise ConfigurationError(f"cannot increment {ns}/{key}: the same writes put a non-number there")
        else:
            total = put.value + amount
            total_kind = _number_kind(total)
            if total_kind is None:
                raise ConfigurationError(f"value of {ns}/{key} leaves the 64-bit range: {total!r}")
            ops[(ns, key)] = ValueOp(ns, key, "set", total_kind, total)
    return list(ops.values())


def split_increments(writes: Writes) -> Tuple[Dict[str, Dict[str, int]], List[Tuple[str, str, float]]]:
    """``({namespace: {key: int amount}}, [(namespace, key, float amount)])``: the increments of
    ``writes`` without puts (counters), int and float apart, with the 64-bit check of
    :func:`value_ops`. The SQL stores send each namespace's ints as one JSON object.
    The dicts returned may be the ones ``writes`` holds: read them, never modify them."""
    counters = writes.counters()
    if counters is not None:  # ints only, every total in range: kept that way by Writes.incr
        return counters, []
    ints: Dict[str, Dict[str, int]] = {}
    floats: List[Tuple[str, str, float]] = []
    last_ns: Optional[str] = None
    bucket: Dict[str, int] = {}
    for (ns, key), amount in writes.increments.items():
        if isinstance(amount, float):
            floats.append((ns, key, amount))
            continue
        if not INT64_MIN <= amount <= INT64_MAX:
            raise ConfigurationError(f"increment for {ns}/{key} is outside the 64-bit range: {amount!r}")
        if ns != last_ns:
            last_ns, bucket = ns, ints.setdefault(ns, {})
        bucket[key] = amount
    return ints, floats


def counters_json(amounts: Mapping[str, int]) -> str:
    """``{key: amount}`` as the JSON object the SQL stores expand with ``json_each``."""
    return json.dumps(amounts, ensure_ascii=False, separators=(",", ":"))


def decode_value(inum: Any, fnum: Any, doc: Optional[str]) -> Any:
    """The user value of a stored ``(int part, float part, JSON)`` triple."""
    if doc is not None:
        return json.loads(doc)
    if fnum is not None:
        return float(inum or 0) + float(fnum)
    if inum is not None:
        return int(inum)
    return None


def rows_from_json(texts: Iterable[str]) -> List[Any]:
    return [json.loads(t) for t in texts]
