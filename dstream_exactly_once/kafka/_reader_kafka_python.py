"""Executor-side reading of one :class:`OffsetRange` with kafka-python (no Spark here).

Each Spark task reads exactly one range: ``assign`` + ``seek(fromOffset)`` + ``poll`` until the
consumer's position reaches ``untilOffset``. Offsets may have gaps (transaction markers, aborted
records under ``read_committed``, compaction), so progress is measured by the consumer position,
never by counting records; a range may end on a marker. Executors never commit offsets and never
auto-reset: an offset that vanished is handled by the data-loss policy.

Records are handed on one fetched record batch at a time (:class:`RecordBlock`, parallel lists),
not one object per record: :mod:`._fetch` (the only module using kafka-python internals) hooks the
consumer's fetcher to return whole batches, and falls back to ``ConsumerRecord``s where the hook
does not fit. Consumers come from a per-process cache (:mod:`._consumers`).

The caller says which task attempt reads (``attempt``; a retry gets a fresh consumer) and may pass
``on_data_loss``, called with a :class:`~dstream_exactly_once.core._loss.DataLoss` (the range, the
skipped offsets and why) each time offsets of the range have vanished under
``fail_on_data_loss=False`` (the Spark side records them beside the commit and counts them).
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, TypeVar

from ..core._loss import DataLoss, LossCallback
from ..errors import DataLossError, DStreamExactlyOnceError, KafkaUnavailableError
from . import _fetch, _positions
from . import _stall as stall
from ._consumers import CONSUMERS, EXECUTOR_FETCH_BYTES, ConsumerCache, log_bounds, sessionless_consumer
from ._errors_map import translate_kafka_error
from ._offsets import OffsetRange
from ._params import KafkaConfig
from ._records import RecordBlock

log = logging.getLogger(__name__)

__all__ = ["ConsumerCache", "DataLossCallback", "RecordBlock", "read_range", "report_lost", "settle_lost",
           "skip_lost_offsets", "stuck_error", "take_records"]

K = TypeVar("K")

#: ``on_data_loss(loss)``: told of each skip of vanished offsets (failOnDataLoss=False)
DataLossCallback = LossCallback


def read_range(config: KafkaConfig, r: OffsetRange, *, poll_timeout_ms: int = 120000,
               fail_on_data_loss: bool = True, metadata: bool = False,
               cache: ConsumerCache = CONSUMERS, attempt: int = 0,
               on_data_loss: Optional[DataLossCallback] = None) -> Iterator[RecordBlock]:
    """Yield the records of ``r`` (offsets in ``[from, until)``) as :class:`RecordBlock`s, in order.

    ``metadata=True`` also fills timestamps and headers. ``attempt`` is the reading task's attempt
    number (> 0: a retry, which never reuses a cached consumer). ``on_data_loss`` is called with
    a :class:`DataLoss` for offsets skipped because they were deleted before being read (only when
    ``fail_on_data_loss`` is false; otherwise :class:`DataLossError` is raised). Reads lazily.
    """
    if r.count() == 0:
        return iter(())
    return _read(config, r, poll_timeout_ms, fail_on_data_loss, metadata, cache, attempt > 0, on_data_loss)


def _read(config: KafkaConfig, r: OffsetRange, poll_timeout_ms: int, fail_on_data_loss: bool,
          metadata: bool, cache: ConsumerCache, fresh: bool,
          on_data_loss: Optional[DataLossCallback]) -> Iterator[RecordBlock]:
    import kafka.errors as ke
    from kafka import TopicPartition

    tp = TopicPartition(r.topic, r.partition)
    consumer = cache.acquire(config, r, fresh)
    _fetch.forget_parked(consumer)  # a cached consumer's parked records would starve their partitions
    recovered = False  # the consumer is a recovery consumer (never put back in the cache)
    ok = False
    try:
        fetcher = _fetch.install_batches(consumer)
        max_fetch = int(config.client.get("max_partition_fetch_bytes", EXECUTOR_FETCH_BYTES))
        consumer.assign([tp])
        consumer.seek(tp, r.fromOffset)
        pos = r.fromOffset
        until = r.untilOffset
        watch = stall.Watch(poll_timeout_ms)
        while pos < until:
            try:
                if fetcher is not None and not recovered:
                    _fetch.size_next_fetch(fetcher, r.topic, until - pos, max_fetch)
                polled = consumer.poll(timeout_ms=min(200, poll_timeout_ms), max_records=_fetch.POLL_MAX_RECORDS)
                items = polled.get(tp, ())
                blocks: List[RecordBlock] = []
                pos = take_records(consumer, fetcher, tp, r, items, pos, blocks, metadata)
            except ke.OffsetOutOfRangeError as exc:
                pos = _handle_out_of_range(consumer, tp, r, pos, fail_on_data_loss, exc, on_data_loss)
                continue
            except DStreamExactlyOnceError:
                raise
            except Exception as exc:  # noqa: BLE001 - translated at this boundary
                err = translate_kafka_error(exc, config.bootstrap, f"reading {r}")
                if isinstance(err, DataLossError) and not fail_on_data_loss:  # the topic or partition is gone
                    report_lost(r, pos, until, f"the topic or partition is gone ({err})", on_data_loss)
                    return
                raise err from exc
            yield from blocks
            if items or pos >= until:
                watch.progressed()
            elif watch.due():
                verdict = stall.classify(watch.bounded(partial(log_bounds, config)), {tp: pos})
                watch.last = verdict
                where = {tp: pos}
                if settle_lost(verdict, {tp: r}, where, fail_on_data_loss, on_data_loss, consumer.seek):
                    pos = where[tp]
                    watch.progressed()
                elif verdict.present and watch.may_recover():
                    stall.log_recovery("kafka-python", verdict, {tp: f"{r} at offset {pos}"}, watch.recoveries)
                    fresh_consumer = sessionless_consumer(config, r)
                    cache.discard(consumer)
                    consumer, recovered = fresh_consumer, True
                    fetcher = _fetch.install_batches(consumer)
                    consumer.assign([tp])
                    consumer.seek(tp, pos)
            elif watch.expired():
                last = watch.last
                if last is not None and tp in last.present:
                    raise stall.read_stalled_error({r: (pos, last.present[tp])}, watch.waited_ms(), "kafka-python")
                reason = f"the broker could not be asked for its log bounds ({last.unreachable})" \
                    if last is not None and last.unreachable else None
                raise stuck_error(f"{r} at offset {pos}", poll_timeout_ms, reason)
        ok = True
    finally:
        if ok and not recovered:
            cache.release(config, r, consumer)
        else:
            cache.discard(consumer)


def _handle_out_of_range(consumer: Any, tp: Any, r: OffsetRange, pos: int, fail_on_data_loss: bool,
                         exc: BaseException, on_data_loss: Optional[DataLossCallback]) -> int:
    earliest = int(consumer.beginning_offsets([tp])[tp])
    lost_until = skip_lost_offsets(r, pos, earliest, fail_on_data_loss, exc, on_data_loss)
    if earliest < r.untilOffset:
        consumer.seek(tp, earliest)
    return lost_until



def take_records(consumer: Any, fetcher: Any, tp: Any, r: OffsetRange, items: Any, pos: int,
                 out: List[RecordBlock], metadata: bool) -> int:
    """Add the records of ``r`` from ``pos`` among ``items`` (polled for ``tp``: whole record batches
    from the fetcher hook, else one list of ConsumerRecords) to ``out``; the next position to read."""
    until = r.untilOffset
    chunks = items if fetcher is not None else ([_fetch.Records(items)] if items else ())
    for chunk in chunks:
        if pos >= until:
            break
        block = chunk.block(r.topic, r.partition, pos, until, metadata)
        if block is not None:
            out.append(block)
        pos = min(max(pos, chunk.next_offset), until)
    if fetcher is not None and chunks:
        _fetch.learn_batch_sizes(r.topic, chunks)
    if pos < until:
        moved = _positions.position(consumer, tp)
        if moved is not None and moved > pos:
            pos = min(moved, until)  # skipped markers / aborted / compacted offsets
    return pos


def skip_lost_offsets(r: OffsetRange, pos: int, earliest: int, fail_on_data_loss: bool, exc: Optional[BaseException],
                      on_data_loss: Optional[DataLossCallback]) -> int:
    """The data-loss policy for a read of ``r`` at ``pos`` that found the log starting at ``earliest``.

    Raises :class:`DataLossError` (``fail_on_data_loss``), else logs, reports the skipped count to
    ``on_data_loss`` and returns where reading goes on (``min(earliest, untilOffset)``; the caller
    moves its consumer there). An out-of-range ``pos`` not below the log start is a truncated log
    (:class:`KafkaUnavailableError`). Shared by every reader (kafka-python, confluent-kafka).
    """
    if earliest <= pos:
        raise KafkaUnavailableError(f"offset {pos} of {r} is out of range but not below the log start "
                                    f"{earliest}: the log was truncated") from exc
    lost_until = min(earliest, r.untilOffset)
    if fail_on_data_loss:
        raise DataLossError(
            f"offsets [{pos}, {lost_until}) of {r.topic}-{r.partition} were deleted (log start is now {earliest}) "
            f"before they were read (range {r}); set failOnDataLoss=False to skip them") from exc
    report_lost(r, pos, lost_until, f"deleted before they were read (log start {earliest})", on_data_loss)
    return lost_until


def settle_lost(verdict: stall.Verdict[K], ranges: Mapping[K, OffsetRange], pos: Dict[K, int],
                fail_on_data_loss: bool, on_data_loss: Optional[DataLossCallback],
                seek: Callable[[K, int], Any]) -> bool:
    """The data-loss policy for the partitions a look at the broker (:mod:`._stall`) found below the log
    start (deleted before they were read) or beyond its end (truncated or recreated): raises
    :class:`DataLossError` (``fail_on_data_loss``), else reports the skipped offsets, moves ``pos`` past
    them and ``seek`` s a partition that has more to read. Whether any partition moved. Shared by every reader."""
    for k, start in verdict.below_start.items():
        r = ranges[k]
        pos[k] = skip_lost_offsets(r, pos[k], start, fail_on_data_loss, None, on_data_loss)
        if pos[k] < r.untilOffset:
            seek(k, pos[k])
    for k, end in verdict.beyond_end.items():
        r = ranges[k]
        if fail_on_data_loss:
            raise stall.beyond_end_error(r, pos[k], end)
        report_lost(r, pos[k], r.untilOffset, f"beyond the log end {end} (the topic was truncated or recreated)",
                    on_data_loss)
        pos[k] = r.untilOffset
    return bool(verdict.below_start or verdict.beyond_end)


def stuck_error(where: str, poll_timeout_ms: int, client_error: Optional[str] = None) -> KafkaUnavailableError:
    """The error of a read that got no record of ``where`` (ranges and the offsets they wait at) for
    ``poll_timeout_ms``; ``client_error`` is the client's last error, when it kept one."""
    return KafkaUnavailableError(
        f"failed to get records of {where} after polling for {poll_timeout_ms} ms: the broker is unreachable"
        + (f"; {client_error}" if client_error else ""))


def report_lost(r: OffsetRange, start: int, end: int, reason: str, on_data_loss: Optional[DataLossCallback]) -> None:
    """Report offsets ``[start, end)`` of ``r`` as skipped: to ``on_data_loss`` (which records and logs
    them on the driver), or — without one — in a WARN log line."""
    loss = DataLoss(r.position_key, r.fromOffset, r.untilOffset, start, end, "offsets", f"{r.topic}-{r.partition}",
                    reason)
    if on_data_loss is None:
        log.warning("data loss (failOnDataLoss=False): skipping %s", loss.describe())
        return
    log.info("data loss (failOnDataLoss=False): skipping %s", loss.describe())
    on_data_loss(loss)
