"""Skipping a batch that fails every time: an audited, epoch-fenced commit without output.

A batch in the offset log is replayed with the same id and ranges until it commits. When its output
fails deterministically (a record that hits a bug in the output function, an undecodable record, a
SQL statement the database refuses), every replay fails the same way. :func:`skip_batch` moves the
application past it:

1. **checks, writing nothing**: every named batch is in the offset log and not committed, the named
   batches are the oldest pending ones (pending batches are replayed in id order, so a batch can be
   skipped only together with every older pending one), each range's stored position is its start
   (or already its end: a per-partition commit applied that range before the batch failed), and —
   when executing — no driver of the application is live (fresh heartbeat with the current epoch)
   unless forced. A refusal raises before anything is written and takes no epoch;
2. a **dry run** (the default) returns the plan: the batches, their ranges and the positions before
   and after;
3. **executing** takes a new epoch (a driver still running with an older one is fenced: its next
   commit raises :class:`~dstream_exactly_once.errors.FencedError`) and then, per batch in id order,
   ONE store transaction: the positions move to each range's end under the stores' compare-and-set,
   the commit log gets the batch (it is never replayed), and a ``skip`` incident record (who, when,
   which ranges, the reason, the epoch) is written in the reserved namespace
   (:data:`~dstream_exactly_once.stores._writes.RESERVED_NAMESPACE`, key ``skip:<batch id>``).

The records of a skipped range are never output; the next start of the application plans from the
positions after the skipped batch. Works for every source: a range's position document (a file's
fingerprint) is stored with its end, as by any commit.
"""

from __future__ import annotations

import getpass
import logging
import os
import socket
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from .._checks import is_int
from ..engine._heartbeat import driver_status
from ..errors import ConfigurationError, OffsetConflictError, StoreError
from ..stores._base import CommitOutcome, PlannedBatch, TransactionalStore, Writes
from ..stores._writes import RESERVED_NAMESPACE, incident_key
from ._live import refuse_while_live

__all__ = ["MAX_REASON_CHARS", "SkipPlan", "skip_batch", "skipped_batches"]

log = logging.getLogger(__name__)

#: The longest ``reason`` a skip records.
MAX_REASON_CHARS = 1000

#: What a range of a skipped batch is: ``skip`` (its records are never output; its position moves to
#: its end) or ``committed`` (a per-partition commit already applied it; it stays as it is).
RANGE_SKIPPED, RANGE_COMMITTED = "skip", "committed"


@dataclass(frozen=True)
class SkipPlan:
    """What :func:`skip_batch` found and did (``executed``) or would do (a dry run).

    ``rows`` has one entry per non-empty range of the skipped batches, in batch order: ``batch``,
    ``key`` (the store's position key), ``range`` (the range described), ``before`` (the stored
    position before the skip; ``None`` when the partition had none), ``after`` (its end: the next
    position to read after the skip) and ``state`` (``skip`` or ``committed``, a range a
    per-partition commit already applied). ``incidents`` maps each batch id to the incident record
    written (executed) or that would be written (dry run: ``epoch`` is ``None``). ``outcomes`` maps
    each batch id to ``skipped``, or ``committed by a driver`` when a driver committed the batch
    itself between the checks and the new epoch (nothing of it was skipped).
    """

    app_id: str
    store: str
    batches: Tuple[PlannedBatch, ...]
    rows: Tuple[Dict[str, Any], ...]
    pending: Tuple[int, ...]
    driver: Dict[str, Any]
    executed: bool = False
    epoch: Optional[int] = None
    incidents: Dict[int, Dict[str, Any]] = field(default_factory=dict)
    outcomes: Dict[int, str] = field(default_factory=dict)

    @property
    def batch_ids(self) -> List[int]:
        """The ids of the batches skipped (or to skip), in order."""
        return [b.batch_id for b in self.batches]

    def to_dict(self) -> Dict[str, Any]:
        """The plan as a JSON-ready dict (``dstream-eo batches skip --json``)."""
        return {"app": self.app_id, "store": self.store, "dry_run": not self.executed, "batches": self.batch_ids,
                "pending_before": list(self.pending), "driver": self.driver, "epoch": self.epoch,
                "ranges": [dict(r) for r in self.rows],
                "incidents": {str(k): v for k, v in self.incidents.items()},
                "outcomes": {str(k): v for k, v in self.outcomes.items()}}


def skipped_batches(store: TransactionalStore) -> Dict[int, Dict[str, Any]]:
    """``{batch id: skip incident record}`` of every batch an operator skipped in ``store``'s app."""
    out: Dict[int, Dict[str, Any]] = {}
    for key, doc in store.get_values(RESERVED_NAMESPACE).items():
        kind, _, rest = key.partition(":")
        number = rest.partition(":")[0]
        if kind == "skip" and number.isdigit() and isinstance(doc, dict):
            out[int(number)] = doc
    return out


