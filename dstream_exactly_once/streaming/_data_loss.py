"""The Spark side of the data-loss policy: executors' loss reports reach the commits, failures name the way out.

Under a skip policy each source reader reports the parts of a range whose data was gone
(:class:`~dstream_exactly_once.core._loss.DataLoss`) to a :class:`LossReporter`, which is injected
into the reader and pickled into the tasks. The reporter keeps the reports twice:

- in the executor process, per range, for a per-partition commit in the same task
  (:func:`begin_range` before the range is read, :func:`task_losses` before its commit);
- in one accumulator per SparkContext, keyed by range, which the driver reads after the batch's
  jobs (:func:`batch_losses`) for whole-batch commits, the progress record and the WARN log line.

Under a fail policy the reader raises ``DataLossError`` on the executor; Spark reports it to the
driver as a job failure, and :func:`loss_failure` turns it into the one error that names the
batch, its ranges and the command that continues.
"""

from __future__ import annotations

import logging
import threading
import weakref
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from pyspark import SparkContext
from pyspark.accumulators import Accumulator, AccumulatorParam

from ..core._loss import DataLoss, loss_cause, loss_error, merge_losses
from ..core._ranges import SourceRange
from ..errors import DataLossError
from ..files._options import FILE_LOSS_OPTION
from ..stores._base import PlannedBatch, TransactionalStore

log = logging.getLogger(__name__)

__all__ = ["LossReporter", "batch_losses", "begin_range", "log_losses", "loss_accumulator", "loss_failure",
           "lost_in", "new_loss_accumulator", "reading_piece", "task_losses"]

RangeId = Tuple[str, int, int]
# (range id, start of the piece read): a range read in pieces by several tasks reports per piece
ReadId = Tuple[RangeId, int]
_Reports = Dict[ReadId, Tuple[DataLoss, ...]]


def _range_id(r: SourceRange) -> RangeId:
    return (r.position_key, r.start, r.end)


class _LargestPerRange(AccumulatorParam[_Reports]):
    """Keeps, per range (per piece of a split range), the report of the read that lost the most (a
    range read twice — a task retry, a second action — counts once). Builds a new dict (the driver
    reads it while Spark's accumulator thread merges)."""

    def zero(self, value: _Reports) -> _Reports:
        return {}

    def addInPlace(self, value1: _Reports, value2: _Reports) -> _Reports:  # noqa: N802 - PySpark API name
        out = dict(value1)
        for rid, parts in value2.items():
            if sum(p.lost for p in parts) > sum(p.lost for p in out.get(rid, ())):
                out[rid] = parts
        return out


_ACCUMULATORS: weakref.WeakKeyDictionary[SparkContext, Accumulator[_Reports]] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()

# executor process: range id -> the losses the running read of that range reported
_TASK: Dict[RangeId, List[DataLoss]] = {}
# executor process: range id -> the start of the piece of it being read (see reading_piece)
_PIECE: Dict[RangeId, int] = {}
# executor process: the losses the running read of each piece reported
_READ: Dict[ReadId, List[DataLoss]] = {}


def loss_accumulator(sc: SparkContext) -> Accumulator[_Reports]:
    """The SparkContext's one accumulator of loss reports (entries appear only on data loss)."""
    with _LOCK:
        acc = _ACCUMULATORS.get(sc)
        if acc is None:
            acc = _ACCUMULATORS[sc] = sc.accumulator({}, _LargestPerRange())
        return acc


def new_loss_accumulator(sc: SparkContext) -> Accumulator[_Reports]:
    """An accumulator of loss reports of its own (one stream's, apart from the SparkContext's shared one)."""
    return sc.accumulator({}, _LargestPerRange())


def lost_in(accumulator: Optional[Accumulator[_Reports]], unit: str, accept: Callable[[str], bool]) -> int:
    """The ``unit``s lost in the reports of ``accumulator`` whose position key ``accept`` takes (driver side)."""
    if accumulator is None:
        return 0
    return sum(d.lost for parts in accumulator.value.values() for d in parts
               if d.unit == unit and accept(d.position_key))


class LossReporter:
    """The ``on_data_loss`` callback injected into a source reader (picklable: an accumulator)."""

    def __init__(self, accumulator: Accumulator[_Reports]) -> None:
        self.accumulator = accumulator

    def __call__(self, loss: DataLoss) -> None:
        rid = loss.range_id()
        _TASK.setdefault(rid, []).append(loss)
        read_id = (rid, _PIECE.get(rid, loss.range_start))
        read = _READ.setdefault(read_id, [])
        read.append(loss)
        self.accumulator.add({read_id: tuple(merge_losses(read))})


def reading_piece(r: SourceRange, start: int) -> None:
    """The running task reads the piece of ``r`` that starts at ``start`` (losses reported meanwhile
    belong to that piece; a split range's pieces are read by several tasks)."""
    rid = _range_id(r)
    _PIECE[rid] = start
    _READ.pop((rid, start), None)


def begin_range(r: SourceRange) -> None:
    """Forget earlier reports of ``r`` in this process (call before the task reads it)."""
    rid = _range_id(r)
    _TASK.pop(rid, None)
    _PIECE.pop(rid, None)
    _READ.pop((rid, r.start), None)


def task_losses(r: SourceRange) -> List[DataLoss]:
    """The losses this process's read of ``r`` reported (call after reading, before committing)."""
    return merge_losses(_TASK.pop(_range_id(r), []))


def batch_losses(sc: SparkContext, batch: PlannedBatch) -> List[DataLoss]:
    """The losses executors reported while reading ``batch``'s ranges (on the driver, after its jobs)."""
    acc = _ACCUMULATORS.get(sc)
    if acc is None:
        return []
    reports = acc.value
    wanted = {_range_id(r) for r in batch.ranges}
    out: List[DataLoss] = []
    for (rid, _end), parts in reports.items():
        if rid in wanted:
            out.extend(parts)
    return merge_losses(out)


def log_losses(batch: PlannedBatch, losses: Sequence[DataLoss], where: str) -> None:
    """The one WARN line per lost range of a committed batch."""
    for d in losses:
        log.warning("data loss in batch %d: skipped %d %s, %s; recorded in the store (%s)", batch.batch_id, d.lost,
                    d.unit, d.describe(), where)


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen = set()
    e: Optional[BaseException] = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        yield e
        e = e.__cause__ or e.__context__


def policy_hint(ranges: Sequence[SourceRange]) -> str:
    """How the skip policy of the batch's source is chosen."""
    if ranges and all(r.kind == "file" for r in ranges):
        return FILE_LOSS_OPTION
    return "failOnDataLoss=False (or Spark conf spark.streaming.kafka.failOnDataLoss=false)"


def loss_failure(exc: BaseException, batch: PlannedBatch, store: TransactionalStore) -> Optional[DataLossError]:
    """The batch-level :class:`DataLossError` for ``exc`` when it is (or carries, as Spark's report of
    an executor's error) a data loss under a fail policy; ``None`` for any other error."""
    cause = None
    for e in _chain(exc):
        if isinstance(e, DataLossError):
            if getattr(e, "batch", None) is not None:
                return None  # already names its batch
            cause = str(e)
            break
        cause = loss_cause(str(e))
        if cause is not None:
            break
    if cause is None:
        return None
    return loss_error(batch.batch_id, list(batch.ranges), cause, store_url=store.display_url,
                      app_id=store.app_id, policy_hint=policy_hint(batch.ranges))
