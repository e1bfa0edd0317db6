"""Spark's input tracking for range streams: the Streaming tab's input rate and each batch's ranges.

Spark's Streaming tab (and its REST API, ``/api/v1/applications/<id>/streaming/batches`` and
``.../statistics``) counts a batch's records from what each *input stream* reported for the batch
while Spark generated it: ``StreamInputInfo(inputStreamId, numRecords, metadata)`` handed to the
scheduler's ``InputInfoTracker``; the batch page shows the metadata's ``Description``. Spark's own
direct Kafka stream reports its offset ranges there.

A range stream's JVM input stream is its tick (an empty monitored directory, see
:mod:`._dstream`), which reports 0 records for every batch. :class:`InputInfoReporter` puts the
batch's real input in that entry once the batch is planned, from the JobGenerator's thread (the
stream's driver-side function runs on it, while the batch is generated):

- Kafka ranges: records = the sum of ``untilOffset - fromOffset`` (an upper bound when the log
  has gaps: transaction markers, aborted records, compaction), described as Spark's direct
  stream does (``topic: t  partition: p  offsets: from to until``, largest first, empty ranges left out);
- file ranges: records = **bytes** (lines are not known before the ranges are read), described
  per file (path, identity, byte range) under a first line saying the unit.

Every range stream of this library plans its batches while Spark generates them — the direct
streams (``createDirectStream``, ``createDirectFileStream``) and the exactly-once ones
(``createExactlyOnceStream``, ``createExactlyOnceFileStream``, ``exactly_once(...)``), whose committer
plans (or replays from its offset log) each batch then — so each batch is reported with its ranges;
a replayed batch with its logged ranges. An exactly-once stream that stopped after a failure plans
nothing more: its later batches report 0. Reporting is monitoring: a failure is logged once and
never fails the batch.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any, Optional, Sequence, Tuple

from ..core._ranges import SourceRange
from ..files import FileRange
from ..kafka._offsets import OffsetRange
from ._recovery import batch_ms

log = logging.getLogger(__name__)

__all__ = ["InputInfoReporter", "describe_ranges", "input_stream_id", "jvm_safe"]

#: ``StreamInputInfo.METADATA_KEY_DESCRIPTION``: the metadata entry the batch page shows
DESCRIPTION_KEY = "Description"


def describe_ranges(ranges: Sequence[SourceRange]) -> Tuple[int, str]:
    """``(numRecords, description)`` of one batch's ranges as the Streaming tab shows them.

    Kafka: records, one line per non-empty range, largest first. Files (and any source whose
    positions are not record numbers): bytes, with a first line saying so.
    """
    nonempty = sorted((r for r in ranges if r.count() > 0), key=lambda r: -r.count())
    total = sum(r.count() for r in nonempty)
    if all(isinstance(r, OffsetRange) for r in nonempty):
        return total, "\n".join(f"topic: {r.topic}\tpartition: {r.partition}\toffsets: {r.start} to {r.end}"
                                 for r in nonempty if isinstance(r, OffsetRange))
    lines = ["records counted in bytes (byte ranges of the files; lines are counted when read)"]
    for r in nonempty:
        if isinstance(r, FileRange):
            lines.append(f"file: {r.path}\tidentity: {r.position_key} fingerprint {r.fingerprint[:16] or '-'} "
                         f"dev/inode {r.dev}/{r.inode}\tbytes: {r.start} to {r.end}")
        else:
            lines.append(f"{r.describe()}\tpositions: {r.start} to {r.end}")
    return total, "\n".join(lines)


def jvm_safe(text: str) -> str:
    """``text`` as valid UTF-8 for py4j: a file name that is not UTF-8 (decoded by Python with
    surrogate escapes) keeps its odd bytes as ``\\xff`` escapes. py4j cannot send a lone surrogate
    and a failed send breaks its connection for the whole driver."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate that no file name decodes to
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def input_stream_id(jdstream: Any) -> int:
    """The id of the JVM input stream a JVM DStream descends from (its first input ancestor)."""
    current = jdstream
    for _ in range(64):
        try:
            return int(current.id())  # InputDStream.id
        except Exception:  # noqa: BLE001 - py4j: this DStream is not an input stream
            deps = current.dependencies()
            if deps.isEmpty():
                break
            current = deps.head()
    raise ValueError(f"no JVM input stream under {jdstream!r}")


class InputInfoReporter:
    """Reports each planned batch of one range stream to Spark's input tracking (see module doc).

    ``stream_id``: the id of the stream's JVM input stream (its tick), whose entry for the batch
    is replaced by the batch's records and description.
    """

    def __init__(self, ssc: Any, stream_id: int) -> None:
        self._ssc = ssc
        self.stream_id = int(stream_id)
        self._failed = False

    @classmethod
    def for_tick(cls, ssc: Any, tick: Any) -> Optional[InputInfoReporter]:
        """The reporter of the stream ticked by the Python DStream ``tick`` (``None`` if its JVM input
        stream cannot be found: the stream then runs unreported)."""
        try:
            return cls(ssc, input_stream_id(tick._jdstream.dstream()))
        except Exception as exc:  # noqa: BLE001 - monitoring never stops a stream from being built
            log.warning("Spark's Streaming tab will not count this stream's records: %s", exc)
            return None

    def report(self, time: datetime, ranges: Sequence[SourceRange]) -> None:
        """Put the batch at ``time`` with ``ranges`` into Spark's input tracking (best effort)."""
        if self._failed:
            return
        try:
            self._report(batch_ms(time), *describe_ranges(ranges))
        except Exception as exc:  # noqa: BLE001 - monitoring never fails a batch
            self._failed = True
            log.warning("could not report the batch at %s to Spark's Streaming tab (reported no further): %s",
                        time, exc)

    def _report(self, ms: int, records: int, description: str) -> None:
        jvm = self._ssc.sparkContext._jvm
        tracker = self._ssc._jssc.ssc().scheduler().inputInfoTracker()
        metadata = jvm.java.util.HashMap()
        metadata.put(DESCRIPTION_KEY, jvm_safe(description))
        info = jvm.org.apache.spark.streaming.scheduler.StreamInputInfo(
            self.stream_id, records, jvm.org.apache.spark.api.python.PythonUtils.toScalaMap(metadata))
        jtime = jvm.org.apache.spark.streaming.Time(ms)
        by_stream = _entries_at(tracker, jtime)
        if by_stream is None:
            tracker.reportInfo(jtime, info)
        else:
            # The tick reported 0 records under this id; InputInfoTracker.reportInfo refuses a second
            # report, so the entry is replaced (this runs on the JobGenerator thread, which owns it).
            by_stream.update(self.stream_id, info)


def _entries_at(tracker: Any, jtime: Any) -> Any:
    """The tracker's ``stream id -> StreamInputInfo`` map for ``jtime`` (``None`` if it has none)."""
    field = tracker.getClass().getDeclaredField("batchTimeToInputInfos")
    field.setAccessible(True)
    found = field.get(tracker).get(jtime)
    return None if found.isEmpty() else found.get()

