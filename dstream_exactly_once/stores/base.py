"""The transactional store contract: offsets, results, batch log and labels in one place.

Every backend (SQLite, PostgreSQL, Redis) implements :class:`TransactionalStore`; the shared
contract suite in ``tests/contract/`` runs against each. One store instance belongs to one
*application* (``app_id``): all of its keys/rows are scoped by it.

Commit protocol (``DESIGN.md`` §4), all inside ONE backend transaction:

1. **Epoch check** — the application's stored epoch must equal the committer's epoch; a newer
   epoch means another driver took over → :class:`~dstream_exactly_once.errors.FencedError`.
2. **Commit log** — a batch id already in the commit log is an idempotent replay → nothing
   written, :attr:`CommitOutcome.REPLAYED` (for per-partition commits too: once the batch is
   committed whole, a late replay of one of its partitions must not conflict with later offsets).
3. **Offset compare-and-set**, per non-empty range: stored offset absent or ``== fromOffset`` →
   apply; ``== untilOffset`` → already committed; anything else →
   :class:`~dstream_exactly_once.errors.OffsetConflictError` naming the partition and both offsets.
   All non-empty ranges already at ``untilOffset`` → REPLAYED; a mix of applied and committed
   ranges → conflict (nothing written).
4. **Writes** — increments, upserts, time-keyed batch rows (replaced, never appended), labels.
5. New offsets (``untilOffset`` of each range; an empty range only records its offset for a
   partition that has none) and, with ``complete_batch``, the commit-log entry.

Any error → the whole transaction is rolled back: nothing of it is visible.
"""

from __future__ import annotations

import enum
import json
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from ..core.ranges import SourceRange, decode_range, encode_range
from ..errors import ConfigurationError
from ..offsets import OffsetRange, TopicAndPartition

__all__ = ["SCHEMA_VERSION", "CommitOutcome", "PlannedBatch", "TransactionalStore", "Writes"]

#: Version of the on-store layout this library writes; a store with a higher one is refused.
SCHEMA_VERSION = 1

Number = float | int


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

    def to_json(self) -> str:
        return json.dumps({"batch_id": self.batch_id, "batch_time_ms": self.batch_time_ms,
                           "ranges": [encode_range(r) for r in self.ranges]}, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | bytes) -> PlannedBatch:
        d = json.loads(text)
        return cls(int(d["batch_id"]), int(d["batch_time_ms"]), tuple(decode_range(r) for r in d["ranges"]))


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
    if not isinstance(key, str):
        raise ConfigurationError(f"{what} must be a str, got {key!r}")
    return key


@dataclass
class Writes:
    """The results of one batch (or one partition of it), applied in the commit transaction.

    - :meth:`incr` adds a number to a keyed value (merge by addition) — replays never re-add.
    - :meth:`put` upserts a keyed JSON value (last write wins).
    - :meth:`put_batch_rows` stores rows *under the batch id* (time-keyed writes): a replay
      replaces them, so each batch's rows are present exactly once.
    - :meth:`add_label` records a label as applied (label-idempotent sinks).

    Values are validated eagerly: anything JSON cannot hold raises before anything is written.
    """

    increments: Dict[Tuple[str, str], Number] = field(default_factory=dict)
    puts: Dict[Tuple[str, str], str] = field(default_factory=dict)
    batch_rows: Dict[str, List[str]] = field(default_factory=dict)
    labels: List[str] = field(default_factory=list)
    statements: List[Tuple[str, Tuple[Any, ...]]] = field(default_factory=list)

    def incr(self, namespace: str, key: str, amount: Number = 1) -> Writes:
        _check_key("namespace", namespace)
        _check_key("key", key)
        if isinstance(amount, bool) or not isinstance(amount, (int, float)) or (
            isinstance(amount, float) and not math.isfinite(amount)
        ):
            raise ConfigurationError(f"increment for {namespace}/{key} must be a finite number, got {amount!r}")
        k = (namespace, key)
        self.increments[k] = self.increments.get(k, 0) + amount
        return self

    def put(self, namespace: str, key: str, value: Any) -> Writes:
        _check_key("namespace", namespace)
        _check_key("key", key)
        self.puts[(namespace, key)] = _check_json(f"value for {namespace}/{key}", value)
        return self

    def put_batch_rows(self, namespace: str, rows: Iterable[Any]) -> Writes:
        _check_key("namespace", namespace)
        encoded = [_check_json(f"row of {namespace}", r) for r in rows]
        self.batch_rows.setdefault(namespace, []).extend(encoded)
        return self

    def add_label(self, label: str) -> Writes:
        self.labels.append(_check_key("label", label))
        return self

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Writes:
        """Run your own SQL (``?`` placeholders) inside the commit transaction — SQL stores only.

        The statement sees and changes your own tables atomically with the offsets; a failing
        statement rolls the whole commit back. Redis stores refuse writes that carry SQL.
        """
        if not isinstance(sql, str) or not sql.strip():
            raise ConfigurationError(f"sql must be a non-empty str, got {sql!r}")
        if isinstance(params, (str, bytes)) or not isinstance(params, Sequence):
            raise ConfigurationError(f"params must be a sequence, got {params!r}")
        self.statements.append((sql, tuple(params)))
        return self

    def copy(self) -> Writes:
        """An independent copy (sinks add their labels to a copy of the user's writes)."""
        return Writes(dict(self.increments), dict(self.puts), {k: list(v) for k, v in self.batch_rows.items()},
                      list(self.labels), list(self.statements))

    def __bool__(self) -> bool:
        return bool(self.increments or self.puts or self.batch_rows or self.labels or self.statements)


