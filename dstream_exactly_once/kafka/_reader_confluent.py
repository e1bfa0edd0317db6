"""Executor-side reading of one :class:`OffsetRange` with confluent-kafka (librdkafka); no Spark here.

The optional alternative to :mod:`._reader_kafka_python` (``spark.streaming.kafka.reader=confluent-kafka``,
``pip install dstream-exactly-once[confluent]``), with the same signature and the same semantics:
``assign`` at ``fromOffset``, ``consume`` until the consumer position reaches ``untilOffset``.
Offsets may have gaps (transaction markers, aborted records under ``read_committed``,
compaction) — librdkafka moves the position past them, and progress is measured by that position,
never by counting records; a range may end on a marker. Nothing is committed and nothing is reset:
``auto.offset.reset=error`` turns a vanished offset into an error that the data-loss policy
(:func:`.reader.skip_lost_offsets`) handles as in the kafka-python reader.

Each ``consume`` result (up to 10000 messages, all of the one assigned partition) becomes one
:class:`RecordBlock`, built list-wise from the messages' C accessors. Consumers come from a
per-process :class:`~._consumers.ConsumerCache` of their own, one per partition (librdkafka leaves a
fetch parked at the broker for up to ``fetch.max.wait.ms`` after a range that ends at the log end;
a consumer moved to another partition would wait for it, the same partition's next range does not:
new records answer it); an idle cached consumer is unassigned so librdkafka stops prefetching for
it. A retry (``attempt > 0``) gets a fresh consumer.
"""

from __future__ import annotations

import logging
from bisect import bisect_left
from functools import partial
from typing import Any, Iterator, List, Optional, Tuple

from ..errors import DStreamExactlyOnceError
from . import _stall as stall
from ._confluent_params import is_out_of_range, librdkafka_properties, translate_confluent_error
from ._consumers import ConsumerCache, log_bounds
from ._offsets import OffsetRange
from ._params import KafkaConfig
from ._reader_kafka_python import DataLossCallback, settle_lost, skip_lost_offsets, stuck_error
from ._records import RecordBlock

log = logging.getLogger(__name__)

__all__ = ["CONSUMERS", "read_range", "reassign"]

#: messages asked for per ``consume`` call (kafka-python reader: ``_fetch.POLL_MAX_RECORDS`` per poll)
_BATCH = 10000
#: the first wait for a message when none is queued, doubled while none comes (up to 200 ms)
_FIRST_WAIT_S = 0.005
_LIBRDKAFKA_LOG = logging.getLogger(__name__ + ".librdkafka")


class _Consumer:
    """A confluent-kafka ``Consumer`` plus the last client-level error librdkafka reported for it."""

    def __init__(self, config: KafkaConfig, r: OffsetRange) -> None:
        from confluent_kafka import Consumer

        self.last_error: Optional[Any] = None
        try:
            self.consumer = Consumer(librdkafka_properties(config), logger=_LIBRDKAFKA_LOG,
                                     error_cb=self._on_error)
        except DStreamExactlyOnceError:
            raise
        except Exception as exc:  # noqa: BLE001 - translated at this boundary
            raise translate_confluent_error(exc, config.bootstrap, f"creating a consumer for {r}") from exc

    def _on_error(self, err: Any) -> None:
        """librdkafka's error callback (broker down, authentication…): kept for the timeout message."""
        self.last_error = err
        log.debug("librdkafka: %s", err)

    def close(self) -> None:
        """Close without committing; errors are logged, never raised."""
        try:
            self.consumer.close()
        except Exception:  # noqa: BLE001 - closing a broken consumer must not mask the real error
            log.debug("error closing a cached confluent-kafka consumer", exc_info=True)


def reassign(consumer: Any, key: Tuple[str, int], offset: int) -> None:
    """Assign ``consumer`` the partition ``key`` at ``offset`` (librdkafka leaves a partition whose
    offsets vanished in an error state that a ``seek`` cannot leave)."""
    from confluent_kafka import TopicPartition

    consumer.assign([TopicPartition(key[0], key[1], offset)])


def _close(holder: Any) -> None:
    holder.close()


