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
driver restarts (like Spark's own direct stream); use ``createExactlyOnceStream`` (or a store
with :func:`~dstream_exactly_once.exactly_once`) for exactly-once.

Spark checkpoints: Spark pickles every DStream function into the checkpoint, and with them the
stream. A stream with a recovery recipe (``createDirectStream``) pickles as that recipe, so
``StreamingContext.getOrCreate`` rebuilds it (see :mod:`._recovery`); any other stream pickles as
a refusal that names the reason and what to do instead.
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
from collections import OrderedDict
from datetime import datetime
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from pyspark.streaming import DStream, StreamingContext
from pyspark.streaming.dstream import TransformedDStream

from ..core._driver_ref import DriverOnly
from ..errors import ConfigurationError
from ._input_info import InputInfoReporter
from ._range_rdd import RangeRDD
from ._recovery import batch_ms, recovered, refuse_recovery

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


class _PlanTick(TransformedDStream):
    """The tick stream of a stream that plans when Spark generates the batch (see RangeDStream)."""


class RangeDStream(DriverOnly, TransformedDStream):
    """A DStream whose batches are RDDs of explicit source ranges (``rdd.offsetRanges()``).

    ``compute(time) -> RangeRDD`` is the driver-side batch builder (planner + RDD factory).
    ``plan_on_generate``: plan each batch when Spark generates it (as Spark's own direct stream
    does), not when its first output job runs; a stream recoverable from a Spark checkpoint needs
    this, so that every batch Spark checkpoints as pending has its ranges in the checkpoint; and
    only such a stream reports its batches' records and ranges to Spark's Streaming tab
    (:mod:`._input_info`). Every stream the library builds sets it (direct and exactly-once).

    Pickled (Spark writes DStream functions into its checkpoint), a stream becomes the recipe
    :meth:`_recovery_recipe` returns, or a refusal naming :attr:`_recovery_refusal` when it has none.
    """

    #: why ``StreamingContext.getOrCreate`` cannot recover this kind of stream, and what to do instead
    _recovery_refusal = ("its positions are not in the checkpoint. Build the context with your setup function "
                         "(ssc = create()) instead of StreamingContext.getOrCreate")

    def __init__(self, ssc: StreamingContext, compute: Callable[[datetime], RangeRDD],
                 plan_on_generate: bool = False) -> None:
        self._register()
        self._init_driver_state(tempfile.mkdtemp(prefix="deo-tick-"), compute)
        # An empty monitored directory yields one empty RDD per batch and, unlike a queue stream,
        # supports ssc.checkpoint(): the tick that drives compute(time).
        tick: DStream[Any] = ssc.textFileStream(self._tick_dir)
        #: feeds Spark's Streaming tab (batches planned while Spark generates them)
        self._input_info: Optional[InputInfoReporter] = None
        if plan_on_generate:
            self._input_info = InputInfoReporter.for_tick(ssc, tick)
            tick = _PlanTick(tick, self._plan_tick)
        super().__init__(tick, self._rdd_for)

    def _init_driver_state(self, tick_dir: str, compute: Callable[[datetime], RangeRDD]) -> None:
        self._tick_dir = tick_dir
        self._build = compute
        self._batches: OrderedDict[datetime, RangeRDD] = OrderedDict()
        self._lock = threading.RLock()
        #: batches read back from a Spark checkpoint: batch time (ms) -> ranges, and the newest time
        self._restored: Dict[int, List[Any]] = {}
        self._restored_until: Optional[int] = None
        self._rebuild: Optional[Callable[[Sequence[Any]], RangeRDD]] = None

    # ---------------------------------------------------------------- batch memo
    def _plan_tick(self, time: datetime, tick: Any) -> Any:
        rdd = self._rdd_for(time)
        reporter = self.__dict__.get("_input_info")
        if reporter is not None:
            reporter.report(time, rdd.offsetRanges())
        return tick

    def _rdd_for(self, time: datetime, _tick: Any = None) -> RangeRDD:
        with self._lock:
            rdd = self._batches.get(time)
            if rdd is None:
                rdd = self._restored_rdd(time)
                if rdd is None:
                    rdd = self._build(time)
                self._batches[time] = rdd
                while len(self._batches) > _REMEMBERED_BATCHES:
                    self._batches.popitem(last=False)
            return rdd

    def _restored_rdd(self, time: datetime) -> Optional[RangeRDD]:
        """The checkpointed ranges of the batch at ``time`` as an RDD (streams recovered from a checkpoint)."""
        if self._restored_until is None or self._rebuild is None:
            return None
        ms = batch_ms(time)
        ranges = self._restored.pop(ms, None)
        if ranges is not None:
            return self._rebuild(ranges)
        if ms <= self._restored_until:
            raise ConfigurationError(
                f"Spark asked the recovered stream for the batch at {time} ({ms} ms), which is not newer than the "
                f"checkpoint's last batch ({self._restored_until} ms), but the checkpoint holds no ranges for it "
                f"(a stream remembers its last {_REMEMBERED_BATCHES} batches): planning it afresh would read other "
                f"records than the batch it replaces. Start from a new checkpoint directory (the stream then starts "
                f"from its fromOffsets or auto.offset.reset)")
        return None

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

    # ---------------------------------------------------------------- Spark checkpoint
    def _recovery_recipe(self) -> Optional[Dict[str, Any]]:
        """What a recovering driver needs to rebuild this stream (``None``: not recoverable)."""
        return None

    def _plan_state(self) -> Dict[str, Any]:
        """The remembered batches (time in ms -> ranges) and the tick directory, for a recipe."""
        with self._lock:
            planned = {batch_ms(t): list(r.offsetRanges()) for t, r in self._batches.items()}
            planned.update({ms: list(ranges) for ms, ranges in self._restored.items()})
        return {"batches": planned, "tick_dir": self._tick_dir}

    def _restore_plan_state(self, state: Mapping[str, Any], rebuild: Callable[[Sequence[Any]], RangeRDD]) -> None:
        """Driver state of a stream rebuilt from a recipe (no Spark DStream is created)."""
        self._init_driver_state(state["tick_dir"], self._not_planned)
        os.makedirs(self._tick_dir, exist_ok=True)  # the restored tick stream watches it
        self._restored = {int(ms): list(ranges) for ms, ranges in state["batches"].items()}
        self._restored_until = max(self._restored, default=0)
        self._rebuild = rebuild

    @staticmethod
    def _not_planned(time: datetime) -> RangeRDD:
        raise NotImplementedError

    def __reduce__(self) -> Any:
        recipe = self._recovery_recipe()
        if recipe is None:
            return (refuse_recovery, (self._driver_token, type(self).__name__, self._recovery_refusal))
        return (_recover_stream, (type(self), self._driver_token, recipe))

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


def _recover_stream(cls: type, token: str, recipe: Dict[str, Any]) -> Any:
    """Unpickling target of a recoverable stream: one object per token and recovery."""
    return recovered(token, lambda: cls._from_recipe(token, recipe))  # type: ignore[attr-defined]


class KafkaDStream(RangeDStream):
    """A DStream of decoded Kafka records; each batch is a ``KafkaRDD`` whose ``offsetRanges()``
    lists the batch's :class:`~dstream_exactly_once.OffsetRange` values.

    Unit of parallelism: one Spark task per topic partition per batch. Delivery: at-least-once for
    outputs across driver restarts; see ``KafkaUtils.createExactlyOnceStream``.
    """
