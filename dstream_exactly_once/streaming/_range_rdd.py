"""RangeRDD: Spark partitions over a batch's ranges, read on the executors by the source's reader.

Unit of parallelism: one task per range (one stream partition's slice of the batch), or — when the
RDD is built from planned tasks (:mod:`dstream_exactly_once.core._tasks`) — one task per planned
task: several small ranges packed together, or one piece of a split range. ``offsetRanges()``
lists every range of the batch either way. Delivery: the RDD is a deterministic function of its
ranges and tasks — recomputing a partition (task retry, replayed batch) yields the same records,
which is what exactly-once output builds on.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, List, Optional, Sequence, Type, TypeVar

from pyspark import RDD, SparkContext
from pyspark.rdd import PipelinedRDD

from ..core._ranges import SourceRange
from ..core._source import RangeReader
from ..core._tasks import Task, one_task_per_range
from ._data_loss import reading_piece
from ._partition_ranges import PlannedRanges
from ._pinned import pinned_rdd
from ._task_context import remember_task

__all__ = ["RangeRDD", "make_range_rdd"]


class RangeRDD(PipelinedRDD):
    """An RDD built from explicit ranges; partition ``i`` reads ``offsetRanges()[i]``, or — built from
    planned tasks (:attr:`planned`) — the pieces ``tasks[i]``.

    Narrow transformations (``map``, ``filter``, ``mapPartitions``…) are pipelined into the same
    Python task that reads the source, so records are not serialized between them.
    """

    def __init__(self, prev: RDD, func: Callable[[int, Iterable[Any]], Iterable[Any]],
                 offset_ranges: Sequence[SourceRange], tasks: Optional[Sequence[Task]] = None,
                 planned: bool = False) -> None:
        super().__init__(prev, func, preservesPartitioning=False)
        self._offset_ranges = list(offset_ranges)
        self._tasks = list(tasks) if tasks is not None else one_task_per_range(self._offset_ranges)
        self._planned = planned

    @property
    def planned(self) -> bool:
        """Whether the task planner shaped the partitions (then partition ``i`` does not read range ``i``)."""
        return self._planned

    def offsetRanges(self) -> List[Any]:  # noqa: N802 - Spark API name (HasOffsetRanges)
        """Every range of the batch, in batch order (with one task per range: partition order). When
        the tasks were planned, a :class:`~._partition_ranges.PlannedRanges`: indexing it by position
        inside a Spark task raises (use :func:`~._task_context.current_ranges` there)."""
        return PlannedRanges(self._offset_ranges) if self._planned else list(self._offset_ranges)

    @property
    def tasks(self) -> List[Task]:
        """What each partition reads: partition ``i`` reads the pieces ``tasks[i]`` in order."""
        return list(self._tasks)


R = TypeVar("R", bound=RangeRDD)


def make_range_rdd(sc: SparkContext, ranges: Sequence[SourceRange], reader: RangeReader,
                   rdd_class: Type[R] = RangeRDD,  # type: ignore[assignment]
                   locations: Optional[Sequence[Sequence[str]]] = None,
                   tasks: Optional[Sequence[Task]] = None) -> R:
    """The RDD of ``ranges`` read by ``reader`` (no Spark job runs here): one partition per range, or
    with ``tasks`` one partition per task (its pieces read in order). With ``locations``, partition
    ``i`` prefers the hosts ``locations[i]`` (Spark preferred locations, see :mod:`._pinned`)."""
    ranges = list(ranges)
    planned = list(tasks) if tasks is not None else one_task_per_range(ranges)
    per_range = tasks is None

    def read_partition(index: int, _ignored: Iterable[Any]) -> Iterable[Any]:
        if index >= len(planned):
            return iter(())
        remember_task(planned[index])  # before the functions pipelined after this one run
        if per_range:
            return reader.read(ranges[index])
        return _read_task(reader, planned[index])

    if locations is not None and planned:
        if len(locations) != len(planned):
            raise ValueError(f"make_range_rdd: {len(locations)} locations for {len(planned)} partitions")
        base = pinned_rdd(sc, [(i, list(hosts)) for i, hosts in enumerate(locations)])
    else:
        base = sc.parallelize(range(max(len(planned), 1)), max(len(planned), 1))
    return rdd_class(base, read_partition, ranges, planned, planned=not per_range)


def _read_task(reader: RangeReader, task: Task) -> Iterator[Any]:
    """The records of ``task``'s pieces, in order (together, when the reader reads them so)."""
    if reader.reads_pieces_together:
        for k, piece in enumerate(task):  # a piece that continues the one before it is read with it
            if not piece.whole and (k == 0 or task[k - 1].range != piece.range):
                reading_piece(piece.range, piece.start)
        yield from reader.read_pieces(task)
        return
    for piece in task:
        if piece.whole:
            yield from reader.read(piece.range)
        else:
            reading_piece(piece.range, piece.start)
            yield from reader.read_part(piece.range, piece.start, piece.end)
