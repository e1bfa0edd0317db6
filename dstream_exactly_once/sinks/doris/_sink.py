"""The exactly-once Doris sink: one Stream Load per Spark partition per batch, decided by the offset store.

See :mod:`dstream_exactly_once.sinks.doris` for the protocol (who decides, crash points) and the
delivery guarantee of each mode. The sink talks to Doris only through the public API of
:class:`~._client.DorisStreamLoadClient`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence

from ..._checks import is_int
from ...core._ranges import SourceRange
from ...errors import ConfigurationError, SinkError
from ...stores._base import CommitOutcome, PlannedBatch, TransactionalStore, Writes
from .._labels import LabelGenerator
from ._client import DorisStreamLoadClient
from ._protocol import TxnOutcome, int_or_none

__all__ = ["DorisSink", "PartitionWrite"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PartitionWrite:
    """What :meth:`DorisSink.write_partition` did for one partition of one batch.

    ``outcome`` is the store's (APPLIED, or REPLAYED when the partition was committed before);
    ``doris_replayed`` says Doris already had the label's rows (a re-sent load).
    """

    label: Optional[str]
    outcome: CommitOutcome
    txn_id: Optional[int]
    loaded_rows: int
    doris_replayed: bool


class DorisSink:
    """Exactly-once output of DStream partitions into one Doris table.

    Unit of parallelism: one Stream Load per Spark partition per batch, with the label
    ``app + batch id + partition id`` (the app part is ``{store.app_id}.{table}`` unless
    ``label_app_id`` is given, so two tables of one database never share labels). Partition
    ``p`` of a batch is the batch's offset range ``p`` (the KafkaRDD has one partition per range);
    its store commit advances that range only, and the driver marks the batch committed once all
    partitions are in (``TransactionalStore.mark_committed``).

    Delivery guarantee: exactly-once in two-phase mode (default) — see the package docstring for
    the protocol and the pre-commit-timeout caveat; with ``two_phase_commit=False`` exactly-once
    while replays happen within Doris's label memory (~12 h), at-least-once past it; with
    ``use_labels=False`` at-least-once.

    Call :meth:`write_partition` on executors (``store``, ``epoch`` and ``batch`` pickle) and
    :meth:`recover` on the driver after ``store.start_epoch()`` for each pending batch, before it
    is replayed.
    """

    def __init__(
        self,
        client: DorisStreamLoadClient,
        *,
        two_phase_commit: bool = True,
        use_labels: bool = True,
        strict_labels: bool = False,
        label_app_id: Optional[str] = None,
        namespace: str = "__doris__",
    ) -> None:
        if not isinstance(client, DorisStreamLoadClient):
            raise ConfigurationError(f"client must be a DorisStreamLoadClient, got {client!r}")
        if two_phase_commit and not use_labels:
            raise ConfigurationError("two_phase_commit=True needs labels (use_labels=True)")
        if label_app_id is not None:
            LabelGenerator(label_app_id, strict=strict_labels)  # validate now, not on an executor
        if not isinstance(namespace, str) or not namespace:
            raise ConfigurationError(f"namespace must be a non-empty str, got {namespace!r}")
        self.client = client
        self.two_phase_commit = bool(two_phase_commit)
        self.use_labels = bool(use_labels)
        self.strict_labels = bool(strict_labels)
        self.label_app_id = label_app_id
        self.namespace = namespace

    def __repr__(self) -> str:
        return (f"DorisSink({self.client!r}, two_phase_commit={self.two_phase_commit}, "
                f"use_labels={self.use_labels})")

    def labels(self, app_id: str) -> LabelGenerator:
        """The label generator of application ``app_id`` (the store's ``app_id``)."""
        source = self.label_app_id if self.label_app_id is not None else f"{app_id}.{self.client.table}"
        return LabelGenerator(source, strict=self.strict_labels)

    def label_for(self, app_id: str, batch_id: int, partition_id: int) -> str:
        """The label of partition ``partition_id`` of batch ``batch_id`` of ``app_id``."""
        return self.labels(app_id).label(batch_id, partition_id)

    # ------------------------------------------------------------------ store helpers
    def _writes(self, extra: Optional[Writes], label: Optional[str], record: Mapping[str, Any]) -> Writes:
        writes = extra.copy() if extra else Writes()
        if label is not None:
            writes.add_label(label)
            writes.put(self.namespace, label, {**record, "table": f"{self.client.db}.{self.client.table}"})
        return writes

    def _recorded_txn(self, store: TransactionalStore, label: str) -> Optional[int]:
        record = store.get_value(self.namespace, label)
        return int_or_none(record.get("txn_id")) if isinstance(record, dict) else None

    @staticmethod
    def _ranges(batch: PlannedBatch, partition_id: int, ranges: Optional[Sequence[SourceRange]]) -> List[SourceRange]:
        if ranges is not None:
            return list(ranges)
        if not is_int(partition_id) or not (
            0 <= partition_id < len(batch.ranges)
        ):
            raise ConfigurationError(
                f"partition id {partition_id!r} has no offset range in batch {batch.batch_id} "
                f"({len(batch.ranges)} ranges); pass ranges= explicitly"
            )
        return [batch.ranges[partition_id]]

    def _ensure_committed(self, store: TransactionalStore, label: str) -> Optional[TxnOutcome]:
        txn_id = self._recorded_txn(store, label)
        if txn_id is None:
            return None  # an empty partition, or a labels-only load: nothing pre-committed
        return self.client.resolve_in_doubt(label, txn_id, "commit")

    # ------------------------------------------------------------------ the write path
    def write_partition(
        self,
        store: TransactionalStore,
        epoch: int,
        batch: PlannedBatch,
        partition_id: int,
        rows: Iterable[Any],
        *,
        writes: Optional[Writes] = None,
        ranges: Optional[Sequence[SourceRange]] = None,
    ) -> PartitionWrite:
        """Load ``rows`` of partition ``partition_id`` and commit its offsets, exactly once.

        ``writes`` (optional) are further results of this partition, committed in the same store
        transaction. Store errors (fencing, offset conflicts) propagate after the pre-committed
        Doris transaction is aborted; a failed Doris commit after the store commit raises
        :class:`SinkError` and leaves the decision (commit) to the next attempt or :meth:`recover`.
        """
        ranges_ = self._ranges(batch, partition_id, ranges)
        label = self.label_for(store.app_id, batch.batch_id, partition_id) if self.use_labels else None
        if label is not None and store.has_label(label):
            if self.two_phase_commit:
                self._ensure_committed(store, label)
            return PartitionWrite(label, CommitOutcome.REPLAYED, self._recorded_txn(store, label), 0, False)
        body = self.client.encode_rows(rows)

        def commit(record: Mapping[str, Any]) -> CommitOutcome:
            return store.commit(epoch, batch, self._writes(writes, label, record), ranges=ranges_,
                                complete_batch=False)

        if not body:  # nothing for Doris: record the label and offsets only
            return PartitionWrite(label, commit({"txn_id": None, "rows": 0}), None, 0, False)
        if not self.two_phase_commit:
            result = self.client.stream_load(label, body, two_phase_commit=False)
            outcome = commit({"txn_id": None, "rows": result.loaded_rows})
            return PartitionWrite(label, outcome, result.txn_id, result.loaded_rows, result.replayed)

        assert label is not None
        result = self.client.stream_load(label, body, two_phase_commit=True)
        if result.replayed:  # Doris finished this label before; the store decides whether it counts
            outcome = commit({"txn_id": result.txn_id, "rows": 0})
            return PartitionWrite(label, outcome, result.txn_id, 0, True)
        txn_id = result.txn_id
        if txn_id is None:
            self.client.abort_txn(label)
            raise SinkError(f"{self.client.describe(label)}: pre-commit answered without a transaction id")
        try:
            outcome = commit({"txn_id": txn_id, "rows": result.loaded_rows})
        except Exception as exc:  # on an interrupt the transaction stays in doubt for recover()
            if not self._after_failed_store_commit(store, label, txn_id, exc):
                raise
            outcome = CommitOutcome.APPLIED  # the store did commit (an ambiguous failure)
        if outcome is CommitOutcome.REPLAYED:
            # The offsets were committed before without this label: our rows must not count.
            self.client.abort_txn(txn_id)
            return PartitionWrite(label, outcome, txn_id, 0, False)
        try:
            self.client.commit_txn(txn_id)
        except SinkError as exc:
            raise SinkError(
                f"{self.client.describe(label)}: the offset store committed label {label!r} but the Doris "
                f"commit of transaction {txn_id} failed; the next attempt or DorisSink.recover commits it: {exc}"
            ) from exc
        return PartitionWrite(label, outcome, txn_id, result.loaded_rows, False)

    def _after_failed_store_commit(self, store: TransactionalStore, label: str, txn_id: int,
                                   exc: Exception) -> bool:
        """After a failed store commit: True if the store recorded our transaction anyway."""
        try:
            recorded = store.has_label(label) and self._recorded_txn(store, label) == txn_id
        except Exception as check_exc:  # noqa: BLE001 - the original error is what the caller sees
            logger.error("store commit of label %r failed (%s) and the store cannot be asked whether it "
                         "recorded it (%s); transaction %d stays in doubt until recover()", label, exc,
                         check_exc, txn_id)
            return False
        if recorded:
            logger.warning("store commit of label %r reported %s but recorded it; committing", label, exc)
            return True
        try:
            self.client.abort_txn(txn_id)
        except Exception as abort_exc:  # noqa: BLE001 - Doris aborts it after its pre-commit timeout
            logger.error("could not abort transaction %d of label %r after the store commit failed: %s",
                         txn_id, label, abort_exc)
        return False

    def recover(self, store: TransactionalStore, batch: PlannedBatch, *,
                partition_ids: Optional[Iterable[int]] = None) -> Dict[str, TxnOutcome]:
        """Resolve in-doubt two-phase loads of a logged batch, as the store decided.

        Call on the driver after ``store.start_epoch()`` (older writers are fenced then) and
        before replaying ``batch``. A label the store recorded is committed; a pre-committed or
        running one it did not record is aborted, freeing the label for the replay. Returns
        ``{label: outcome}`` for every label checked (``ALREADY_ABORTED`` also for a label never
        used); partitions the store recorded without a Doris load (empty ones) are skipped.
        No-op without two-phase commit.
        """
        if not self.two_phase_commit:
            return {}
        generator = self.labels(store.app_id)
        ids = range(len(batch.ranges)) if partition_ids is None else partition_ids
        out: Dict[str, TxnOutcome] = {}
        for partition_id in ids:
            label = generator.label(batch.batch_id, partition_id)
            if store.has_label(label):
                outcome = self._ensure_committed(store, label)
            else:
                outcome = self.client.resolve_in_doubt(label, None, "abort")
            if outcome is not None:
                out[label] = outcome
        return out