def librdkafka_error(holder: _Consumer, config: KafkaConfig) -> Optional[str]:
    """The last client-level error librdkafka reported for ``holder``'s consumer, for a timeout
    message (``None`` if none)."""
    last = holder.last_error
    if last is None:
        return None
    return f"librdkafka: {translate_confluent_error(last, config.bootstrap, 'reading')}"


#: The process-wide cache of this reader's consumers.
CONSUMERS = ConsumerCache(create=_Consumer, close=_close, share_idle=False)


def read_range(config: KafkaConfig, r: OffsetRange, *, poll_timeout_ms: int = 120000,
               fail_on_data_loss: bool = True, metadata: bool = False,
               cache: ConsumerCache = CONSUMERS, attempt: int = 0,
               on_data_loss: Optional[DataLossCallback] = None) -> Iterator[RecordBlock]:
    """Yield the records of ``r`` (offsets in ``[from, until)``) as :class:`RecordBlock`s, in order.

    As :func:`dstream_exactly_once.kafka._reader_kafka_python.read_range`: ``metadata=True`` also fills
    timestamps, timestamp types and headers; ``attempt > 0`` (a retry) never reuses a cached
    consumer; deleted offsets raise :class:`DataLossError` or, with ``fail_on_data_loss=False``,
    are skipped and reported to ``on_data_loss``. Reads lazily.
    """
    if r.count() == 0:
        return iter(())
    return _read(config, r, poll_timeout_ms, fail_on_data_loss, metadata, cache, attempt > 0, on_data_loss)


def _read(config: KafkaConfig, r: OffsetRange, poll_timeout_ms: int, fail_on_data_loss: bool,
          metadata: bool, cache: ConsumerCache, fresh: bool,
          on_data_loss: Optional[DataLossCallback]) -> Iterator[RecordBlock]:
    from confluent_kafka import TopicPartition

    holder = cache.acquire(config, r, fresh)
    consumer = holder.consumer
    holder.last_error = None
    ok = False
    try:
        tp = TopicPartition(r.topic, r.partition)
        pos, until = r.fromOffset, r.untilOffset
        try:
            consumer.assign([TopicPartition(r.topic, r.partition, pos)])
        except Exception as exc:  # noqa: BLE001 - translated at this boundary
            raise translate_confluent_error(exc, config.bootstrap, f"assigning {r}") from exc
        max_wait_s = min(200, poll_timeout_ms) / 1000
        wait_s = _FIRST_WAIT_S
        watch = stall.Watch(poll_timeout_ms)
        key = (r.topic, r.partition)
        while pos < until:
            try:
                msgs = _consume(consumer, wait_s)
                errors = [m for m in msgs if m.error() is not None] if any(map(_error, msgs)) else None
                if errors:
                    msgs = [m for m in msgs if m.error() is None]
                block, pos = _block(r, msgs, pos, metadata)
                if errors:
                    pos = _handle_errors(consumer, config, r, pos, errors, fail_on_data_loss, on_data_loss)
                elif pos < until:
                    moved = consumer.position([tp])[0].offset
                    if moved > pos:
                        pos = min(moved, until)  # skipped markers / aborted / compacted offsets
            except DStreamExactlyOnceError:
                raise
            except Exception as exc:  # noqa: BLE001 - translated at this boundary
                raise translate_confluent_error(exc, config.bootstrap, f"reading {r}") from exc
            if block is not None:
                yield block
            if msgs or errors or pos >= until:
                watch.progressed()
                wait_s = _FIRST_WAIT_S
            elif wait_s < max_wait_s:
                wait_s = min(2 * wait_s, max_wait_s)  # short waits first: a range may end in a gap
            elif watch.due():
                verdict = stall.classify(watch.bounded(partial(log_bounds, config)), {key: pos})
                watch.last = verdict
                where = {key: pos}
                if settle_lost(verdict, {key: r}, where, fail_on_data_loss, on_data_loss, partial(reassign, consumer)):
                    pos = where[key]
                    watch.progressed()
                elif verdict.present and watch.may_recover():
                    stall.log_recovery("confluent-kafka", verdict, {key: f"{r} at offset {pos}"}, watch.recoveries)
                    fresh_holder = _Consumer(config, r)
                    cache.discard(holder)
                    holder, consumer = fresh_holder, fresh_holder.consumer
                    consumer.assign([TopicPartition(r.topic, r.partition, pos)])
            elif watch.expired():
                last = watch.last
                if last is not None and key in last.present:
                    raise stall.read_stalled_error({r: (pos, last.present[key])}, watch.waited_ms(), "confluent-kafka")
                raise stuck_error(f"{r} at offset {pos}", poll_timeout_ms, librdkafka_error(holder, config))
        ok = True
    finally:
        if ok:
            try:
                consumer.unassign()  # idle: no prefetching for a partition nobody reads
            except Exception:  # noqa: BLE001 - a consumer that cannot unassign is not reused
                ok = False
        if ok:
            cache.release(config, r, holder)
        else:
            cache.discard(holder)


