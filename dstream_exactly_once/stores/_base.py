"""The transactional store contract: positions, results, batch log and labels in one place.

Every backend (SQLite, PostgreSQL, Redis) implements :class:`TransactionalStore`, the composition
of the small interfaces of :mod:`._interfaces` (epochs, positions, the batch log, retention, the
commit, the heartbeat, the app directory, retiring an app, reading results); the shared contract suite in
``tests/contract/`` runs against each. One store instance belongs to one
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
   A commit the flat rule applies writes its positions as one entry of the position log
   (:mod:`._position_log`); every other writer of positions folds that log into the rows first.

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
``pmeta`` hash). **3** — version 2 plus the position log (SQL ``deo_pos_log``; Redis ``plog``), and
offset-log entries in each range kind's encoding of many ranges. Offset-log entries of versions 1
and 2 decode unchanged. A store written by a *newer* version is refused with
:class:`~dstream_exactly_once.errors.StoreVersionError`. The one-time upgrade from an older version
runs in one transaction; stop every process of the older version first.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

from . import _interfaces as parts
from ._writes import RESERVED_NAMESPACE, CommitOutcome, PlannedBatch, Writes

__all__ = ["RESERVED_NAMESPACE", "SCHEMA_VERSION", "CommitOutcome", "PlannedBatch", "TransactionalStore", "Writes"]

#: Version of the on-store layout this library writes; a store with a higher one is refused, one
#: with a lower one is upgraded on its first write (see the module docstring).
SCHEMA_VERSION = 3


class TransactionalStore(parts.HeartbeatStore, parts.EpochStore, parts.PositionStore, parts.BatchLog,
                         parts.LogRetention, parts.CommitStore, parts.AppDirectory, parts.AppRetirement,
                         parts.ResultReader):
    """Offsets, results, the offset/commit log and applied labels of one application.

    Unit of atomicity: one :meth:`commit` call (a whole batch, or one partition's range).
    Delivery guarantee: exactly-once for everything written through :meth:`commit` — offsets
    and results become visible together or not at all, replays are detected by the commit log
    and the offset compare-and-set, and zombie drivers are fenced by epochs.

    The methods come from the parts in :mod:`._interfaces`; this class adds the lifecycle (connect,
    close, pickling). Instances pickle as ``(url, app_id)`` so executors can reopen them; connections
    are opened lazily in each process. ``repr`` and error messages never contain passwords.
    """

    scheme: str = ""

    def __init__(self, url: str, app_id: str) -> None:
        from ._app_id import check_app_id  # the one rule for every store: 1..200 of [A-Za-z0-9._:-]
        check_app_id(app_id)
        self.url = url
        self.app_id = app_id

    def __reduce__(self) -> Any:
        return (type(self), (self.url, self.app_id))

    @property
    def display_url(self) -> str:
        """The store's URL as a message, a log line or a report may show it: the password replaced."""
        from ._url import redact_url

        return redact_url(self.url)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.display_url!r}, app_id={self.app_id!r})"

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
