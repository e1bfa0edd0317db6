"""Executor-side reading of many :class:`OffsetRange` s at once with kafka-python (no Spark here).

A task of packed ranges (:mod:`dstream_exactly_once.core._tasks`) reads them with ONE consumer
assigned to all of their partitions: each partition is sought to its ``fromOffset`` and every poll
fetches from all partitions not yet at their ``untilOffset`` (one fetch request per broker carries
many partitions), instead of a seek and a poll loop range after range. A partition that reaches
its ``untilOffset`` is paused, so nothing past its end is fetched again; records past the end in
a fetched batch are cut off.

Same rules as the single-range reader (:mod:`.reader`): progress is measured by the consumer
position, never by counting records (offsets have gaps: transaction markers, aborted records,
compaction); record batches come through :mod:`._fetch`'s hook when it fits; an offset that
vanished follows the data-loss policy (``fail_on_data_loss``, the injected ``on_data_loss``
callback, :func:`~.reader.skip_lost_offsets`); a partition whose topic is gone is lost whole under
the skip policy. Executors never commit offsets and never auto-reset.

Records are yielded per range, in the order of ``ranges``, each range in offset order: the blocks
of later ranges fetched meanwhile are held until the earlier ranges are done (a task's records come
in batch order, so its output does not depend on fetch timing).
"""

from __future__ import annotations

from functools import partial
from typing import Any, Dict, Iterator, List, Optional, Sequence

from ..errors import ConfigurationError, DataLossError, DStreamExactlyOnceError
from . import _fetch, _positions
from . import _stall as stall
from ._consumers import CONSUMERS, EXECUTOR_FETCH_BYTES, ConsumerCache, log_bounds, sessionless_consumer
from ._errors_map import translate_kafka_error
from ._offsets import OffsetRange
from ._params import KafkaConfig
from ._reader_kafka_python import (
    DataLossCallback,
    report_lost,
    settle_lost,
    skip_lost_offsets,
    stuck_error,
    take_records,
)
from ._records import RecordBlock

__all__ = ["live_ranges", "read_ranges", "stuck_or_stalled"]


def read_ranges(config: KafkaConfig, ranges: Sequence[OffsetRange], *, poll_timeout_ms: int = 120000,
                fail_on_data_loss: bool = True, metadata: bool = False, cache: ConsumerCache = CONSUMERS,
                attempt: int = 0, on_data_loss: Optional[DataLossCallback] = None) -> Iterator[RecordBlock]:
    """Yield the records of every range of ``ranges`` (at most one per partition) as
    :class:`RecordBlock` s: range by range in the given order, each in offset order, none past its
    ``untilOffset``. Arguments as in :func:`.reader.read_range`. Reads lazily."""
    live = live_ranges(ranges)
    if not live:
        return iter(())
    return _read(config, live, poll_timeout_ms, fail_on_data_loss, metadata, cache, attempt > 0, on_data_loss)



def live_ranges(ranges: Sequence[OffsetRange]) -> List[OffsetRange]:
    """The ranges of ``ranges`` that hold records; refuses two ranges of one partition (one read
    position per partition)."""
    live = [r for r in ranges if r.count() > 0]
    keys = [(r.topic, r.partition) for r in live]
    if len(set(keys)) != len(keys):
        raise ConfigurationError(f"read_ranges reads one range per partition, got {list(ranges)!r}")
    return live

def _read(config: KafkaConfig, ranges: List[OffsetRange], poll_timeout_ms: int, fail_on_data_loss: bool,
          metadata: bool, cache: ConsumerCache, fresh: bool,
          on_data_loss: Optional[DataLossCallback]) -> Iterator[RecordBlock]:
    import kafka.errors as ke
    from kafka import TopicPartition

    tps = [TopicPartition(r.topic, r.partition) for r in ranges]
    by_tp = dict(zip(tps, ranges, strict=True))
    pos: Dict[Any, int] = {tp: r.fromOffset for tp, r in by_tp.items()}
    held: Dict[Any, List[RecordBlock]] = {tp: [] for tp in tps}
    consumer = cache.acquire(config, ranges[0], fresh)
    _fetch.forget_parked(consumer)  # a cached consumer's parked records would starve their partitions
    assigned = list(tps)
    recovered = False  # the consumer is a recovery consumer (never put back in the cache)
    ok = False
    try:
        fetcher = _fetch.install_batches(consumer)
        max_fetch = int(config.client.get("max_partition_fetch_bytes", EXECUTOR_FETCH_BYTES))
        consumer.assign(tps)
        _positions.seek_many(consumer, {tp: r.fromOffset for tp, r in by_tp.items()})
        emitted = 0  # ranges[:emitted] are yielded whole
        watch = stall.Watch(poll_timeout_ms)
        while emitted < len(tps):
            active = [tp for tp in assigned if pos[tp] < by_tp[tp].untilOffset]
            progressed = False
            if active:
                try:
                    if fetcher is not None and not recovered:
                        remaining = min(by_tp[tp].untilOffset - pos[tp] for tp in active)
                        _fetch.size_next_fetch(fetcher, by_tp[active[0]].topic, remaining, max_fetch)
                    polled = consumer.poll(timeout_ms=min(200, poll_timeout_ms),
                                           max_records=_fetch.POLL_MAX_RECORDS)
                    for tp in active:
                        items = polled.get(tp, ())
                        progressed = _take(consumer, fetcher, tp, by_tp[tp], items, pos, held[tp], metadata) \
                            or progressed
                except ke.OffsetOutOfRangeError as exc:
                    _out_of_range(consumer, exc, active, by_tp, pos, fail_on_data_loss, on_data_loss)
                    continue
                except DStreamExactlyOnceError:
                    raise
                except Exception as exc:  # noqa: BLE001 - translated at this boundary
                    err = translate_kafka_error(exc, config.bootstrap, f"reading {', '.join(map(str, ranges))}")
                    if isinstance(err, DataLossError) and not fail_on_data_loss:  # a topic or partition is gone
                        for tp in active:
                            report_lost(by_tp[tp], pos[tp], by_tp[tp].untilOffset,
                                        f"the topic or partition is gone ({err})", on_data_loss)
                            pos[tp] = by_tp[tp].untilOffset
                    else:
                        raise err from exc
                done_now = [tp for tp in active if pos[tp] >= by_tp[tp].untilOffset]
                if done_now:
                    consumer.pause(*done_now)
            while emitted < len(tps) and pos[tps[emitted]] >= by_tp[tps[emitted]].untilOffset:
                yield from held[tps[emitted]]
                held[tps[emitted]] = []
                emitted += 1
            if progressed or not active:
                watch.progressed()
            elif watch.due():
                replaced = _look(config, watch, consumer, active, by_tp, pos, fail_on_data_loss, on_data_loss)
                if replaced is not None:
                    cache.discard(consumer)
                    consumer, recovered = replaced, True
                    assigned = [tp for tp in tps if pos[tp] < by_tp[tp].untilOffset]
                    fetcher = _fetch.install_batches(consumer)
                    consumer.assign(assigned)
                    _positions.seek_many(consumer, {tp: pos[tp] for tp in assigned})
            elif watch.expired():
                waiting = {by_tp[tp]: pos[tp] for tp in active}
                raise stuck_or_stalled(watch, waiting, {by_tp[tp]: tp for tp in active}, "kafka-python")
        ok = True
    finally:
        if ok and not recovered:
            consumer.resume(*assigned)
            cache.release(config, ranges[0], consumer)
        else:
            cache.discard(consumer)