def _consume(consumer: Any, wait_s: float) -> List[Any]:
    """What librdkafka has queued (up to :data:`_BATCH` messages) without waiting; if nothing, wait up
    to ``wait_s`` for the first message (``consume(n, timeout)`` waits until ``n`` arrived or the
    timeout passed, so a batch call with a timeout would add the whole timeout to every short read)."""
    msgs: List[Any] = consumer.consume(_BATCH, 0)
    if not msgs:
        msgs = consumer.consume(1, wait_s)
        if msgs:
            msgs += consumer.consume(_BATCH - 1, 0)
    return msgs


def _error(m: Any) -> Any:
    return m.error()


def _block(r: OffsetRange, msgs: List[Any], pos: int, metadata: bool) -> tuple[Optional[RecordBlock], int]:
    """The messages of ``msgs`` (ascending offsets of ``r``'s partition) inside ``[pos, until)`` as one
    block, and the position after them (``until`` once an offset at or beyond it was seen)."""
    if not msgs:
        return None, pos
    from confluent_kafka import Message

    until = r.untilOffset
    offsets: List[int] = list(map(Message.offset, msgs))  # type: ignore[arg-type] # never None here
    lo = bisect_left(offsets, pos) if offsets[0] < pos else 0
    hi = len(offsets) if offsets[-1] < until else bisect_left(offsets, until)
    new_pos = until if hi < len(offsets) else max(pos, offsets[-1] + 1)
    if lo >= hi:
        return None, min(new_pos, until)
    if lo or hi < len(offsets):
        offsets, msgs = offsets[lo:hi], msgs[lo:hi]
    keys = list(map(Message.key, msgs))
    values = list(map(Message.value, msgs))
    if not metadata:
        return RecordBlock(r.topic, r.partition, offsets, keys, values), min(new_pos, until)
    stamps = list(map(Message.timestamp, msgs))
    # librdkafka: 0 not available, 1 create time, 2 log-append time; Kafka/kafka-python: -1, 0, 1
    return RecordBlock(r.topic, r.partition, offsets, keys, values, [ts for _, ts in stamps],
                       [kind - 1 for kind, _ in stamps],
                       [h if h is not None else [] for h in map(Message.headers, msgs)]), min(new_pos, until)


def _handle_errors(consumer: Any, config: KafkaConfig, r: OffsetRange, pos: int, errors: List[Any],
                   fail_on_data_loss: bool, on_data_loss: Optional[DataLossCallback]) -> int:
    """Consumer errors delivered as messages: out of range → the data-loss policy; a fatal or
    permanent error of the partition → raised; transient ones (librdkafka retries) → logged."""
    from confluent_kafka import KafkaException, TopicPartition

    for m in errors:
        err = m.error()
        if is_out_of_range(err):
            cause = KafkaException(err)
            try:
                earliest, _high = consumer.get_watermark_offsets(TopicPartition(r.topic, r.partition),
                                                                 timeout=30.0, cached=False)
            except Exception as exc:  # noqa: BLE001 - translated at this boundary
                raise translate_confluent_error(exc, config.bootstrap, f"looking up the log start of {r}") from exc
            pos = skip_lost_offsets(r, pos, int(earliest), fail_on_data_loss, cause, on_data_loss)
            if pos < r.untilOffset:
                consumer.assign([TopicPartition(r.topic, r.partition, pos)])
            return pos
        if err.fatal() or not err.retriable() and m.topic() == r.topic and m.partition() == r.partition:
            raise translate_confluent_error(err, config.bootstrap, f"reading {r}") from KafkaException(err)
        log.debug("librdkafka consumer error while reading %s: %s", r, err)
    return pos
