"""Per-batch progress records, named as Structured Streaming's ``StreamingQueryProgress`` where they apply.

One record per batch that ran an output (empty batches are not planned, so they have none). The
fields (all JSON; ``docs/operations.md`` has the same table):

``id``
    the application id (stable across restarts, like a query's checkpointed id).
``runId``
    a random id of this driver run (a new one each start, as in Structured Streaming).
``name``
    the stream's name (default: the application id).
``timestamp``
    the batch time, ISO-8601 UTC (``2024-05-01T12:00:03.000Z``).
``batchId``
    the batch id in the offset log (a replayed batch keeps its id).
``numInputRows``
    records read by the batch. Exact where the records were counted while being read
    (``commit_each_partition``, ``write_each_partition``: each task counts what it read). With
    ``commit_each_batch``/``foreach_batch`` nothing is read by the library itself, so it is the
    sum of the Kafka ranges' ``untilOffset - fromOffset`` less the offsets skipped as lost: an upper
    bound, exact unless the log has gaps (transaction markers, aborted records, compaction);
    ``numInputRowsExact`` says which. For
    sources whose positions are not record numbers (files: bytes) and uncounted output, ``-1``.
``inputRowsPerSecond``
    ``numInputRows`` / seconds since the previous batch's time (the arrival rate).
``processedRowsPerSecond``
    ``numInputRows`` / this batch's ``durationMs.triggerExecution`` (the processing rate).
``durationMs``
    ``latestOffset`` (planning: the source's look-up of the newest positions and the ranges),
    ``walCommit`` (writing the offset-log entry), ``addBatch`` (reading and the user's output,
    including per-partition store commits on executors), ``commitOffsets`` (the driver's commit:
    results + positions + commit log for ``commit_each_batch``; the commit-log entry for the
    per-partition patterns), ``triggerExecution`` (planning and the offset-log write, then from the
    start of the output to the end of the commit). A batch is planned when Spark generates it and its
    output runs once the batches before it are done: the wait in between (Spark's scheduling delay)
    is in none of these.
``sources``
    one entry: ``description``, ``startOffset``/``endOffset`` (Kafka: ``{topic: {partition:
    offset}}`` as Structured Streaming writes them; other sources ``{position key: position}``),
    ``latestOffset`` (the newest positions the source saw while planning, ``null`` if unknown),
    ``numInputRows``, ``numRanges`` (the batch's ranges with data), ``numTasks`` (the Spark tasks
    that read them: the task planner's plan for the batch, :mod:`._tasks`; ``-1`` when not known),
    and ``metrics`` ``avgOffsetsBehindLatest``/``maxOffsetsBehindLatest``/
    ``minOffsetsBehindLatest`` (``latestOffset - endOffset`` over the batch's partitions; numbers,
    where Structured Streaming writes strings), plus the source's event counters since this driver
    started (the file source: ``renames``, ``truncations``, ``losses``, ``unreadable`` …).
``sink``
    ``description`` (the output pattern) and ``numOutputRows``: the entries of the committed
    :class:`~dstream_exactly_once.stores.Writes` (increments, puts, batch rows, labels, SQL
    statements) — or, for ``write_each_partition``, the rows handed to the sink; ``-1`` when unknown.

Ours: ``replayedBatch`` (this batch was found uncommitted at start and re-run with its logged
ranges), ``outcome`` (``applied``/``replayed``), ``numReplaysSkipped`` (commits in this run that found
their batch or range already committed and wrote nothing), ``numFencedAttempts`` (commits or plans
refused because a newer driver took the epoch), ``numDataLossSkippedOffsets`` (Kafka offsets skipped
under ``failOnDataLoss=False``: when planning and when reading) and ``numDataLossSkippedBytes`` (file
bytes skipped under ``fail.on.data.loss=false``: reported by the planner and when reading) — these
four are totals since this driver started — and ``dataLoss``: this batch's lost parts, one
``{"key", "where", "unit", "start", "end", "lost"}`` each (``[]`` when nothing was lost; the same
losses are recorded in the store beside the commit). ``numInputRows`` counts only what was read.
``dataLossTotals``: the same totals in one shape for every source, ``{"unit", "planned", "read",
"total"}`` (``unit``: ``offsets`` for Kafka, ``bytes`` for files; ``planned``: skipped while
planning, ``read``: found gone while reading committed batches), as ``stream.data_loss()`` returns
them (:class:`~dstream_exactly_once.core._loss_totals.DataLossTotals`).

Nothing here imports Spark; :class:`ProgressTracker` is driven by the committer and the output
patterns through small hook calls.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time as _time
import uuid
from collections import deque
from datetime import datetime, timezone
from typing import Any, Callable, Deque, Dict, List, Mapping, Optional, Sequence, Set, Tuple

from ..errors import ConfigurationError, FencedError
from ._loss import DataLoss
from ._loss_totals import DataLossTotals
from ._range_display import range_display
from ._ranges import SourceRange

#: the documented logger name of the per-batch progress lines (kept when the module moved)
log = logging.getLogger("dstream_exactly_once.core.progress")

__all__ = ["ProgressTracker", "check_progress_path", "offsets_json"]

ProgressListener = Callable[[Dict[str, Any]], Any]

#: how many records ``recentProgress`` keeps (Structured Streaming's default is 100 as well)
RECENT = 100


def check_progress_path(path: object) -> Optional[str]:
    """``path`` as a str if progress records can be appended to it (``None`` stays ``None``).

    Refused, naming the value: anything but a str or path object, an empty path, a NUL byte, a
    directory, a path whose directory does not exist (or is not a directory), and a file or
    directory this process may not write. Later failures (a full disk, the directory removed)
    are logged and never stop the stream.
    """
    if path is None:
        return None
    allowed = "a path (str) of a file to append JSON lines to, in an existing writable directory, or None"
    if not isinstance(path, (str, os.PathLike)):
        raise ConfigurationError(f"progress_path must be {allowed}; got {path!r}")
    text = os.fspath(path)
    if not isinstance(text, str) or not text.strip() or "\0" in text:
        raise ConfigurationError(f"progress_path must be {allowed}; got {path!r}"
                                 + (" (it holds a NUL byte)" if isinstance(text, str) and "\0" in text else ""))
    if os.path.isdir(text):
        raise ConfigurationError(f"progress_path {text!r} is a directory; must be {allowed}")
    parent = os.path.dirname(os.path.abspath(text))
    if not os.path.isdir(parent):
        raise ConfigurationError(f"progress_path {text!r}: directory {parent!r} does not exist (or is not a "
                                 f"directory); must be {allowed}")
    target = text if os.path.exists(text) else parent
    if not os.access(target, os.W_OK):
        raise ConfigurationError(f"progress_path {text!r}: {target!r} is not writable by this process; must be "
                                 f"{allowed}")
    return text


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000.0, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def offsets_json(ranges: Sequence[SourceRange], which: str) -> Dict[str, Any]:
    """``{group: {member: position}}`` for ranges whose kind's display groups them
    (:meth:`~._range_display.RangeDisplay.progress_group`)
    (Kafka: ``{topic: {partition: offset}}``), ``{position key: position}`` otherwise; ``which`` is
    ``"start"`` or ``"end"``."""
    out: Dict[str, Any] = {}
    for r in ranges:
        pos = r.start if which == "start" else r.end
        group = range_display(r.kind).progress_group(r)
        if group is not None:
            out.setdefault(group[0], {})[group[1]] = pos
        else:
            out[r.position_key] = pos
    return out


def _latest_json(ranges: Sequence[SourceRange], latest: Mapping[str, int]) -> Optional[Dict[str, Any]]:
    if not latest:
        return None
    out: Dict[str, Any] = {}
    for r in ranges:
        if r.position_key not in latest:
            continue
        group = range_display(r.kind).progress_group(r)
        if group is not None:
            out.setdefault(group[0], {})[group[1]] = latest[r.position_key]
        else:
            out[r.position_key] = latest[r.position_key]
    return out or None


class _Pending:
    """What the tracker knows of one batch between planning and its commit."""

    def __init__(self, started: float, planning_ms: float, wal_ms: float, latest: Mapping[str, int],
                 replayed: bool) -> None:
        self.started = started
        self.planning_ms = planning_ms
        self.wal_ms = wal_ms
        self.latest = dict(latest)
        self.replayed = replayed
        self.output_started: Optional[float] = None
        self.commit_started: Optional[float] = None


class ProgressTracker:
    """Builds one progress record per batch and hands it to ``lastProgress``/``recentProgress``,
    listeners, an optional JSON-lines file and one INFO log line.

    Hooks, in batch order: :meth:`planned` (committer, after the offset-log write), :meth:`output_started`,
    :meth:`commit_started`, :meth:`finished` (output pattern). Listeners run on the driver's batch
    thread. Publishing never stops a stream: a listener that raises, a progress file that cannot be
    written and a record that cannot be built are each logged (WARN, once per cause) and the batch
    goes on; a path is checked when it is set (:func:`check_progress_path`).
    """

    def __init__(self, app_id: str, source_description: str, *, name: Optional[str] = None,
                 progress_path: Optional[str] = None,
                 data_loss_skips: Optional[Callable[[], int]] = None,
                 source_counters: Optional[Callable[[], Mapping[str, int]]] = None,
                 data_loss_unit: str = "offsets") -> None:
        self.id = app_id
        self.run_id = str(uuid.uuid4())
        self.name = name or app_id
        self.source_description = source_description
        self.progress_path = check_progress_path(progress_path)
        self._data_loss_skips = data_loss_skips or (lambda: 0)
        self._source_counters = source_counters or (lambda: {})
        self._warned: Set[Tuple[str, ...]] = set()  # causes of publishing failures already logged
        self._data_loss_unit = data_loss_unit  # what the source's own count counts
        self.read_losses: Dict[str, int] = {"offsets": 0, "bytes": 0}  # lost parts found reading, by unit
        self._lock = threading.RLock()
        self._pending: Dict[int, _Pending] = {}
        self._listeners: List[ProgressListener] = []
        self.recent: Deque[Dict[str, Any]] = deque(maxlen=RECENT)
        self.replays_skipped = 0
        self.fenced_attempts = 0
        self._last_batch_ms: Optional[int] = None

    # ---------------------------------------------------------------- public
    @property
    def last(self) -> Optional[Dict[str, Any]]:
        with self._lock:
            return self.recent[-1] if self.recent else None

    def add_listener(self, listener: ProgressListener) -> None:
        if not callable(listener):
            raise ConfigurationError(f"a progress listener must be a function (progress dict), got {listener!r}")
        with self._lock:
            self._listeners.append(listener)

    def set_path(self, path: Optional[str]) -> None:
        self.progress_path = check_progress_path(path)

    # ---------------------------------------------------------------- hooks
    def planned(self, batch_id: int, planning_s: float, wal_s: float, latest: Mapping[str, int],
                replayed: bool = False) -> None:
        now = _time.monotonic()
        with self._lock:
            self._pending[batch_id] = _Pending(now - planning_s - wal_s, planning_s * 1000, wal_s * 1000, latest,
                                               replayed)
            while len(self._pending) > 1024:  # batches planned but never output (the stream stopped)
                self._pending.pop(min(self._pending))

    def output_started(self, batch_id: int) -> None:
        with self._lock:
            p = self._pending.get(batch_id)
            if p is not None and p.output_started is None:
                p.output_started = _time.monotonic()

    def commit_started(self, batch_id: int) -> None:
        with self._lock:
            p = self._pending.get(batch_id)
            if p is not None:
                p.commit_started = _time.monotonic()

    def fenced(self) -> None:
        with self._lock:
            self.fenced_attempts += 1

    def failed(self, exc: BaseException) -> None:
        """The stream stopped committing because of ``exc`` (counted when it is a fencing)."""
        if isinstance(exc, FencedError):
            self.fenced()

    def finished(self, batch: Any, outcome: str, *, sink: str, num_input_rows: Optional[int] = None,
                 num_output_rows: int = -1, replays_skipped: int = 0,
                 losses: Sequence[DataLoss] = (), num_tasks: int = -1) -> Optional[Dict[str, Any]]:
        """Build, record and publish the progress of ``batch`` (a committed
        :class:`~dstream_exactly_once.stores.PlannedBatch`); returns the record (``None`` if it could
        not be built: logged, the batch is committed and the stream goes on). ``losses``: the parts of
        its ranges skipped because their data was gone (recorded beside the commit); ``num_tasks``: the
        Spark tasks that read the batch (the task planner's plan; -1 when not known)."""
        try:
            record, listeners, path = self._record(batch, outcome, sink, num_input_rows, num_output_rows,
                                                   replays_skipped, losses, num_tasks)
        except Exception as exc:  # noqa: BLE001 - progress output must never stop a committed stream
            self._warn_once(("record", type(exc).__name__), "could not build the progress record of batch %s "
                            "(%s: %s); the batch is committed and the stream goes on",
                            getattr(batch, "batch_id", "?"), type(exc).__name__, exc)
            return None
        self._publish(record, listeners, path)
        return record

    def _record(self, batch: Any, outcome: str, sink: str, num_input_rows: Optional[int], num_output_rows: int,
                replays_skipped: int, losses: Sequence[DataLoss],
                num_tasks: int = -1) -> Tuple[Dict[str, Any], List[ProgressListener], Optional[str]]:
        end = _time.monotonic()
        ranges: Sequence[SourceRange] = batch.ranges
        with self._lock:
            p = self._pending.pop(batch.batch_id, None) or _Pending(end, 0.0, 0.0, {}, False)
            self.replays_skipped += replays_skipped
            for d in losses:
                self.read_losses[d.unit] = self.read_losses.get(d.unit, 0) + d.lost
            planned_loss = self._safe_data_loss()
            skipped = {unit: n + (planned_loss if unit == self._data_loss_unit else 0)
                       for unit, n in self.read_losses.items()}
            exact = num_input_rows is not None
            if num_input_rows is None:
                records = bool(ranges) and all(r.counts_records for r in ranges)
                lost = sum(d.lost for d in losses if d.unit == "offsets")  # skipped, never read
                num_input_rows = sum(r.count() for r in ranges) - lost if records else -1
            planned_end = p.started + (p.planning_ms + p.wal_ms) / 1e3
            out_start = p.output_started if p.output_started is not None else planned_end
            commit_start = p.commit_started if p.commit_started is not None else end
            queued = max(out_start - planned_end, 0.0)  # in Spark's job queue, behind earlier batches
            total_ms = (end - p.started - queued) * 1000
            since = None if self._last_batch_ms is None else (batch.batch_time_ms - self._last_batch_ms) / 1000.0
            self._last_batch_ms = batch.batch_time_ms
            behind = [p.latest[r.position_key] - r.end for r in ranges if r.position_key in p.latest]
            rows = max(num_input_rows, 0)
            record: Dict[str, Any] = {
                "id": self.id,
                "runId": self.run_id,
                "name": self.name,
                "timestamp": _iso(batch.batch_time_ms),
                "batchId": batch.batch_id,
                "numInputRows": num_input_rows,
                "numInputRowsExact": exact,
                "inputRowsPerSecond": round(rows / since, 3) if since else 0.0,
                "processedRowsPerSecond": round(rows / (total_ms / 1000), 3) if total_ms > 0 else 0.0,
                "durationMs": {
                    "latestOffset": round(p.planning_ms), "walCommit": round(p.wal_ms),
                    "addBatch": round(max(commit_start - out_start, 0) * 1000),
                    "commitOffsets": round(max(end - commit_start, 0) * 1000),
                    "triggerExecution": round(total_ms),
                },
                "sources": [{
                    "description": self.source_description,
                    "startOffset": offsets_json(ranges, "start"),
                    "endOffset": offsets_json(ranges, "end"),
                    "latestOffset": _latest_json(ranges, p.latest),
                    "numInputRows": num_input_rows,
                    "numRanges": sum(1 for r in ranges if r.end > r.start),
                    "numTasks": num_tasks,
                    "metrics": {
                        **self._safe_source_counters(),
                        "avgOffsetsBehindLatest": round(sum(behind) / len(behind), 1) if behind else None,
                        "maxOffsetsBehindLatest": max(behind) if behind else None,
                        "minOffsetsBehindLatest": min(behind) if behind else None,
                    },
                }],
                "sink": {"description": sink, "numOutputRows": num_output_rows},
                "replayedBatch": p.replayed,
                "outcome": outcome,
                "numReplaysSkipped": self.replays_skipped,
                "numFencedAttempts": self.fenced_attempts,
                "numDataLossSkippedOffsets": skipped.get("offsets", 0),
                "numDataLossSkippedBytes": skipped.get("bytes", 0),
                "dataLossTotals": DataLossTotals.of(self._data_loss_unit, planned_loss, self.read_losses).to_json(),
                "dataLoss": [{"key": d.position_key, "where": d.where, "unit": d.unit, "start": d.start, "end": d.end,
                              "lost": d.lost} for d in losses],
            }
            self.recent.append(record)
            return record, list(self._listeners), self.progress_path

    def data_loss_totals(self) -> DataLossTotals:
        """What the stream skipped as lost since this driver started (planned: the source's count;
        read: the losses of committed batches)."""
        with self._lock:
            return DataLossTotals.of(self._data_loss_unit, self._safe_data_loss(), self.read_losses)

    # ---------------------------------------------------------------- publishing
    def _safe_data_loss(self) -> int:
        try:
            return int(self._data_loss_skips())
        except Exception:  # noqa: BLE001 - a counter must never fail a committed batch
            return 0

    def _safe_source_counters(self) -> Dict[str, int]:
        """The source's event counters (``{}`` if it has none or they cannot be read)."""
        try:
            return {str(k): int(v) for k, v in self._source_counters().items()}
        except Exception as exc:  # noqa: BLE001 - a counter must never fail a committed batch
            self._warn_once(("counters", type(exc).__name__), "could not read the source's counters for the "
                            "progress record (%s: %s)", type(exc).__name__, exc)
            return {}

    def _warn_once(self, cause: Tuple[str, ...], msg: str, *args: Any) -> None:
        """``log.warning(msg, *args)`` the first time ``cause`` happens in this run; later ones at DEBUG."""
        with self._lock:
            first = cause not in self._warned
            self._warned.add(cause)
        (log.warning if first else log.debug)(msg, *args)

    def _publish(self, record: Dict[str, Any], listeners: List[ProgressListener], path: Optional[str]) -> None:
        try:
            d = record["durationMs"]
            log.info("batch %d of %s %s: %s input rows (%s/s processed), %s output rows, %d ms (plan %d, log %d, "
                     "output %d, commit %d), max %s behind latest", record["batchId"], record["name"],
                     record["outcome"], record["numInputRows"], record["processedRowsPerSecond"],
                     record["sink"]["numOutputRows"], d["triggerExecution"], d["latestOffset"], d["walCommit"],
                     d["addBatch"], d["commitOffsets"], record["sources"][0]["metrics"]["maxOffsetsBehindLatest"])
        except Exception as exc:  # noqa: BLE001 - a log handler's failure must not stop the stream
            self._warn_once(("log", type(exc).__name__), "could not log the progress of batch %s (%s: %s)",
                            record.get("batchId"), type(exc).__name__, exc)
        if path:
            self._append(record, path)
        for listener in listeners:
            try:
                listener(dict(record))
            except Exception as exc:  # noqa: BLE001 - a listener must never fail a committed batch
                self._warn_once(("listener", str(id(listener)), type(exc).__name__),
                                "progress listener %s failed on batch %s (%s: %s); it is called again for the "
                                "next batch, the stream goes on", _name(listener), record.get("batchId"),
                                type(exc).__name__, exc)

    def _append(self, record: Dict[str, Any], path: str) -> None:
        """Append ``record`` to ``path`` as one JSON line; a failure is logged once per cause."""
        try:
            line = json.dumps(record, separators=(",", ":")) + "\n"
            with open(path, "a", encoding="utf-8") as f:
                f.write(line)
        except Exception as exc:  # noqa: BLE001 - a full disk or a removed directory must not stop the stream
            cause = ("file", path, type(exc).__name__, str(getattr(exc, "errno", "")))
            self._warn_once(cause, "could not append progress of batch %s to %s (%s: %s); progress records stay "
                            "in lastProgress/recentProgress, the stream goes on and retries the file each batch",
                            record.get("batchId"), path, type(exc).__name__, getattr(exc, "strerror", None) or exc)
            return
        with self._lock:
            recovered = [c for c in self._warned if c[:2] == ("file", path)]
            for c in recovered:
                self._warned.discard(c)
        if recovered:
            log.info("progress is appended to %s again", path)


def _name(listener: Any) -> str:
    """A listener's name for messages (its qualified name, never its repr: that may hold configuration)."""
    return str(getattr(listener, "__qualname__", None) or type(listener).__name__)
