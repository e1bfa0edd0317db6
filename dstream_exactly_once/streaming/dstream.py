"""Direct DStreams: batches planned on the driver as explicit ranges, no receivers, no WAL.

:class:`RangeDStream` serves every source (Kafka offset ranges, file byte ranges). How a Python
DStream gets one range RDD per batch: a tick stream (a queue stream whose default RDD
is returned every interval) is transformed by a driver-side function called with each batch time;
it plans the batch's ranges once (memoized per batch time, so several output operations share one
plan) and returns the RDD of those ranges. ``transform``/``foreachRDD`` on this stream hand user
functions that RDD, so ``rdd.offsetRanges()`` works as in Spark 2.4; narrow operations are
folded into the same Python pass that reads the source.

Unit of parallelism: one Spark task per range per batch. Delivery: the ranges of each
batch are decided once on the driver; with plain Spark outputs this is at-least-once across
driver restarts (like Spark's own direct stream without checkpoints); use
``createExactlyOnceStream`` (or a store with :func:`~dstream_exactly_once.exactly_once`) for
exactly-once.
"""

from __future__ import annotations

import logging
import tempfile
import threading
from collections import OrderedDict
from datetime import datetime
from typing import Any, Callable, Dict, List

from pyspark.streaming import DStream, StreamingContext
from pyspark.streaming.dstream import TransformedDStream

from ..core.driver_ref import DriverOnly
from .range_rdd import RangeRDD

log = logging.getLogger(__name__)

__all__ = ["KafkaDStream", "RangeDStream", "batch_seconds"]

_REMEMBERED_BATCHES = 256


def batch_seconds(ssc: StreamingContext) -> float:
    """The StreamingContext's batch interval in seconds (read from the JVM)."""
    return float(ssc._jssc.ssc().graph().batchDuration().milliseconds()) / 1000.0


def _two_args(func: Callable[..., Any]) -> Callable[[datetime, Any], Any]:
    argc = func.__code__.co_argcount - (1 if hasattr(func, "__self__") else 0)
    if argc == 1:
        return lambda _t, rdd: func(rdd)
    if argc == 2:
        return func
    raise TypeError(f"{func!r} should take one argument (rdd) or two (time, rdd), it takes {argc}")


class RangeDStream(DriverOnly, TransformedDStream):
    """A DStream whose batches are RDDs of explicit source ranges (``rdd.offsetRanges()``).

    ``compute(time) -> RangeRDD`` is the driver-side batch builder (planner + RDD factory).
    """

    def __init__(self, ssc: StreamingContext, compute: Callable[[datetime], RangeRDD]) -> None:
        self._register()
        self._tick_dir = tempfile.mkdtemp(prefix="deo-tick-")
        # An empty monitored directory yields one empty RDD per batch and, unlike a queue stream,
        # supports ssc.checkpoint(): the tick that drives compute(time).
        tick: DStream[Any] = ssc.textFileStream(self._tick_dir)
        self._build = compute
        self._batches: OrderedDict[datetime, RangeRDD] = OrderedDict()
        self._lock = threading.RLock()
        super().__init__(tick, self._rdd_for)

    # ---------------------------------------------------------------- batch memo
    def _rdd_for(self, time: datetime, _tick: Any = None) -> RangeRDD:
        with self._lock:
            rdd = self._batches.get(time)
            if rdd is None:
                rdd = self._build(time)
                self._batches[time] = rdd
                while len(self._batches) > _REMEMBERED_BATCHES:
                    self._batches.popitem(last=False)
            return rdd

    def offsetRangesAt(self, time: datetime) -> List[Any]:  # noqa: N802 - Spark-style name
        """The ranges of the batch at ``time`` (driver side)."""
        with self._lock:
            rdd = self._batches.get(time)
        if rdd is None:
            raise KeyError(f"no batch at {time} (only the last {_REMEMBERED_BATCHES} are remembered)")
        return rdd.offsetRanges()

    def batches(self) -> Dict[datetime, List[Any]]:
        with self._lock:
            return {t: r.offsetRanges() for t, r in self._batches.items()}

    # ---------------------------------------------------------------- DStream API
    def transform(self, func: Callable[..., Any]) -> TransformedDStream:  # type: ignore[override]
        """Like ``DStream.transform``; ``func`` receives this batch's range RDD."""
        f = _two_args(func)
        rdd_for = self._rdd_for
        return TransformedDStream(self.prev, lambda t, tick: f(t, rdd_for(t, tick)))

    def foreachRDD(self, func: Callable[..., Any]) -> None:  # noqa: N802 - Spark API name
        """Like ``DStream.foreachRDD``; ``func`` receives this batch's range RDD."""
        f = _two_args(func)
        rdd_for = self._rdd_for
        DStream.foreachRDD(self.prev, lambda t, tick: f(t, rdd_for(t, tick)))


class KafkaDStream(RangeDStream):
    """A DStream of decoded Kafka records; each batch is a ``KafkaRDD`` whose ``offsetRanges()``
    lists the batch's :class:`~dstream_exactly_once.OffsetRange` values.

    Unit of parallelism: one Spark task per topic partition per batch. Delivery: at-least-once for
    outputs across driver restarts; see ``KafkaUtils.createExactlyOnceStream``.
    """
