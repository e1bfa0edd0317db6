"""The parts of the transactional store, one small interface per job.

:class:`~dstream_exactly_once.TransactionalStore` is their composition and every backend
implements all of them; a caller that needs one job types against that part alone:

- :class:`EpochStore` — ``start_epoch``, ``current_epoch``: the committer, operator actions, sinks;
- :class:`PositionStore` — ``load_positions``, ``load_offsets``, ``reset_positions``: the committer,
  ``dstream-eo offsets``, the offset export;
- :class:`BatchLog` — the offset log and the commit log (``log_batch``, ``get_batch``,
  ``last_logged_batch_id``, ``last_committed_batch_id``, ``is_committed``, ``pending_batches``):
  the committer, ``dstream-eo batches``, the batch skip;
- :class:`LogRetention` — ``purge_logs``: the committer;
- :class:`CommitStore` — ``commit``, ``mark_committed``: the output patterns, sinks, the batch skip;
- :class:`HeartbeatStore` — ``heartbeat``, ``load_heartbeat`` and the epochs they are judged
  against: the driver's heartbeat and every live-driver check;
- :class:`AppDirectory` — ``list_apps``: ``dstream-eo lag`` and the CLI's app look-up;
- :class:`AppRetirement` — ``app_inventory``, ``delete_app``: ``dstream-eo retire``;
- :class:`ResultReader` — ``get_value``, ``get_values``, ``get_batch_rows``, ``has_label``: sinks
  (label checks), the CLI's label checks, the demo.

Each write is a public method that checks its arguments (before anything is written) and a private
``_…`` transaction the backend provides; reads are the backend's own. Every part is scoped to one
application (:attr:`StorePart.app_id`) of the store at :attr:`StorePart.url`.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from typing import Any, Dict, List, Mapping, Optional, Sequence

from ..core._ranges import Position, SourceRange, legacy_range_type
from ..errors import ConfigurationError
from . import _commit_args as checks
from . import _commit_rules as rules
from ._writes import CommitOutcome, PlannedBatch, Writes

__all__ = [
    "AppDirectory",
    "AppRetirement",
    "BatchLog",
    "CommitStore",
    "EpochStore",
    "HeartbeatStore",
    "LogRetention",
    "PositionStore",
    "ResultReader",
    "StorePart",
]


class StorePart(ABC):  # noqa: B024 - the common root names what every part is scoped by
    """What every part of a store shares: the store's URL and the one application it serves."""

    #: The store's URL (shown only through :func:`~dstream_exactly_once.stores._url.redact_url`).
    url: str
    #: The application whose state this store reads and writes.
    app_id: str


class EpochStore(StorePart):
    """Epochs (fencing tokens): a starting driver or an operator action takes a new one, and every
    write carries it; a write with an older epoch than the stored one is refused
    (:class:`~dstream_exactly_once.errors.FencedError`)."""

    @abstractmethod
    def start_epoch(self) -> int:
        """Take a new epoch (fencing token) for a starting driver: atomically stored + 1."""

    @abstractmethod
    def current_epoch(self) -> int:
        """The newest epoch taken (0 when none was)."""


class PositionStore(StorePart):
    """Committed positions: the next position to read of each stream partition, by position key,
    with the source's optional document beside it."""

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


class BatchLog(StorePart):
    """The offset log (each batch's planned ranges, written before it runs) and the commit log
    (the ids of committed batches): what a restarted driver replays, what operators list."""

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

    def newest_entry_layout(self) -> Optional[int]:
        """The store layout whose encoding the app's newest offset-log entry has: ``3`` (this version),
        ``2`` (a JSON array of ranges encoded one by one: logged by a release of layout 1 or 2, which
        ran one Spark task per range), or ``None`` (no entry, or a store that cannot tell). Never writes."""
        return None

    @abstractmethod
    def last_committed_batch_id(self) -> Optional[int]:
        """The highest batch id in the commit log."""

    @abstractmethod
    def is_committed(self, batch_id: int) -> bool:
        """Whether ``batch_id`` is in the commit log."""

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