class TransactionalStore(ABC):
    """Offsets, results, the offset/commit log and applied labels of one application.

    Unit of atomicity: one :meth:`commit` call (a whole batch, or one partition's range).
    Delivery guarantee: exactly-once for everything written through :meth:`commit` — offsets
    and results become visible together or not at all, replays are detected by the commit log
    and the offset compare-and-set, and zombie drivers are fenced by epochs.

    Instances pickle as ``(url, app_id)`` so executors can reopen them; connections are
    opened lazily in each process. ``repr`` and error messages never contain passwords.
    """

    scheme: str = ""

    def __init__(self, url: str, app_id: str) -> None:
        from .app_id import check_app_id  # the one rule for every store: 1..200 of [A-Za-z0-9._:-]
        check_app_id(app_id)
        self.url = url
        self.app_id = app_id

    def __reduce__(self) -> Any:
        return (type(self), (self.url, self.app_id))

    def __repr__(self) -> str:
        from .url import redact_url

        return f"{type(self).__name__}({redact_url(self.url)!r}, app_id={self.app_id!r})"

    # ---------------------------------------------------------------- lifecycle
    def connect(self) -> TransactionalStore:
        """Connect now and create or check the layout, instead of at first use; returns ``self``.

        Raises :class:`StoreUnavailableError`, :class:`StoreAuthError` or
        :class:`StoreVersionError` so a bad store is reported before a stream starts.
        """
        self.current_epoch()
        return self

    @abstractmethod
    def close(self) -> None:
        """Close connections held by this process (safe to call twice)."""

    def __enter__(self) -> TransactionalStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- epochs
    @abstractmethod
    def start_epoch(self) -> int:
        """Take a new epoch (fencing token) for a starting driver: atomically stored + 1."""

    @abstractmethod
    def current_epoch(self) -> int:
        """The newest epoch taken (0 when none was)."""

    # ---------------------------------------------------------------- offsets
    @abstractmethod
    def load_offsets(self) -> Dict[TopicAndPartition, int]:
        """Committed offsets: for each partition, the next offset to read."""

    # ---------------------------------------------------------------- offset log / commit log
    @abstractmethod
    def log_batch(self, epoch: int, batch: PlannedBatch) -> None:
        """Write ``batch`` to the offset log before it runs (epoch-checked).

        Idempotent for an identical entry; an entry with the same id and other ranges/time →
        :class:`OffsetConflictError`.
        """

    @abstractmethod
    def get_batch(self, batch_id: int) -> Optional[PlannedBatch]:
        """The offset-log entry of ``batch_id``, if any."""

    @abstractmethod
    def last_logged_batch_id(self) -> Optional[int]:
        """The highest batch id in the offset log."""

    @abstractmethod
    def last_committed_batch_id(self) -> Optional[int]:
        """The highest batch id in the commit log."""

    @abstractmethod
    def is_committed(self, batch_id: int) -> bool:
        """Whether ``batch_id`` is in the commit log."""

    @abstractmethod
    def purge_logs(self, epoch: int, keep: int) -> int:
        """Drop old offset-log and commit-log entries; returns how many batches were dropped.

        Only committed batches are dropped, and only those with ``batch_id <= last committed -
        keep``: the newest ``keep`` committed batches, every uncommitted one (the ones a restart
        replays) and all results (values, batch rows, labels) stay. Epoch-checked like a commit.
        Structured Streaming's equivalent is ``spark.sql.streaming.minBatchesToRetain``.
        """

    def pending_batches(self) -> List[PlannedBatch]:
        """Logged but uncommitted batches, in id order: these must be replayed first."""
        last = self.last_logged_batch_id()
        if last is None:
            return []
        out = []
        first = (self.last_committed_batch_id() or -1) + 1
        for bid in range(first, last + 1):
            if not self.is_committed(bid):
                b = self.get_batch(bid)
                if b is not None:
                    out.append(b)
        return out

    # ---------------------------------------------------------------- the transaction
    @abstractmethod
    def commit(
        self,
        epoch: int,
        batch: PlannedBatch,
        writes: Writes,
        *,
        ranges: Optional[Sequence[OffsetRange]] = None,
        complete_batch: bool = True,
    ) -> CommitOutcome:
        """Apply ``writes`` and advance offsets of ``ranges`` (default: all of ``batch``) atomically.

        ``complete_batch=True`` also writes the commit-log entry of ``batch``. Per-partition
        output passes one range and ``complete_batch=False``; the driver then calls
        :meth:`mark_committed` once every partition committed.
        """

    @abstractmethod
    def mark_committed(self, epoch: int, batch: PlannedBatch) -> CommitOutcome:
        """Write the commit-log entry of ``batch`` after all its ranges were committed.

        Raises :class:`OffsetConflictError` if some range's stored offset is not its
        ``untilOffset``; REPLAYED when the entry already exists.
        """

    # ---------------------------------------------------------------- reading results
    @abstractmethod
    def get_value(self, namespace: str, key: str) -> Any:
        """A value written by ``incr`` or ``put`` (``None`` when absent)."""

    @abstractmethod
    def get_values(self, namespace: str) -> Dict[str, Any]:
        """All values of ``namespace``."""

    @abstractmethod
    def get_batch_rows(self, namespace: str) -> Dict[int, List[Any]]:
        """Time-keyed rows of ``namespace``: ``{batch_id: rows}`` (a batch's partitions in order)."""

    @abstractmethod
    def has_label(self, label: str) -> bool:
        """Whether ``label`` was recorded as applied in a committed transaction."""
