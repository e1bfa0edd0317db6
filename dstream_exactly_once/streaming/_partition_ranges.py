"""A planned batch's ranges as user code sees them: a partition index never silently picks a range.

Spark 2.4 code finds a partition's Kafka range with ``rdd.offsetRanges()[TaskContext.get().partitionId()]``
(or ``batch.ranges[...]``): partition ``i`` read range ``i``. When the task planner shapes a batch
(:mod:`dstream_exactly_once.core._tasks`: small ranges packed into one task, large ones split, empty
ones given no task) partition ``i`` reads the pieces of task ``i`` instead, so that index names the
wrong range and the bookkeeping built on it is silently wrong.

The ranges of such a batch are handed out as :class:`PlannedRanges` (``offsetRanges()``, a list) and
:class:`PlannedRangeTuple` (``batch.ranges`` given to the output functions): everything a list or tuple
does works as before — ``len``, iteration, ``in``, slices, sorting, and indexing on the driver — but
indexing one range by position *inside a Spark task* raises :class:`~dstream_exactly_once.errors.ConfigurationError`
naming :func:`~._task_context.current_ranges`, which returns the ranges the running task reads.

An application upgraded in place from a release that ran one task per range is not switched to
packed tasks silently: :func:`check_task_layout` refuses to start its exactly-once Kafka stream until
``spark.streaming.kafka.tasks.pack`` says which layout it wants.
"""

from __future__ import annotations

from typing import Any, Iterable, Optional, SupportsIndex, Tuple, overload

from pyspark import TaskContext

from ..errors import ConfigurationError
from ..kafka._spark_conf import PACK_KEY
from ..stores._writes import PlannedBatch

__all__ = ["PACK_KEY", "PlannedRangeTuple", "PlannedRanges", "check_task_layout", "planned_index_error", "shown_batch"]



def planned_index_error(what: str, index: object) -> ConfigurationError:
    """The error for ``what[index]`` inside a task of a planned RDD."""
    ctx = TaskContext.get()
    part = ctx.partitionId() if ctx is not None else "?"
    return ConfigurationError(
        f"{what}[{index!r}] inside a Spark task (partition {part}): this batch's tasks are planned (small ranges "
        f"packed into one task, large ones split, empty ones without a task), so partition i does not read range i "
        f"and a range picked by position is not the one this task reads. Inside the task, call "
        f"dstream_exactly_once.current_ranges() for the ranges it reads (current_pieces() for "
        f"the byte/offset parts); on the driver, iterate or index the ranges as before. For one task per range (the "
        f"Spark 2.4 layout) set {PACK_KEY}=false (Kafka streams)")


def _in_task() -> bool:
    return TaskContext.get() is not None


class PlannedRanges(list):  # type: ignore[type-arg]
    """``offsetRanges()`` of a planned RDD: a list whose items cannot be picked by position inside a task."""

    @overload
    def __getitem__(self, index: SupportsIndex) -> Any: ...

    @overload
    def __getitem__(self, index: slice) -> list: ...  # type: ignore[type-arg]

    def __getitem__(self, index: Any) -> Any:
        if not isinstance(index, slice) and _in_task():
            raise planned_index_error("offsetRanges()", index)
        return list.__getitem__(self, index)


class PlannedRangeTuple(tuple):  # type: ignore[type-arg]
    """``batch.ranges`` handed to output functions for a planned batch: a tuple whose items cannot be
    picked by position inside a task."""

    def __new__(cls, ranges: Iterable[Any]) -> PlannedRangeTuple:
        return super().__new__(cls, tuple(ranges))

    def __getnewargs__(self) -> Tuple[Tuple[Any, ...]]:  # type: ignore[override]
        return (tuple(self),)

    @overload
    def __getitem__(self, index: SupportsIndex) -> Any: ...

    @overload
    def __getitem__(self, index: slice) -> Tuple[Any, ...]: ...

    def __getitem__(self, index: Any) -> Any:
        if not isinstance(index, slice) and _in_task():
            raise planned_index_error("batch.ranges", index)
        return tuple.__getitem__(self, index)


def shown_batch(batch: PlannedBatch, rdd: Any) -> PlannedBatch:
    """``batch`` as an output function receives it for ``rdd``: with :class:`PlannedRangeTuple` ranges
    when ``rdd``'s tasks were planned (:attr:`~._range_rdd.RangeRDD.planned`), else ``batch`` itself."""
    if not getattr(rdd, "planned", False):
        return batch
    return PlannedBatch(batch.batch_id, batch.batch_time_ms, PlannedRangeTuple(batch.ranges))


def check_task_layout(store: Any, pack: Optional[bool]) -> None:
    """Refuse to start an exactly-once Kafka stream whose application's store was last written by a
    release that ran one Spark task per range, unless ``spark.streaming.kafka.tasks.pack`` is set
    (``pack`` not ``None``): packing by default would change what code indexing ranges by partition
    computes. Reads the store only (:meth:`~dstream_exactly_once.stores.BatchLog.newest_entry_layout`)."""
    if pack is not None:
        return
    layout = store.newest_entry_layout()
    if layout is None or layout >= 3:
        return
    raise ConfigurationError(
        f"application {store.app_id!r}: its store was last written by a release of dstream-exactly-once that ran "
        f"one Spark task per Kafka range (its newest offset-log entry is in the layout-{layout} encoding). This "
        f"release packs small ranges into one task by default for exactly-once streams, so RDD partition i would no "
        f"longer read offsetRanges()[i] / batch.ranges[i]. Choose with the Spark conf key {PACK_KEY}: false keeps one "
        f"task per range (code that picks a range by TaskContext.get().partitionId() stays right), true packs (inside "
        f"a task, current_ranges() gives the ranges it reads). Nothing was written to the store")