# ---------------------------------------------------------------- argument checks
def _check_ids(batch_id: Union[int, Iterable[int]]) -> List[int]:
    ids = [batch_id] if is_int(batch_id) else batch_id
    if isinstance(ids, (str, bytes)) or not isinstance(ids, Iterable):
        raise ConfigurationError(f"batch_id must be a batch id (an int >= 0) or a sequence of them, got {batch_id!r}")
    ids = list(ids)
    bad = [b for b in ids if not is_int(b) or b < 0]
    if not ids or bad:
        raise ConfigurationError(f"batch_id must be a batch id (an int >= 0) or a non-empty sequence of them, got "
                                 f"{batch_id!r}")
    twice = sorted({b for b in ids if ids.count(b) > 1})
    if twice:
        raise ConfigurationError(f"batch_id names batch(es) {twice} more than once")
    return sorted(ids)


def _check_reason(reason: Optional[str]) -> Optional[str]:
    if reason is None:
        return None
    if not isinstance(reason, str) or not reason.strip() or len(reason) > MAX_REASON_CHARS:
        shown = f"a str of {len(reason)} characters" if isinstance(reason, str) and reason.strip() else repr(reason)
        raise ConfigurationError(f"reason must be None or a non-blank str of at most {MAX_REASON_CHARS} characters, "
                                 f"got {shown}")
    return reason.strip()


