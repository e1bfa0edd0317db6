"""RangeRDD: one Spark partition per source range, read on the executors by the source's reader.

Unit of parallelism: one task per range (one stream partition's slice of the batch). Delivery:
the RDD is a deterministic function of its ranges — recomputing a partition (task retry, replayed
batch) yields the same records, which is what exactly-once output builds on.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, List, Optional, Sequence, Type, TypeVar

from pyspark import RDD, SparkContext
from pyspark.rdd import PipelinedRDD

from ..core.ranges import SourceRange
from ..core.source import RangeReader
from .pinned import pinned_rdd

__all__ = ["RangeRDD", "make_range_rdd"]


class RangeRDD(PipelinedRDD):
    """An RDD built from explicit ranges; partition ``i`` reads ``offsetRanges()[i]``.

    Narrow transformations (``map``, ``filter``, ``mapPartitions``…) are pipelined into the same
    Python task that reads the source, so records are not serialized between them.
    """

    def __init__(self, prev: RDD, func: Callable[[int, Iterable[Any]], Iterable[Any]],
                 offset_ranges: Sequence[SourceRange]) -> None:
        super().__init__(prev, func, preservesPartitioning=False)
        self._offset_ranges = list(offset_ranges)

    def offsetRanges(self) -> List[Any]:  # noqa: N802 - Spark API name (HasOffsetRanges)
        """The ranges this RDD reads, in partition order."""
        return list(self._offset_ranges)


R = TypeVar("R", bound=RangeRDD)


def make_range_rdd(sc: SparkContext, ranges: Sequence[SourceRange], reader: RangeReader,
                   rdd_class: Type[R] = RangeRDD,  # type: ignore[assignment]
                   locations: Optional[Sequence[Sequence[str]]] = None) -> R:
    """The RDD of ``ranges`` read by ``reader`` (no Spark job runs here). With ``locations``, partition
    ``i`` prefers the hosts ``locations[i]`` (Spark preferred locations, see :mod:`.pinned`)."""
    ranges = list(ranges)

    def read_partition(index: int, _ignored: Iterable[Any]) -> Iterable[Any]:
        if index >= len(ranges):
            return iter(())
        return reader.read(ranges[index])

    if locations is not None and ranges:
        if len(locations) != len(ranges):
            raise ValueError(f"make_range_rdd: {len(locations)} locations for {len(ranges)} ranges")
        base = pinned_rdd(sc, [(i, list(hosts)) for i, hosts in enumerate(locations)])
    else:
        base = sc.parallelize(range(max(len(ranges), 1)), max(len(ranges), 1))
    return rdd_class(base, read_partition, ranges)
