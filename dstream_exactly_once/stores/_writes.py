"""What one commit carries: the planned batch (an offset-log entry), its writes, and the outcome.

These are plain values shared by every store backend and by the streaming code; nothing here
talks to a backend or knows a source (ranges are :class:`~dstream_exactly_once.core._ranges.SourceRange`).
"""

from __future__ import annotations

import enum
import json
import math
from dataclasses import dataclass
from typing import AbstractSet, Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple

from .._checks import is_int, is_number
from ..core._ranges import SourceRange, check_ranges, decode_ranges, encode_ranges
from ..errors import ConfigurationError
from ._sql_text import check_statement

__all__ = ["INCIDENT_KINDS", "INT64_MAX", "INT64_MIN", "MAX_KEY_BYTES", "RESERVED_NAMESPACE", "CommitOutcome", "Number",
           "PlannedBatch", "Writes", "incident_key"]

Number = float | int

#: The 64-bit integer range every store keeps values and positions in.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

#: Value namespace the library keeps for itself: the driver's heartbeat (SQL stores) and the
#: *incident records* written beside a commit (see :meth:`Writes.record_incident`).
RESERVED_NAMESPACE = "__deo__"

#: The longest namespace, key or label a :class:`Writes` accepts, in UTF-8 bytes. Every store keeps
#: them in key columns: PostgreSQL's B-tree index entries hold at most about 2,700 bytes, shared
#: by the application id (up to 200), the namespace and the key.
MAX_KEY_BYTES = 1024

#: Kinds of incident record: ``loss`` (a range whose data was gone when it was read, under a
#: skip data-loss policy) and ``skip`` (a batch an operator skipped without output).
INCIDENT_KINDS = ("loss", "skip")


def incident_key(kind: str, batch_id: int, part: str = "") -> str:
    """The reserved-namespace key of one incident record: ``<kind>:<batch id, 20 digits>[:<part>]``.

    Zero-padded batch ids keep the keys in batch order; ``part`` tells apart several records of
    one batch (e.g. a position key, for per-partition commits that each record their own loss).
    """
    if kind not in INCIDENT_KINDS:
        raise ValueError(f"incident kind must be one of {INCIDENT_KINDS}, got {kind!r}")
    if not is_int(batch_id) or batch_id < 0:
        raise ValueError(f"incident batch id must be an int >= 0, got {batch_id!r}")
    return f"{kind}:{batch_id:020d}" + (f":{part}" if part else "")


