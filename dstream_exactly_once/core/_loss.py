"""Data loss found while reading a planned range: the report, the incident record and the error.

A range is planned on the driver and read later on an executor (or replayed by the next driver);
in between its data can vanish — a copytruncate that truncated bytes no copy holds, a rotated
file deleted or compressed out of the pattern, Kafka records deleted by retention or with their
topic. Each source has one data-loss policy for first reads and replays alike:

- **fail**: the read raises :class:`~dstream_exactly_once.errors.DataLossError`; the output
  pattern turns it into ONE error naming the batch, the lost range and the command that gets the
  stream going again (:func:`loss_error`). Nothing of the batch is committed.
- **skip**: the reader reads what still exists and reports each lost part as a :class:`DataLoss`
  to an injected callback (:data:`LossCallback`); the commit of the batch (or of the range, for
  per-partition commits) carries one incident record per lost range
  (:func:`record_losses`, ``Writes.record_incident("loss", …)``), so the loss is in the store
  with the positions or not at all.

Nothing here imports Spark or a source.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence

from ..errors import DataLossError
from ._ranges import SourceRange

__all__ = ["DataLoss", "LossCallback", "loss_cause", "loss_error", "loss_summary", "merge_losses", "record_losses",
           "skip_command"]


@dataclass(frozen=True)
class DataLoss:
    """Positions ``[start, end)`` of the range ``[range_start, range_end)`` of stream partition
    ``position_key`` whose data was gone when the range was read (``unit``: ``offsets`` or ``bytes``).

    ``where`` names the data for people (``topic-partition`` or a file path), ``reason`` says what
    was found (``offsets deleted, log start 150``; ``no file holds the bytes``).
    """

    position_key: str
    range_start: int
    range_end: int
    start: int
    end: int
    unit: str
    where: str
    reason: str

    @property
    def lost(self) -> int:
        """How many offsets or bytes are gone."""
        return self.end - self.start

    def range_id(self) -> tuple[str, int, int]:
        """``(position key, range start, range end)``: the planned range this loss belongs to."""
        return (self.position_key, self.range_start, self.range_end)

    def describe(self) -> str:
        return f"{self.where} ({self.position_key}) {self.unit} [{self.start}, {self.end}) of range " \
               f"[{self.range_start}, {self.range_end}): {self.reason}"


#: ``on_data_loss(loss)``: told of each part of a range skipped because its data was gone
LossCallback = Callable[[DataLoss], None]


def merge_losses(losses: Iterable[DataLoss]) -> List[DataLoss]:
    """``losses`` without repeats, in range and position order."""
    return sorted(set(losses), key=lambda d: (d.position_key, d.start, d.end))


def _doc(batch_id: int, parts: Sequence[DataLoss]) -> Dict[str, Any]:
    first = parts[0]
    return {"batch": batch_id, "key": first.position_key, "where": first.where, "unit": first.unit,
            "range": [first.range_start, first.range_end], "lost": sum(p.lost for p in parts),
            "parts": [[p.start, p.end, p.reason] for p in parts]}


def record_losses(writes: Any, batch_id: int, losses: Iterable[DataLoss]) -> Dict[str, Dict[str, Any]]:
    """Add one ``loss`` incident record per range of ``losses`` to ``writes`` (a
    :class:`~dstream_exactly_once.stores.Writes`), keyed by the range's position key; returns the
    documents by position key. The record says where (``key``, ``where``), the planned ``range``,
    how many ``lost`` and each lost part ``[start, end, reason]``."""
    by_key: Dict[str, List[DataLoss]] = {}
    for d in merge_losses(losses):
        by_key.setdefault(d.position_key, []).append(d)
    docs = {key: _doc(batch_id, parts) for key, parts in by_key.items()}
    for key, doc in docs.items():
        writes.record_incident("loss", batch_id, doc, part=key)
    return docs


def loss_summary(losses: Iterable[DataLoss]) -> Dict[str, int]:
    """``{unit: total lost}`` of ``losses`` (``offsets``, ``bytes``)."""
    out: Dict[str, int] = {}
    for d in merge_losses(losses):
        out[d.unit] = out.get(d.unit, 0) + d.lost
    return out


def skip_command(store_url: str, app_id: str, batch_id: int) -> str:
    """The operator command that skips ``batch_id`` (``store_url`` already redacted)."""
    return f"dstream-eo batches skip --store {store_url} --app {app_id} --batch {batch_id} --execute"


def loss_error(batch_id: int, ranges: Sequence[SourceRange], cause: str, *, store_url: str, app_id: str,
               policy_hint: str) -> DataLossError:
    """The one error of a batch whose data is gone under a fail policy.

    ``cause`` is the reader's message (it names the lost range), ``ranges`` the batch's ranges,
    ``store_url`` the store's redacted URL and ``policy_hint`` how to choose the skip policy
    (``failOnDataLoss=False``, ``fail.on.data.loss=false``).
    """
    shown = ", ".join(r.describe() for r in ranges[:8]) + (f" and {len(ranges) - 8} more" if len(ranges) > 8 else "")
    err = DataLossError(
        f"batch {batch_id} cannot be read, its data is gone: {cause}. Nothing of batch {batch_id} was committed "
        f"(its ranges: {shown}); every driver that replays it stops here. To continue without the lost data, "
        f"skip the batch: {skip_command(store_url, app_id, batch_id)} (a dry run without --execute), or restart "
        f"with {policy_hint} to commit what still exists and record the loss in the store")
    err.batch = batch_id  # type: ignore[attr-defined]
    err.offset_ranges = list(ranges)  # type: ignore[attr-defined]
    return err


def loss_cause(text: str) -> Optional[str]:
    """The message of the library's ``DataLossError`` inside ``text`` (a Spark job failure's
    report, which carries the executor's Python traceback), or ``None`` when it holds none."""
    marker = "DataLossError: "
    i = text.rfind(marker)
    if i < 0:
        return None
    line = text[i + len(marker):].split("\n", 1)[0].strip()
    return line or None
