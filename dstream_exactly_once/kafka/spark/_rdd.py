"""KafkaRDD: Spark partitions over a batch's :class:`OffsetRange` s, read on executors by the Kafka
source's :class:`~dstream_exactly_once.kafka._range_reader.KafkaRangeReader` (kafka-python by default,
or confluent-kafka: ``spark.streaming.kafka.reader``). This module is the Spark glue around it: the
task's attempt number and ranges (:mod:`dstream_exactly_once.streaming._task_context`) and the driver-side skip count.

Unit of parallelism: one task per offset range (one topic partition's slice of the batch, the
Spark-2.4 layout: partition ``i`` reads ``offsetRanges()[i]``), or — built with task options — one
task per planned task (:mod:`dstream_exactly_once.core._tasks`, sizes in records): empty ranges get
no task, small ranges are packed into one task read by ONE consumer, ranges larger than the split
size are read in pieces by offset. ``offsetRanges()`` lists every range of the batch either way.
Tasks have no preferred location (Kafka is read over the network; ``LocationStrategies`` are
accepted and have no effect), so Spark spreads packed tasks as it spreads any others.
Delivery: the RDD is a deterministic function of its ranges and tasks — recomputing a partition
(task retry, replayed batch) yields the same records, which is what exactly-once output builds on.
With ``failOnDataLoss=False`` offsets deleted before they were read are skipped on the executor;
:meth:`KafkaRDD.data_loss_skipped` counts them on the driver.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from pyspark import SparkContext
from pyspark.accumulators import Accumulator, AccumulatorParam

from ...core._loss import DataLoss, LossCallback
from ...core._tasks import TaskOptions, plan_tasks
from ...errors import ConfigurationError
from ...streaming._range_rdd import RangeRDD, make_range_rdd
from ...streaming._task_context import remember_current
from .._offsets import Decoder, KafkaMessageAndMetadata, OffsetRange, utf8_decoder
from .._params import KafkaConfig
from .._range_reader import SPLIT_FLOOR, KafkaRangeReader
from .._reader_choice import DEFAULT_READER

__all__ = ["KafkaRDD", "make_kafka_rdd", "per_range"]

# {(KafkaRDD key, partition index, first lost offset): offsets skipped from there reading that partition}
_Skips = Dict[Tuple[int, ...], int]


class _MaxPerPartition(AccumulatorParam[_Skips]):
    """Merges skip counts by maximum per (RDD, partition): a partition computed again (a second
    action, a recomputed stage) is counted once. Builds a new dict (the driver reads it while
    Spark's accumulator thread merges)."""

    def zero(self, value: _Skips) -> _Skips:
        return {}

    def addInPlace(self, value1: _Skips, value2: _Skips) -> _Skips:  # noqa: N802 - PySpark API name
        out = dict(value1)
        for k, n in value2.items():
            if n > out.get(k, 0):
                out[k] = n
        return out


_SKIPS: weakref.WeakKeyDictionary[SparkContext, Accumulator[_Skips]] = weakref.WeakKeyDictionary()
_SKIPS_LOCK = threading.Lock()
_RDD_KEYS = itertools.count()


def _skips_accumulator(sc: SparkContext) -> Accumulator[_Skips]:
    """One accumulator per SparkContext for every KafkaRDD's skips (entries appear only on data
    loss), not one per RDD: PySpark never forgets an accumulator, and a stream makes an RDD per batch."""
    with _SKIPS_LOCK:
        acc = _SKIPS.get(sc)
        if acc is None:
            acc = _SKIPS[sc] = sc.accumulator({}, _MaxPerPartition())
        return acc


class KafkaRDD(RangeRDD):
    """An RDD built from explicit offset ranges: partition ``i`` holds ``offsetRanges()[i]``, or, when
    its tasks were planned, the pieces ``tasks[i]`` (``getNumPartitions()`` is the task count).

    Narrow transformations (``map``, ``filter``, ``mapPartitions``…) are pipelined into the
    same Python task that reads Kafka, so records are not serialized between them.
    """

    _skips: Optional[Accumulator[_Skips]] = None
    _key: int = -1

    def offsetRanges(self) -> List[OffsetRange]:  # noqa: N802 - Spark API name
        """Every range of the batch, in batch order (``HasOffsetRanges``; with one task per range:
        partition order; planned tasks: see :meth:`RangeRDD.offsetRanges`)."""
        return RangeRDD.offsetRanges(self)  # make_kafka_rdd admits OffsetRanges only

    def data_loss_skipped(self) -> int:
        """Offsets of this RDD's ranges that were deleted before they were read and skipped
        (``failOnDataLoss=False``), counted on the driver.

        Valid after an action on this RDD (or on an RDD derived from it in the same stage) has
        completed; 0 before. Each partition counts once however often it is computed: a partition
        read again later counts what that read skipped if it skipped more (retention moved on).
        With ``failOnDataLoss=True`` nothing is skipped (the read raises ``DataLossError``).
        """
        if self._skips is None:
            return 0
        key = self._key
        return sum(n for (k, *_), n in self._skips.value.items() if k == key)


class _CountingLosses:
    """The ``on_data_loss`` callback of a KafkaRDD's reader (picklable): counts each lost part in the
    RDD's skip accumulator (keyed by RDD, partition index and the part's first offset, merged by
    maximum, so a part read again counts once) and hands it on to ``reporter`` (recorded beside the
    exactly-once commits)."""

    def __init__(self, skips: Accumulator[_Skips], key: int, indexes: Dict[str, int],
                 reporter: Optional[LossCallback]) -> None:
        self.skips = skips
        self.key = key
        self.indexes = indexes
        self.reporter = reporter

    def __call__(self, loss: DataLoss) -> None:
        self.skips.add({(self.key, self.indexes.get(loss.position_key, -1), loss.start): loss.lost})
        if self.reporter is not None:
            self.reporter(loss)


def make_kafka_rdd(sc: SparkContext, config: KafkaConfig, ranges: Sequence[OffsetRange], *,
                   key_decoder: Decoder = utf8_decoder, value_decoder: Decoder = utf8_decoder,
                   message_handler: Optional[Callable[[KafkaMessageAndMetadata], Any]] = None,
                   poll_timeout_ms: int = 120000, fail_on_data_loss: bool = True,
                   reader: str = DEFAULT_READER, reporter: Optional[LossCallback] = None,
                   tasks: Optional[TaskOptions] = None) -> KafkaRDD:
    """Build the RDD of ``ranges`` (no Spark job runs here): a :class:`KafkaRangeReader` per task,
    reading with the executor reader named ``reader`` (already checked on the driver); lost offsets
    are reported to ``reporter`` under ``fail_on_data_loss=False``. A range of another source is
    refused.

    Without ``tasks`` (or with packing and splitting both off and no range skipped) partition ``i``
    reads ``ranges[i]``, empty ranges included; with ``tasks`` the task planner shapes the
    partitions (target count default ``sc.defaultParallelism``; default split size at least
    :data:`~dstream_exactly_once.kafka._range_reader.SPLIT_FLOOR` records)."""
    ranges = list(ranges)
    for r in ranges:
        if not isinstance(r, OffsetRange):
            raise ConfigurationError(f"a KafkaRDD reads OffsetRange values, got {r!r}: ranges of another source "
                                     f"are read by that source's stream")
    key = next(_RDD_KEYS)
    skips = None if fail_on_data_loss else _skips_accumulator(sc)
    on_data_loss = None if skips is None else _CountingLosses(
        skips, key, {r.position_key: i for i, r in enumerate(ranges)}, reporter)
    task_reader = KafkaRangeReader(config, key_decoder=key_decoder, value_decoder=value_decoder,
                                   message_handler=message_handler, poll_timeout_ms=poll_timeout_ms,
                                   fail_on_data_loss=fail_on_data_loss, reader=reader, on_data_loss=on_data_loss,
                                   task_attempt=remember_current)
    if per_range(tasks):
        rdd = make_range_rdd(sc, ranges, task_reader, KafkaRDD)
    else:
        assert tasks is not None
        planned = plan_tasks(ranges, tasks, parallelism=sc.defaultParallelism, can_split=task_reader.can_split,
                             split_floor=SPLIT_FLOOR)
        rdd = make_range_rdd(sc, ranges, task_reader, KafkaRDD, tasks=planned)
    rdd._skips, rdd._key = skips, key
    return rdd


def per_range(tasks: Optional[TaskOptions]) -> bool:
    """Whether ``tasks`` means one partition per range, empty ones included (partition ``i``: range ``i``)."""
    return tasks is None or (not tasks.pack and not tasks.split and not tasks.skip)