@dataclass(frozen=True)
class PlannedBatch:
    """One entry of the offset log: a batch's id, time and the exact ranges it reads.

    ``batch_id`` values are consecutive integers from 0, independent of wall-clock batch time;
    a replayed batch keeps its id, time and ranges. The ranges are of one source (Kafka
    :class:`~dstream_exactly_once.OffsetRange`, file byte ranges, …), at most one per partition.
    """

    batch_id: int
    batch_time_ms: int
    ranges: Tuple[SourceRange, ...]

    def __post_init__(self) -> None:
        """Refuse what no store could log and no reader could read back: a ``batch_id`` that is not an
        int in 0..2**63-1, a ``batch_time_ms`` that is not a 64-bit int, and ranges that are not
        source ranges of one kind with each partition once (a list is kept as a tuple)."""
        if not is_int(self.batch_id) or not 0 <= self.batch_id <= INT64_MAX:
            raise ConfigurationError(f"PlannedBatch batch_id must be an int in 0..2**63-1, got {self.batch_id!r}")
        if not is_int(self.batch_time_ms) or not INT64_MIN <= self.batch_time_ms <= INT64_MAX:
            raise ConfigurationError(f"PlannedBatch batch_time_ms of batch {self.batch_id} must be a 64-bit int "
                                     f"(milliseconds since the epoch), got {self.batch_time_ms!r}")
        if isinstance(self.ranges, (str, bytes)) or not isinstance(self.ranges, (tuple, list)):
            raise ConfigurationError(f"PlannedBatch ranges of batch {self.batch_id} must be a tuple of source ranges, "
                                     f"got {self.ranges!r}")
        ranges = tuple(check_ranges(self.ranges, f"the ranges of batch {self.batch_id}"))
        if not isinstance(self.ranges, tuple):
            object.__setattr__(self, "ranges", ranges)

    def stored_form(self, known: AbstractSet[str]) -> PlannedBatch:
        """The batch as the offset log keeps it and a whole-batch commit commits it: the ranges with data,
        and the empty ranges of the partitions not in ``known`` (the position keys stored, or read by a
        batch planned before this one). An empty range of a known partition starts and ends at the
        position its partition holds when this batch commits, so leaving it out changes nothing that is
        stored; a partition new to the stream keeps its empty range, whose commit stores its first
        position. The log and the commit then cost what the batch's data costs, not its partition count.
        A replay of the stored form has fewer ranges (and Spark partitions) than the batch had: only
        for outputs that commit whole batches (``BatchCommitter.compact_log``).
        """
        kept = tuple(r for r in self.ranges if r.end > r.start or r.position_key not in known)
        return self if len(kept) == len(self.ranges) else PlannedBatch(self.batch_id, self.batch_time_ms, kept)

    def to_json(self) -> str:
        """The whole entry as JSON (Redis offset log); :meth:`from_json` reads it back."""
        return f'{{"batch_id":{self.batch_id},"batch_time_ms":{self.batch_time_ms},"ranges":{self.ranges_json()}}}'

    @classmethod
    def from_json(cls, text: str | bytes) -> PlannedBatch:
        d = json.loads(text)
        return cls(int(d["batch_id"]), int(d["batch_time_ms"]), decode_ranges(d["ranges"]))

    def ranges_json(self) -> str:
        """Only the ranges as JSON (SQL offset log, position log): ``{"kind": …, "many": …}``, the range
        kind's own encoding of many ranges at once (:func:`~dstream_exactly_once.core._ranges.encode_ranges`),
        made once per batch (the offset-log entry and the commit's position-log entry share it)."""
        text: Optional[str] = self.__dict__.get("_ranges_json")
        if text is None:
            text = json.dumps(encode_ranges(self.ranges), separators=(",", ":"))
            object.__setattr__(self, "_ranges_json", text)  # not a field: equality and hashing unchanged
        return text

    @staticmethod
    def ranges_from_json(text: str | bytes) -> Tuple[SourceRange, ...]:
        """The ranges of :meth:`ranges_json`, or of a JSON array of ranges encoded one by one (the
        encoding of layout versions 1 and 2: Kafka ranges as 4-element lists)."""
        return decode_ranges(json.loads(text))


class CommitOutcome(enum.Enum):
    """What :meth:`TransactionalStore.commit` did."""

    APPLIED = "applied"
    REPLAYED = "replayed"  # already committed before: nothing written (idempotent replay)


