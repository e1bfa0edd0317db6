"""How result values are stored, whatever the backend: a :class:`~dstream_exactly_once.Writes`
as value operations (64-bit integers, floats, JSON documents), increments split by kind, and
values decoded back from their stored columns."""

from __future__ import annotations

import json
from typing import Any, Dict, Iterable, List, Mapping, NamedTuple, Optional, Tuple

from ..errors import ConfigurationError
from ._writes import INT64_MAX, INT64_MIN, Writes

__all__ = ["INT64_MAX", "INT64_MIN", "ValueOp", "counters_json", "decode_value", "rows_from_json", "split_increments",
           "value_ops"]


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