class LogRetention(StorePart):
    """Retention of the offset log and the commit log (results are never purged)."""

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


class CommitStore(StorePart):
    """The exactly-once transaction: results, new positions, incident records and the commit-log
    entry in one epoch-checked, compare-and-set transaction (the protocol of
    :mod:`~dstream_exactly_once.stores._base`)."""

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
        :meth:`~BatchLog.log_batch`: one durable transaction per batch (``commit_each_batch(...,
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
        """The commit transaction: the protocol of the store module's docstring, for a checked ``plan``."""

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


class HeartbeatStore(EpochStore):
    """The running driver's heartbeat, judged against the current epoch (a heartbeat of an older
    epoch is a fenced driver's): what operator actions check before they take an epoch."""

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


class AppDirectory(StorePart):
    """The applications a store holds state of (one store URL may serve many apps)."""

    @abstractmethod
    def list_apps(self) -> List[str]:
        """Every application id with state in this store (the store's own ``app_id`` or not), sorted.
        An application appears once something was written for it (its first epoch)."""


class AppRetirement(StorePart):
    """Everything stored of one application, counted and deleted as a whole (retiring an app).

    An inventory row is ``{"kind", "namespace", "count"}``: ``kind`` is one of :data:`INVENTORY_KINDS`
    (``namespace`` names the value or batch-row namespace, ``None`` for the other kinds; a key the
    store does not recognise under the app's prefix is kind ``other`` with its name there), ``count``
    how many entries of that kind (positions, log entries, value keys, batch-row entries — one per
    batch and partition —, labels; 1 for the epoch record, the heartbeat, the commit marker).
    """

    @abstractmethod
    def app_inventory(self) -> List[Dict[str, Any]]:
        """What is stored of this application, one row per kind (and namespace), sorted; empty when
        nothing is. Reads only."""

    def delete_app(self, epoch: int) -> List[Dict[str, Any]]:
        """Delete everything stored of this application — epoch record, positions, position log,
        offset log, commit log, values, batch rows, labels, heartbeat — in one transaction (one
        script on Redis), if ``epoch`` is still the current epoch (else
        :class:`~dstream_exactly_once.errors.FencedError` and nothing is deleted); returns the
        inventory deleted. Other applications are not touched.

        Afterwards the application has no epoch: a driver still holding one of its epochs is refused
        by the epoch check of its next write (:class:`~dstream_exactly_once.errors.FencedError`) and
        writes nothing; the app id can be used again by a new start.
        """
        return self._delete_app(checks.check_epoch_arg(epoch))

    @abstractmethod
    def _delete_app(self, epoch: int) -> List[Dict[str, Any]]:
        """The transaction of :meth:`delete_app` (argument checked)."""


#: The kinds of :meth:`AppRetirement.app_inventory` rows.
INVENTORY_KINDS = ("epoch", "layout", "positions", "position documents", "position log", "offset log", "commit log",
                   "commit marker", "values", "value bounds", "batch rows", "labels", "heartbeat", "other")


def inventory_row(kind: str, namespace: Optional[str], count: int) -> Dict[str, Any]:
    """One :meth:`AppRetirement.app_inventory` row."""
    return {"kind": kind, "namespace": namespace, "count": int(count)}


def sorted_inventory(rows: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """``rows`` without empty ones, in :data:`INVENTORY_KINDS` order, then by namespace."""
    order = {k: i for i, k in enumerate(INVENTORY_KINDS)}
    return sorted((r for r in rows if r["count"] > 0),
                  key=lambda r: (order.get(r["kind"], len(order)), r["namespace"] or ""))


class ResultReader(StorePart):
    """Reading back what commits wrote: values, time-keyed batch rows and applied labels."""

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