def _check_json(what: str, value: Any) -> str:
    try:
        return json.dumps(value, separators=(",", ":"), sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(f"{what} cannot be stored as JSON: {value!r} ({exc})") from exc


def _check_key(what: str, key: Any) -> str:
    if not isinstance(key, str) or not key:
        raise ConfigurationError(f"{what} must be a non-empty str, got {key!r}")
    try:
        size = len(key.encode("utf-8"))
    except UnicodeEncodeError:
        raise ConfigurationError(f"{what} must be valid Unicode text (no lone surrogates), got {key!r}") from None
    if size > MAX_KEY_BYTES:
        raise ConfigurationError(f"{what} must be at most {MAX_KEY_BYTES} bytes in UTF-8, got {size} bytes: "
                                 f"{key[:60]!r}…")
    return key


def _check_namespace(namespace: Any) -> str:
    _check_key("namespace", namespace)
    if namespace == RESERVED_NAMESPACE:
        raise ConfigurationError(f"namespace {RESERVED_NAMESPACE!r} is reserved for the library's own records "
                                 f"(heartbeat, incident records); use another namespace")
    return namespace


class IncrementsView(Mapping[Tuple[str, str], Number]):
    """A read-only ``{(namespace, key): amount}`` view of a :class:`Writes`' increments."""

    __slots__ = ("_by_ns",)

    def __init__(self, by_ns: Dict[str, Dict[str, Number]]) -> None:
        self._by_ns = by_ns

    def __getitem__(self, item: Tuple[str, str]) -> Number:
        try:
            ns, key = item
            return self._by_ns[ns][key]
        except (TypeError, ValueError):  # not a (namespace, key) pair: absent, as for a dict
            raise KeyError(item) from None

    def __iter__(self) -> Iterator[Tuple[str, str]]:
        for ns, amounts in self._by_ns.items():
            for key in amounts:
                yield ns, key

    def __len__(self) -> int:
        return sum(map(len, self._by_ns.values()))

    def __repr__(self) -> str:
        return repr(dict(self.items()))


class Writes:
    """The results of one batch (or one partition of it), applied in the commit transaction.

    - :meth:`incr` adds a number to a keyed value (merge by addition) — replays never re-add.
    - :meth:`put` upserts a keyed JSON value (last write wins).
    - :meth:`put_batch_rows` stores rows *under the batch id* (time-keyed writes): a replay
      replaces them, so each batch's rows are present exactly once.
    - :meth:`add_label` records a label as applied (label-idempotent sinks).

    - :meth:`execute` runs one SQL statement of yours in the same transaction (SQL stores).
    - :meth:`drop_position` deletes a stored position no later batch reads (the library's own
      bound on the positions of sources whose partitions end, such as rotated files).

    Every method validates its input when it is called and raises
    :class:`~dstream_exactly_once.errors.ConfigurationError` naming the bad value, so a batch never
    carries writes a store would refuse at commit time (and refuse again on every replay). Refused:

    - a namespace, key or label that is not a non-empty str of at most :data:`MAX_KEY_BYTES` UTF-8
      bytes (lone surrogates included);
    - the namespace :data:`RESERVED_NAMESPACE` in :meth:`incr`, :meth:`put` and
      :meth:`put_batch_rows` (the library's heartbeat and incident records live there);
    - an increment that is not a finite int or float, or that makes its key's total infinite;
    - values and rows JSON cannot hold (``NaN``, sets, objects); ``put_batch_rows`` rows given as a
      ``str``, ``bytes`` or mapping instead of an iterable of rows;
    - SQL that would end or change the commit's transaction (see :meth:`execute`).

    Increments are kept per namespace (the stores write each namespace's counters as one JSON
    object); :attr:`increments` is a read-only ``{(namespace, key): amount}`` view of them.
    """

    def __init__(self, increments: Optional[Mapping[Tuple[str, str], Number]] = None,
                 puts: Optional[Dict[Tuple[str, str], str]] = None, batch_rows: Optional[Dict[str, List[str]]] = None,
                 labels: Optional[List[str]] = None,
                 statements: Optional[List[Tuple[str, Tuple[Any, ...]]]] = None) -> None:
        self._counters: Dict[str, Dict[str, Number]] = {}
        self._plain_ints = True  # every increment so far is an int and every total fits 64 bits
        self.puts: Dict[Tuple[str, str], str] = puts if puts is not None else {}
        self.batch_rows: Dict[str, List[str]] = batch_rows if batch_rows is not None else {}
        self.labels: List[str] = labels if labels is not None else []
        self.statements: List[Tuple[str, Tuple[Any, ...]]] = statements if statements is not None else []
        #: position keys whose stored position (and document) the commit deletes
        self.dropped_positions: List[str] = []
        for (ns, key), amount in (increments or {}).items():
            self.incr(ns, key, amount)

    @property
    def increments(self) -> Mapping[Tuple[str, str], Number]:
        """``{(namespace, key): amount}`` (read-only; add with :meth:`incr`)."""
        return IncrementsView(self._counters)

    def counters(self) -> Optional[Dict[str, Dict[str, int]]]:
        """``{namespace: {key: amount}}`` when every increment is an int and every total fits in 64
        bits (the stores' fast path; do not modify it), else ``None``."""
        return self._counters if self._plain_ints else None  # type: ignore[return-value]

    def incr(self, namespace: str, key: str, amount: Number = 1) -> Writes:
        """Add ``amount`` (a finite int or float) to ``key`` of ``namespace``; increments of one key in
        one :class:`Writes` add up first (an int total must end within 64 bits by commit time)."""
        _check_namespace(namespace)
        _check_key("key", key)
        if not is_number(amount) or (
            isinstance(amount, float) and not math.isfinite(amount)
        ):
            raise ConfigurationError(f"increment for {namespace}/{key} must be a finite number, got {amount!r}")
        amounts = self._counters.get(namespace)
        before = 0 if amounts is None else amounts.get(key, 0)
        try:
            total = before + amount
            finite = not isinstance(total, float) or math.isfinite(total)
        except OverflowError:  # an int too large for a float, added to a float
            finite = False
        if not finite:
            raise ConfigurationError(f"increment {amount!r} for {namespace}/{key} makes its total {before!r} + "
                                     f"{amount!r} overflow the finite doubles a store keeps; nothing was added")
        if amounts is None:
            amounts = self._counters[namespace] = {}
        amounts[key] = total
        if self._plain_ints and (type(total) is not int or not INT64_MIN <= total <= INT64_MAX):
            self._plain_ints = False
        return self

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Writes):
            return NotImplemented
        return (self._counters, self.puts, self.batch_rows, self.labels, self.statements,
                self.dropped_positions) == (other._counters, other.puts, other.batch_rows, other.labels,
                                            other.statements, other.dropped_positions)

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return (f"Writes(increments={dict(self.increments.items())!r}, puts={self.puts!r}, "
                f"batch_rows={self.batch_rows!r}, labels={self.labels!r}, statements={self.statements!r}"
                + (f", dropped_positions={self.dropped_positions!r})" if self.dropped_positions else ")"))

    def put(self, namespace: str, key: str, value: Any) -> Writes:
        """Set ``key`` of ``namespace`` to ``value`` (anything JSON holds; last write wins)."""
        _check_namespace(namespace)
        _check_key("key", key)
        self.puts[(namespace, key)] = _check_json(f"value for {namespace}/{key}", value)
        return self

    def put_batch_rows(self, namespace: str, rows: Iterable[Any]) -> Writes:
        """Store ``rows`` (an iterable of JSON values, e.g. a list of dicts) under the batch id."""
        _check_namespace(namespace)
        if isinstance(rows, (str, bytes, bytearray, memoryview, Mapping)) or not isinstance(rows, Iterable):
            raise ConfigurationError(f"rows of {namespace} must be an iterable of rows (e.g. a list of dicts), got "
                                     f"{type(rows).__name__} {rows!r:.200}; wrap a single row in a list")
        encoded = [_check_json(f"row of {namespace}", r) for r in rows]
        self.batch_rows.setdefault(namespace, []).extend(encoded)
        return self

    def record_incident(self, kind: str, batch_id: int, doc: Mapping[str, Any], part: str = "") -> Writes:
        """Record an incident (``kind`` in :data:`INCIDENT_KINDS`) beside this commit, in the reserved
        namespace under :func:`incident_key`: it becomes visible with the commit's positions and
        results, or not at all. For the library's own use (data-loss and operator-skip records);
        read them back with ``store.get_values(RESERVED_NAMESPACE)``.
        """
        key = incident_key(kind, batch_id, part)
        self.puts[(RESERVED_NAMESPACE, key)] = _check_json(f"incident {key}", dict(doc))
        return self

    def drop_position(self, key: str) -> Writes:
        """Delete the stored position ``key`` (and its document) in the commit transaction, if the
        commit applies; a replayed commit deletes nothing. For the library's own use: the committer
        drops the positions a source no longer needs (a rotated file gone and read to its end) once
        no batch kept in the offset log reads them. ``key`` may not be one of the commit's ranges
        (refused at commit time, before anything is written)."""
        key = _check_key("position key", key)
        if key not in self.dropped_positions:
            self.dropped_positions.append(key)
        return self

    def drop_positions(self, keys: Iterable[str]) -> Writes:
        """:meth:`drop_position` for each of ``keys`` (an iterable of position keys, not a str)."""
        if isinstance(keys, (str, bytes)) or not isinstance(keys, Iterable):
            raise ConfigurationError(f"position keys to drop must be an iterable of str, got {keys!r}")
        for key in keys:
            self.drop_position(key)
        return self

    def add_label(self, label: str) -> Writes:
        """Record ``label`` as applied (a non-empty str of at most :data:`MAX_KEY_BYTES` UTF-8 bytes)."""
        self.labels.append(_check_key("label", label))
        return self

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Writes:
        """Run one SQL statement of yours inside the commit transaction — SQL stores only.

        The statement sees and changes your own tables atomically with the positions; a failing
        statement rolls the whole commit back, and a replay of a committed batch does not run it.

        Parameters: write one ``?`` per element of ``params``, in order, on every SQL store; write
        a literal ``?`` (PostgreSQL's jsonb ``?``, ``?|``, ``?&`` operators) as ``??``. ``?`` and
        ``%`` inside string literals, quoted identifiers, comments and dollar-quoted bodies are
        left alone (``LIKE 'a%'`` works as written).

        Refused here, before anything is written (:class:`ConfigurationError`): several statements
        in one string; statements that control transactions (``BEGIN``, ``START``, ``COMMIT``,
        ``END``, ``ROLLBACK``, ``ABORT``, ``SAVEPOINT``, ``RELEASE``, ``PREPARE TRANSACTION``) or
        change the connection beyond the commit (``PRAGMA``, ``ATTACH``, ``DETACH``, ``SET``
        except ``SET LOCAL``/``SET CONSTRAINTS``, ``RESET``, ``DISCARD``); statements that cannot
        run inside a transaction (``VACUUM``, ``COPY``, ``CREATE``/``DROP``/``ALTER``
        ``DATABASE``/``TABLESPACE``/``SYSTEM``, ``… INDEX CONCURRENTLY``); numbered placeholders
        (``?1``); and a placeholder count that differs from ``len(params)``. At commit time the
        statements run inside a savepoint, and the store checks afterwards that its transaction
        is still the one it opened (otherwise the commit fails and nothing is written). Redis
        stores refuse writes that carry SQL.
        """
        if not isinstance(sql, str) or not sql.strip():
            raise ConfigurationError(f"sql must be a non-empty str, got {sql!r}")
        if isinstance(params, (str, bytes)) or not isinstance(params, Sequence):
            raise ConfigurationError(f"params must be a sequence, got {params!r}")
        check_statement(sql, params)
        self.statements.append((sql, tuple(params)))
        return self

    def copy(self) -> Writes:
        """An independent copy (sinks add their labels to a copy of the user's writes)."""
        out = Writes(None, dict(self.puts), {k: list(v) for k, v in self.batch_rows.items()}, list(self.labels),
                     list(self.statements))
        out._counters = {ns: dict(amounts) for ns, amounts in self._counters.items()}
        out.dropped_positions = list(self.dropped_positions)
        out._plain_ints = self._plain_ints
        return out

    def __bool__(self) -> bool:
        return bool(self._counters or self.puts or self.batch_rows or self.labels or self.statements
                    or self.dropped_positions)
