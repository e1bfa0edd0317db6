"""Backend-independent pieces of a commit: argument checks, the offset decision, value encoding.

Every backend runs the same decisions (``check_epoch``, ``decide``) inside its own transaction;
Redis mirrors them in Lua, so the messages built here are shared by all three.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Iterable, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from ..errors import ConfigurationError, FencedError, OffsetConflictError
from ..offsets import OffsetRange, TopicAndPartition
from .base import PlannedBatch, Writes

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def check_epoch_arg(epoch: object) -> int:
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 1:
        raise ConfigurationError(f"epoch must be an int >= 1 taken with start_epoch(), got {epoch!r}")
    return epoch


def check_keep_arg(keep: object) -> int:
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
        raise ConfigurationError(f"keep (batches to retain in the offset and commit logs) must be an int >= 1, "
                                 f"got {keep!r}")
    return keep


def check_batch_arg(batch: object) -> PlannedBatch:
    if not isinstance(batch, PlannedBatch):
        raise ConfigurationError(f"batch must be a PlannedBatch, got {batch!r}")
    return batch


def check_epoch(app_id: str, stored: int, epoch: int) -> None:
    """Raise :class:`FencedError` unless ``epoch`` is the application's current epoch."""
    if stored > epoch:
        raise FencedError(f"app {app_id!r}: epoch {epoch} is fenced, a newer driver took epoch {stored}; "
                          f"this driver must stop")
    if stored != epoch:
        raise FencedError(f"app {app_id!r}: epoch {epoch} was never taken (current epoch {stored}); "
                          f"take one with start_epoch()")


def commit_ranges(
    batch: PlannedBatch, ranges: Optional[Sequence[OffsetRange]]
) -> Tuple[List[OffsetRange], List[OffsetRange]]:
    """The ranges a commit covers, split into ``(non_empty, empty)``; each must belong to ``batch``."""
    chosen = list(batch.ranges if ranges is None else ranges)
    seen_batch = set()
    for r in batch.ranges:
        tp = (r.topic, r.partition)
        if tp in seen_batch:
            raise ConfigurationError(f"partition {r.topicPartition()} appears twice in batch {batch.batch_id}")
        seen_batch.add(tp)
    if ranges is not None:
        members = set(batch.ranges)
        seen = set()
        for r in chosen:
            if not isinstance(r, OffsetRange) or r not in members:
                raise ConfigurationError(
                    f"range {r!r} is not one of batch {batch.batch_id}'s ranges {list(batch.ranges)!r}")
            tp = (r.topic, r.partition)
            if tp in seen:
                raise ConfigurationError(f"partition {r.topicPartition()} appears twice in the ranges of a commit")
            seen.add(tp)
    return ([r for r in chosen if r.untilOffset > r.fromOffset],
            [r for r in chosen if r.untilOffset == r.fromOffset])


def part_name(ranges: Sequence[OffsetRange], complete_batch: bool) -> str:
    """Key of a commit's batch rows: ``""`` for a whole batch, ``"topic/partition[,…]"`` otherwise."""
    if complete_batch:
        return ""
    return ",".join(f"{r.topic}/{r.partition}" for r in sorted(ranges))


def tp_field(tp: TopicAndPartition | OffsetRange) -> str:
    """``"topic/partition"``: how a partition is spelled in keys and messages of the stores."""
    return f"{tp.topic}/{tp.partition}"


def parse_tp_field(text: str) -> TopicAndPartition:
    topic, _, partition = text.rpartition("/")
    return TopicAndPartition(topic, int(partition))


def conflict_error(batch_id: int, r: OffsetRange, stored: int | str) -> OffsetConflictError:
    return OffsetConflictError(
        f"offset conflict on {r.topic}-{r.partition} in batch {batch_id}: stored offset {stored} is neither "
        f"fromOffset {r.fromOffset} nor untilOffset {r.untilOffset}; nothing was written")


def mixed_error(batch_id: int, applied: Iterable[str], done: Iterable[str]) -> OffsetConflictError:
    return OffsetConflictError(
        f"offset conflict in batch {batch_id}: partitions {sorted(done)} are already at untilOffset but "
        f"{sorted(applied)} are at fromOffset (a commit is all-or-nothing); nothing was written")


def uncommitted_error(batch_id: int, r: OffsetRange, stored: Optional[int | str]) -> OffsetConflictError:
    return OffsetConflictError(
        f"batch {batch_id} cannot be marked committed: {r.topic}-{r.partition} is at offset "
        f"{'none' if stored in (None, '') else stored}, not its untilOffset {r.untilOffset}")


def decide(batch_id: int, ranges: Sequence[OffsetRange], stored: Mapping[Tuple[str, int], int]) -> bool:
    """The offset compare-and-set: ``True`` → apply, ``False`` → replay; raises on a conflict.

    ``stored`` maps ``(topic, partition)`` to the stored next offset.
    """
    applied: List[str] = []
    done: List[str] = []
    for r in ranges:
        cur = stored.get((r.topic, r.partition))
        if cur is None or cur == r.fromOffset:
            applied.append(tp_field(r))
        elif cur == r.untilOffset:
            done.append(tp_field(r))
        else:
            raise conflict_error(batch_id, r, cur)
    if done and applied:
        raise mixed_error(batch_id, applied, done)
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
    :func:`value_ops`. The SQL stores send each namespace's ints as one JSON object."""
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
