"""The Spark side of progress and liveness for exactly-once streams (``core/_progress.py``, ``engine/_heartbeat.py``).

:class:`ProgressAPI` gives :class:`~dstream_exactly_once.ExactlyOnceDStream`
Structured Streaming's ``lastProgress`` / ``recentProgress`` plus ``add_progress_listener`` and
``progress_to(path)``; the helpers count what the output patterns read and wrote.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple

from pyspark.streaming import StreamingContext

from ..core._progress import ProgressTracker
from ..stores._base import Writes
from ._dstream import batch_seconds

__all__ = ["ProgressAPI", "attach_monitoring", "counted", "summarize_partitions", "writes_size"]


def attach_monitoring(ssc: StreamingContext, committer: Any) -> None:
    """Tell the committer's heartbeat the batch interval (heartbeats are written once per interval)."""
    interval = batch_seconds(ssc)
    committer.heartbeat.interval_s = interval
    committer.heartbeat.min_gap_s = interval * 0.5


def writes_size(writes: Optional[Writes]) -> int:
    """The entries of ``writes``: increments, puts, batch rows, labels and SQL statements."""
    if writes is None:
        return 0
    return (len(writes.increments) + len(writes.puts) + sum(len(v) for v in writes.batch_rows.values())
            + len(writes.labels) + len(writes.statements))


def counted(records: Iterable[Any], counter: List[int]) -> Iterator[Any]:
    """``records``, adding one to ``counter[0]`` per record handed out (executor side)."""
    for record in records:
        counter[0] += 1
        yield record


def summarize_partitions(outcomes: Iterable[Any]) -> Tuple[int, int, int]:
    """``(input rows, output rows, ranges replayed)`` from the per-partition results
    ``(outcome, input rows, output rows)`` of an exactly-once partition job (``-1`` output rows:
    unknown)."""
    rows = out = replayed = 0
    unknown = False
    for item in outcomes:
        outcome, n_in, n_out = item
        rows += int(n_in)
        if n_out < 0:
            unknown = True
        else:
            out += int(n_out)
        replayed += outcome == "replayed"
    return rows, (-1 if unknown else out), replayed


class ProgressAPI:
    """Progress accessors of an exactly-once stream (mixed into ``ExactlyOnceDStream``)."""

    committer: Any

    @property
    def _progress(self) -> ProgressTracker:
        tracker: ProgressTracker = self.committer.progress
        return tracker

    @property
    def lastProgress(self) -> Optional[Dict[str, Any]]:  # noqa: N802 - Structured Streaming's name
        """The progress record of the newest committed batch (``None`` before the first); see
        :mod:`dstream_exactly_once.core._progress` for every field."""
        return self._progress.last

    @property
    def recentProgress(self) -> List[Dict[str, Any]]:  # noqa: N802 - Structured Streaming's name
        """The newest progress records (up to 100), oldest first."""
        return list(self._progress.recent)

    def add_progress_listener(self, listener: Callable[[Dict[str, Any]], Any]) -> None:
        """Call ``listener(progress)`` on the driver after each committed batch. A listener that raises
        never stops the stream: the failure is logged (WARN, once per listener and exception type) and
        the listener is called again for the next batch."""
        self._progress.add_listener(listener)

    def progress_to(self, path: Optional[str]) -> None:
        """Append each progress record as one JSON line to ``path`` (``None``: stop); for
        ``dstream-eo chart``.

        Refused with a ``ConfigurationError`` naming the value: a directory, a path in a directory that
        does not exist, a NUL byte, a path not writable by the driver, anything but a str or path. A
        failure while the stream runs (a full disk, the directory removed) never stops it: it is
        logged (WARN, once per cause), the records stay in ``recentProgress`` and the file is tried
        again each batch."""
        self._progress.set_path(path)