def _check_flag(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise ConfigurationError(f"{name} must be a bool, got {value!r}")
    return value


# ---------------------------------------------------------------- the plan (reads only)
def _refuse_targets(store: TransactionalStore, ids: Sequence[int], pending: Sequence[int]) -> None:
    """Raise :class:`ConfigurationError` unless ``ids`` are the oldest pending batches."""
    app = store.app_id
    shown = f"pending batches of app {app!r}: {list(pending) or 'none'}; last committed " \
            f"{store.last_committed_batch_id()}"
    problems = []
    for bid in ids:
        if bid in pending:
            continue
        if store.get_batch(bid) is None:
            problems.append(f"batch {bid} is not in the offset log")
        elif store.is_committed(bid):
            problems.append(f"batch {bid} is already committed (nothing to skip)")
        else:
            problems.append(f"batch {bid} is not pending")
    if problems:
        hint = "" if pending else (" (a stream committing with offset_log='in_commit' logs no batch ahead: move "
                                   "its positions with `dstream-eo offsets reset` instead)")
        raise ConfigurationError(f"cannot skip: {'; '.join(problems)} ({shown}){hint}; nothing was written")
    oldest = list(pending[:len(ids)])
    if list(ids) != oldest:
        older = sorted(set(pending[:pending.index(max(ids))]) - set(ids))
        flags = " ".join(f"--batch {b}" for b in sorted(set(ids) | set(older)))
        raise ConfigurationError(
            f"cannot skip batch(es) {list(ids)} alone: pending batch(es) {older} are older and are replayed first, "
            f"in id order; skip them too ({flags}) or only the oldest ({shown}); nothing was written")


def _range_rows(batches: Sequence[PlannedBatch], stored: Mapping[str, int]) -> List[Dict[str, Any]]:
    """One row per non-empty range, checking each against the stored position (as the commit will)."""
    current = dict(stored)
    rows: List[Dict[str, Any]] = []
    for b in batches:
        for r in b.ranges:
            if not r.count():
                continue
            before = current.get(r.position_key)
            if before is None or before == r.start:
                state = RANGE_SKIPPED
            elif before == r.end:
                state = RANGE_COMMITTED
            else:
                raise OffsetConflictError(
                    f"cannot skip batch {b.batch_id}: {r.describe()} has stored position {before}, neither its start "
                    f"{r.start} nor its end {r.end} (the positions were moved after the batch was logged); nothing "
                    f"was written")
            rows.append({"batch": b.batch_id, "key": r.position_key, "range": r.describe(), "start": r.start,
                         "end": r.end, "before": before, "after": r.end, "state": state})
            current[r.position_key] = r.end
    return rows


def _operator() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no user name for this uid (containers)
        user = f"uid{os.getuid()}" if hasattr(os, "getuid") else "unknown"
    return f"{user}@{socket.gethostname()}"


def _incident(batch: PlannedBatch, rows: Sequence[Dict[str, Any]], who: str, when: str, reason: Optional[str],
              epoch: Optional[int]) -> Dict[str, Any]:
    mine = [r for r in rows if r["batch"] == batch.batch_id]
    brief = [{"key": r["key"], "start": r["start"], "end": r["end"], "range": r["range"]} for r in mine
             if r["state"] == RANGE_SKIPPED]
    kept = [{"key": r["key"], "start": r["start"], "end": r["end"], "range": r["range"]} for r in mine
            if r["state"] == RANGE_COMMITTED]
    return {"batch": batch.batch_id, "batch_time_ms": batch.batch_time_ms, "by": who, "at": when, "reason": reason,
            "epoch": epoch, "ranges": brief, "positions": sum(r["end"] - r["start"] for r in brief),
            "committed_ranges": kept}


# ---------------------------------------------------------------- the action
def skip_batch(store_or_url: Union[TransactionalStore, str], app_id: str, batch_id: Union[int, Iterable[int]], *,
               execute: bool = False, force: bool = False, reason: Optional[str] = None) -> SkipPlan:
    """Skip the pending batch ``batch_id`` of application ``app_id`` (a dry run unless ``execute``).

    ``store_or_url`` is a store URL (opened read-only and closed again) or an open
    :class:`~dstream_exactly_once.stores.TransactionalStore` of ``app_id``. ``batch_id`` is one batch
    id or several; they must be the oldest pending batches of the offset log. ``reason`` (a short
    text) is kept in the incident record with who skipped and when.

    Without ``execute`` nothing is written: the returned :class:`SkipPlan` lists the ranges and the
    positions before and after. With ``execute``: refused with :class:`DriverLiveError` while a driver
    of the app is live unless ``force``; then a new epoch is taken (fencing any running driver) and
    each batch is committed without output in one store transaction with its ``skip`` incident
    record. Every refusal (:class:`ConfigurationError` for a batch that is unknown, committed or not
    the oldest pending one; :class:`OffsetConflictError` for moved positions; :class:`DriverLiveError`)
    happens before anything is written and takes no epoch. Guarantee: the skipped ranges' records
    are never output; every later batch stays exactly-once.
    """
    ids = _check_ids(batch_id)
    reason = _check_reason(reason)
    execute, force = _check_flag("execute", execute), _check_flag("force", force)
    if isinstance(store_or_url, TransactionalStore):
        if store_or_url.app_id != app_id:
            raise ConfigurationError(f"app_id {app_id!r} does not match the store's app {store_or_url.app_id!r}")
        return _skip(store_or_url, ids, execute, force, reason)
    if not isinstance(store_or_url, str):
        raise ConfigurationError(f"store_or_url must be a store URL or a TransactionalStore, got {store_or_url!r}")
    from ..stores import open_store

    with open_store(store_or_url, app_id) as store:
        return _skip(store, ids, execute, force, reason)


def _skip(store: TransactionalStore, ids: List[int], execute: bool, force: bool, reason: Optional[str]) -> SkipPlan:
    pending_batches = store.pending_batches()
    pending = [b.batch_id for b in pending_batches]
    _refuse_targets(store, ids, pending)
    batches = tuple(b for b in pending_batches if b.batch_id in ids)
    rows = _range_rows(batches, {k: p.offset for k, p in store.load_positions().items()})
    driver = driver_status(store)
    who, when = _operator(), datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")
    plan = SkipPlan(store.app_id, store.display_url, batches, tuple(rows), tuple(pending), driver)
    if not execute:
        return replace(plan, incidents={b.batch_id: _incident(b, rows, who, when, reason, None) for b in batches})
    refuse_while_live(driver, force, f"skip batch(es) {ids} of app {store.app_id!r}", "the skip")
    epoch = store.start_epoch()
    incidents: Dict[int, Dict[str, Any]] = {}
    outcomes: Dict[int, str] = {}
    for b in batches:
        doc = _incident(b, rows, who, when, reason, epoch)
        committed = {r["key"] for r in rows if r["batch"] == b.batch_id and r["state"] == RANGE_COMMITTED}
        ranges = None if not committed else [r for r in b.ranges if r.position_key not in committed]
        try:
            outcome = store.commit(epoch, b, Writes().record_incident("skip", b.batch_id, doc), ranges=ranges,
                                   complete_batch=True)
        except StoreError as exc:
            done = [k for k, v in outcomes.items() if v == "skipped"]
            raise type(exc)(f"skipping batch {b.batch_id} of app {store.app_id!r} failed (with epoch {epoch}; "
                            f"batches skipped before it: {done or 'none'}): {exc}") from exc
        if outcome is CommitOutcome.APPLIED:
            incidents[b.batch_id], outcomes[b.batch_id] = doc, "skipped"
            log.warning("skipped batch %d of app %r with epoch %d: ranges %s are never output (%d positions); "
                        "by %s, reason: %s; incident record %s", b.batch_id, store.app_id, epoch,
                        [r["range"] for r in doc["ranges"]], doc["positions"], who, reason,
                        incident_key("skip", b.batch_id))
        else:
            outcomes[b.batch_id] = "committed by a driver"
            log.warning("batch %d of app %r was committed by its driver before the skip took epoch %d: nothing of "
                        "it was skipped", b.batch_id, store.app_id, epoch)
    return replace(plan, executed=True, epoch=epoch, incidents=incidents, outcomes=outcomes)
