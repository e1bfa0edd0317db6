"""``exactly_once(stream, store)``: turn a direct Kafka stream into an exactly-once one.

The conversion hands the stream's Kafka batch builder (:class:`~._direct.DirectBatches`) to a
:class:`~dstream_exactly_once.engine._committer.BatchCommitter` and returns the
:class:`~dstream_exactly_once.ExactlyOnceDStream` that drives it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Optional, Union

from ...core._retry import RetryPolicy, check_retry_policy
from ...engine._committer import BatchCommitter, check_retain_batches
from ...errors import ConfigurationError
from ...stores._base import TransactionalStore
from ...streaming._backpressure import catch_up_from_conf
from ...streaming._connect_guard import INSTEAD_OUTPUT, refuse_spark_connect
from ...streaming._dstream import KafkaDStream
from ...streaming._exactly_once import ExactlyOnceDStream, check_monitor_group
from ...streaming._partition_ranges import check_task_layout
from ...streaming._range_rdd import RangeRDD
from ._direct import DirectBatches

__all__ = ["exactly_once"]

StoreLike = Union[str, TransactionalStore]


def exactly_once(stream: KafkaDStream, store: StoreLike, app_id: Optional[str] = None, *,
                 monitor_group: Optional[str] = None, retain_batches: int = 100,
                 store_retry: Optional[RetryPolicy] = None) -> ExactlyOnceDStream:
    """Turn a ``KafkaUtils.createDirectStream`` stream into an exactly-once one (before any output
    is attached and before the context starts): offsets then come from ``store`` (its committed
    offsets win over ``fromOffsets``/``auto.offset.reset``) and uncommitted batches are replayed.
    ``monitor_group``, ``retain_batches`` and ``store_retry`` are as in ``KafkaUtils.createExactlyOnceStream``.

    Returns the new stream; the original one must not be used any more (it raises if it is).
    Everything is validated before the store is written: a call that fails leaves it unchanged.
    """
    refuse_spark_connect(stream, "exactly_once(stream=...)", INSTEAD_OUTPUT)
    if isinstance(stream, ExactlyOnceDStream) or not isinstance(stream, KafkaDStream):
        raise ConfigurationError(f"exactly_once() needs a stream from KafkaUtils.createDirectStream, got {stream!r}")
    batches = stream._build
    if not isinstance(batches, DirectBatches) or stream._batches:
        raise ConfigurationError("exactly_once() must be called before the stream has produced a batch")
    check_monitor_group(monitor_group)
    check_retain_batches(retain_batches)
    retry = check_retry_policy(store_retry)
    catch_up = catch_up_from_conf(stream._ssc)
    batches.monitor_group = monitor_group
    committer = BatchCommitter(store, batches, app_id=app_id, retain_batches=retain_batches, retry=retry,
                               start=False, check=lambda s: check_task_layout(s, batches.opts.pack),
                               catch_up=catch_up)

    def detached(_time: datetime) -> RangeRDD:
        raise ConfigurationError("this stream was converted by exactly_once(); use the stream it returned")

    stream._build = detached
    return ExactlyOnceDStream(stream._ssc, committer, batches.rdd, tasks=batches.exactly_once_tasks())