def _look(config: KafkaConfig, watch: stall.Watch, consumer: Any, active: List[Any], by_tp: Dict[Any, OffsetRange],
          pos: Dict[Any, int], fail_on_data_loss: bool, on_data_loss: Optional[DataLossCallback]) -> Optional[Any]:
    """Ask the broker what it holds of the partitions ``active`` waits on (:mod:`._stall`) and act on it:
    the data-loss policy for offsets below the log start or beyond its end (``pos`` moved past them),
    nothing for an unreachable broker (the poll timeout decides), and for records the broker holds a
    new consumer without a fetch session to read them with (returned; ``None`` otherwise)."""
    verdict = stall.classify(watch.bounded(partial(log_bounds, config)), {tp: pos[tp] for tp in active})
    watch.last = verdict
    if settle_lost(verdict, by_tp, pos, fail_on_data_loss, on_data_loss, consumer.seek):
        watch.progressed()
        return None
    if verdict.present and watch.may_recover():
        stall.log_recovery("kafka-python", verdict, {tp: f"{by_tp[tp]} at offset {pos[tp]}" for tp in active},
                           watch.recoveries)
        return sessionless_consumer(config, by_tp[active[0]])
    return None


def stuck_or_stalled(watch: stall.Watch, waiting: Dict[OffsetRange, int], keys: Dict[OffsetRange, Any],
                     reader: str, client_error: Optional[str] = None) -> DStreamExactlyOnceError:
    """The error of a read that waited its whole poll timeout: :class:`KafkaReadStalledError` when the
    last look found the records on the broker, else the retriable outage error (:func:`.stuck_error`)."""
    last = watch.last
    if last is not None and last.present and all(keys[r] in last.present for r in waiting):
        return stall.read_stalled_error({r: (p, last.present[keys[r]]) for r, p in waiting.items()},
                                        watch.waited_ms(), reader)
    where = ", ".join(f"{r} at offset {p}" for r, p in waiting.items())
    reasons = [f"the broker could not be asked for its log bounds ({last.unreachable})"
               if last is not None and last.unreachable else None, client_error]
    return stuck_error(where, watch.poll_timeout_ms, "; ".join(x for x in reasons if x) or None)


def _take(consumer: Any, fetcher: Any, tp: Any, r: OffsetRange, items: Any, pos: Dict[Any, int],
          out: List[RecordBlock], metadata: bool) -> bool:
    """Add the records of ``r`` among ``items`` (polled for ``tp``) to ``out`` and move ``pos[tp]``;
    whether the partition moved."""
    start = pos[tp]
    pos[tp] = take_records(consumer, fetcher, tp, r, items, start, out, metadata)
    return pos[tp] > start or bool(items)


def _out_of_range(consumer: Any, exc: Any, active: List[Any], by_tp: Dict[Any, OffsetRange], pos: Dict[Any, int],
                  fail_on_data_loss: bool, on_data_loss: Optional[DataLossCallback]) -> None:
    """The data-loss policy for the partitions ``exc`` names (all active ones if it names none)."""
    named = getattr(exc, "args", ())
    offsets = named[0] if named and isinstance(named[0], dict) else {}
    hit = [tp for tp in active if tp in offsets] or active
    earliest = consumer.beginning_offsets(hit)
    for tp in hit:
        r = by_tp[tp]
        start = int(earliest[tp])
        if start <= pos[tp]:
            continue  # this partition is fine; another one was out of range
        pos[tp] = skip_lost_offsets(r, pos[tp], start, fail_on_data_loss, exc, on_data_loss)
        if start < r.untilOffset:
            consumer.seek(tp, start)
