"""The transactional store contract: positions, results, batch log and labels in one place.

Every backend (SQLite, PostgreSQL, Redis) implements :class:`TransactionalStore`; the shared
contract suite in ``tests/contract/`` runs against each. One store instance belongs to one
*application* (``app_id``): all of its keys/rows are scoped by it. Stores know *positions*, not
sources: a position is the next position to read of one stream partition, named by the range's
``position_key`` (Kafka ``"topic/partition"``, files ``"file:<id>"``), with an optional JSON
document beside it (:meth:`SourceRange.position_meta`, e.g. a file's fingerprint).

Commit protocol, all inside ONE backend transaction:

1. **Epoch check** — the application's stored epoch must equal the committer's epoch; a newer
   epoch means another driver took over → :class:`~dstream_exactly_once.errors.FencedError`.
2. **Commit log** — a batch id already in the commit log is an idempotent replay → nothing
   written, :attr:`CommitOutcome.REPLAYED` (for per-partition commits too: once the batch is
   committed whole, a late replay of one of its partitions must not conflict with later offsets).
3. **Flat rule** (a whole batch: ``ranges=None``, ``complete_batch=True``): the marker of the last
   batch committed whole under this epoch decides — the next batch id applies without comparing
   positions, any other is refused (:class:`~dstream_exactly_once.errors.OffsetConflictError`);
   without such a marker (the first commit of an epoch, or positions moved by a per-partition
   commit, :meth:`mark_committed` or :meth:`reset_positions`) step 3b decides
   (:func:`._commit_rules.decide_flat`).
3b. **Position compare-and-set**, per non-empty range: stored position absent or ``== start`` →
   apply; ``== end`` → already committed; anything else →
   :class:`~dstream_exactly_once.errors.OffsetConflictError` naming the partition and both offsets.
   All non-empty ranges already at ``end`` → REPLAYED; a mix of applied and committed ranges →
   conflict (nothing written).
4. **Writes** — increments, upserts, time-keyed batch rows (replaced, never appended), labels.
5. New positions (``end`` of each range, with its ``position_meta()``; an empty range only records
   its position for a partition that has none) and, with ``complete_batch``, the commit-log entry.

Any error → the whole transaction is rolled back: nothing of it is visible.

Reading never writes (a launch that fails writes nothing): :meth:`connect` and
every read method only check reachability, credentials and the layout version, and read. The
layout is created — or upgraded from an older version — by the first *write* (``start_epoch``,
``log_batch``, ``commit``, ``mark_committed``, ``purge_logs``, ``reset_positions``), inside that
write's transaction. Reads of a store with no layout yet return empty results (no positions, no
batches, epoch 0); reads of a store in an older layout read it as it is.

Layout versions (:data:`SCHEMA_VERSION`): **1** — Kafka offsets only (SQL ``deo_offsets(app,
topic, partition_id, next_offset)``; Redis hash ``offsets``). **2** — positions by key with an
optional document (SQL ``deo_positions(app, pkey, next_pos, meta)``; Redis ``offsets`` plus the
``pmeta`` hash). Offset-log entries of version 1 decode unchanged. A store written by a *newer*
version is refused with :class:`~dstream_exactly_once.errors.StoreVersionError`. The one-time
upgrade from version 1 runs in one transaction; stop every process of the older version first.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from typing import Any, Dict, List, Mapping, Optional, Sequence

from ..core.ranges import Position, SourceRange, legacy_range_type
from ..errors import ConfigurationError
from . import _commit_args as checks
from . import _commit_rules as rules
from .writes import RESERVED_NAMESPACE, CommitOutcome, PlannedBatch, Writes

__all__ = ["RESERVED_NAMESPACE", "SCHEMA_VERSION", "CommitOutcome", "PlannedBatch", "TransactionalStore", "Writes"]

#: Version of the on-store layout this library writes; a store with a higher one is refused, one
#: with a lower one is upgraded on its first write (see the module docstring).
SCHEMA_VERSION = 2


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
        """Connect now and check the store, instead of at first use; returns ``self``. Writes nothing.

        Raises :class:`StoreUnavailableError`, :class:`StoreAuthError` or
        :class:`StoreVersionError` so a bad store is reported before a stream starts. The layout is
        created (or upgraded) later, by the first write.
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

    # ---------------------------------------------------------------- positions
    @abstractmethod
    def load_positions(self) -> Dict[str, Position]:
        """Committed positions: ``{position_key: Position(next position to read, document or None)}``."""

    def load_offsets(self) -> Dict[Any, int]:
        """Committed offsets in Spark 2.4's shape: ``{TopicAndPartition: next offset to read}``.

        The positions of the range kind with the bare-list offset-log encoding (Kafka's
        ``OffsetRange``), keyed by that kind's own partition name; positions of other sources are
        left out, and without that kind registered the result is empty. The store names no source:
        the range kind registry parses the keys.
        """
        legacy = legacy_range_type()
        out: Dict[Any, int] = {}
        if legacy is None:
            return out
        for key, pos in self.load_positions().items():
            tp = legacy.parse_position_key(key)
            if tp is not None:
                out[tp] = pos.offset
        return out

    def reset_positions(self, epoch: int, positions: Mapping[str, int],
                        documents: Optional[Mapping[str, Mapping[str, Any]]] = None) -> None:
        """Set the next position of each key in ``positions``, in one epoch-checked transaction;
        other positions, results and the logs stay. For operators (the CLI): the next batch planned
        after a restart starts at these positions.

        ``documents`` gives the JSON document stored beside a key's new position (a source that needs
        one to resume, such as a file's identity at that byte, must get it here); a key of
        ``positions`` without one has its document cleared. Every argument is checked before anything
        is written.
        """
        epoch = checks.check_epoch_arg(epoch)
        checked = checks.check_positions_arg(positions)
        self._reset_positions(epoch, checked, checks.check_documents_arg(documents, checked))

    @abstractmethod
    def _reset_positions(self, epoch: int, positions: Dict[str, int], documents: Dict[str, str]) -> None:
        """The transaction of :meth:`reset_positions` (arguments checked; ``documents`` as JSON texts)."""

    # ---------------------------------------------------------------- offset log / commit log
    def log_batch(self, epoch: int, batch: PlannedBatch) -> None:
        """Write ``batch`` to the offset log before it runs (epoch-checked).

        Idempotent for an identical entry; an entry with the same id and other ranges/time →
        :class:`OffsetConflictError`.
        """
        epoch, batch = checks.check_epoch_arg(epoch), checks.check_batch_arg(batch)
        rules.batch_ranges(batch)
        self._log_batch(epoch, batch)

    @abstractmethod
    def _log_batch(self, epoch: int, batch: PlannedBatch) -> None:
        """The transaction of :meth:`log_batch` (arguments checked)."""

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

    def purge_logs(self, epoch: int, keep: int) -> int:
        """Drop old offset-log and commit-log entries; returns how many batches were dropped.

        Only committed batches are dropped, and only those with ``batch_id <= last committed -
        keep``: the newest ``keep`` committed batches, every uncommitted one (the ones a restart
        replays) and all results (values, batch rows, labels) stay. Epoch-checked like a commit.
        Structured Streaming's equivalent is ``spark.sql.streaming.minBatchesToRetain``.
        """
        return self._purge_logs(checks.check_epoch_arg(epoch), checks.check_keep_arg(keep))

    @abstractmethod
    def _purge_logs(self, epoch: int, keep: int) -> int:
        """The transaction of :meth:`purge_logs` (arguments checked)."""

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
    def commit(
        self,
        epoch: int,
        batch: PlannedBatch,
        writes: Writes,
        *,
        ranges: Optional[Sequence[SourceRange]] = None,
        complete_batch: bool = True,
        log_entry: bool = False,
    ) -> CommitOutcome:
        """Apply ``writes`` and advance the positions of ``ranges`` (default: all of ``batch``) atomically.

        ``complete_batch=True`` also writes the commit-log entry of ``batch``. Per-partition
        output passes one range and ``complete_batch=False``; the driver then calls
        :meth:`mark_committed` once every partition committed. ``log_entry=True`` (whole batches only)
        also writes ``batch``'s offset-log entry in the same transaction, instead of an earlier
        :meth:`log_batch`: one durable transaction per batch (``commit_each_batch(...,
        offset_log="in_commit")``). An identical entry already logged is fine; another one with
        the same id is an :class:`OffsetConflictError`. Every argument is checked here, before the
        backend's transaction (:meth:`_commit`) starts.
        """
        plan = rules.plan_commit(epoch, batch, writes, ranges, complete_batch, log_entry)
        self._check_writes(plan.writes)
        return self._commit(plan)

    def _check_writes(self, writes: Writes) -> None:  # noqa: B027 - optional hook
        """Refuse writes this backend cannot apply (before anything is written)."""

    @abstractmethod
    def _commit(self, plan: rules.CommitPlan) -> CommitOutcome:
        """The commit transaction: the protocol of the module docstring, for a checked ``plan``."""

    def mark_committed(self, epoch: int, batch: PlannedBatch, *, drop_positions: Sequence[str] = ()) -> CommitOutcome:
        """Write the commit-log entry of ``batch`` after all its ranges were committed.

        ``drop_positions`` are position keys deleted in the same transaction (as
        :meth:`Writes.drop_position` does in :meth:`commit`; none of ``batch``'s ranges may have one).
        Raises :class:`OffsetConflictError` if some range's stored position is not its ``end``;
        REPLAYED (nothing deleted) when the entry already exists.
        """
        epoch, batch = checks.check_epoch_arg(epoch), checks.check_batch_arg(batch)
        todo, _ = rules.commit_ranges(batch, None)
        drop = rules.plan_commit(epoch, batch, Writes().drop_positions(drop_positions), None, True).writes
        return self._mark_committed(epoch, batch, todo, list(drop.dropped_positions))

    @abstractmethod
    def _mark_committed(self, epoch: int, batch: PlannedBatch, todo: List[SourceRange],
                        drop: Sequence[str] = ()) -> CommitOutcome:
        """The transaction of :meth:`mark_committed`: every range of ``todo`` (the batch's non-empty
        ranges) must be at its ``end``; the positions of ``drop`` are deleted."""

    # ---------------------------------------------------------------- operators: liveness, apps
    def heartbeat(self, epoch: int, doc: Mapping[str, Any]) -> None:
        """Record that the driver holding ``epoch`` is alive: ``doc`` (a JSON object: host, pid, last
        batch, time, …) replaces the previous heartbeat, in its own small epoch-checked transaction.

        A fenced epoch raises :class:`~dstream_exactly_once.errors.FencedError` and writes nothing.
        Heartbeats touch neither positions, results nor the logs, so they never conflict with a
        commit (SQL stores keep it as a document in the reserved value namespace ``__deo__``).
        """
        epoch = checks.check_epoch_arg(epoch)
        if not isinstance(doc, Mapping):
            raise ConfigurationError(f"heartbeat document must be a mapping, got {doc!r}")
        try:
            text = json.dumps(dict(doc), separators=(",", ":"), sort_keys=True, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ConfigurationError(f"heartbeat document cannot be stored as JSON: {doc!r} ({exc})") from exc
        self._heartbeat(epoch, text)

    @abstractmethod
    def _heartbeat(self, epoch: int, doc_json: str) -> None:
        """The transaction of :meth:`heartbeat` (arguments checked, ``doc_json`` a JSON object)."""

    @abstractmethod
    def load_heartbeat(self) -> Optional[Dict[str, Any]]:
        """The last heartbeat document written by :meth:`heartbeat` (``None`` if none was)."""

    @abstractmethod
    def list_apps(self) -> List[str]:
        """Every application id with state in this store (the store's own ``app_id`` or not), sorted.
        An application appears once something was written for it (its first epoch)."""

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
