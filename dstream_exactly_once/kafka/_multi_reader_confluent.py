"""Executor-side reading of many :class:`OffsetRange` s at once with confluent-kafka (librdkafka).

The confluent counterpart of :mod:`._multi_reader`: one consumer assigned to every partition of the
task at its ``fromOffset``; each ``consume`` returns messages of many partitions (librdkafka fetches
them together); a partition at its ``untilOffset`` is paused. Records are yielded per range, in
the order of ``ranges``, each in offset order, none past its end. Decoding, gap handling and the
data-loss policy are :mod:`._reader_confluent`'s (:func:`.reader.skip_lost_offsets`); after a skip
the unfinished partitions are assigned again at the positions read so far (librdkafka leaves the
skipped one in an error state that a ``seek`` cannot leave).
"""

from __future__ import annotations

from functools import partial
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

from ..errors import DStreamExactlyOnceError
from . import _stall as stall
from ._confluent_params import is_out_of_range, translate_confluent_error
from ._consumers import ConsumerCache, log_bounds
from ._multi_reader import live_ranges, stuck_or_stalled
from ._offsets import OffsetRange
from ._params import KafkaConfig
from ._reader_confluent import CONSUMERS, _block, _consume, _Consumer, librdkafka_error
from ._reader_kafka_python import DataLossCallback, settle_lost, skip_lost_offsets
from ._records import RecordBlock

__all__ = ["read_ranges"]

_FIRST_WAIT_S = 0.005

Key = Tuple[str, int]


def read_ranges(config: KafkaConfig, ranges: Sequence[OffsetRange], *, poll_timeout_ms: int = 120000,
                fail_on_data_loss: bool = True, metadata: bool = False, cache: ConsumerCache = CONSUMERS,
                attempt: int = 0, on_data_loss: Optional[DataLossCallback] = None) -> Iterator[RecordBlock]:
    """As :func:`._multi_reader.read_ranges`, read with confluent-kafka. Reads lazily."""
    live = live_ranges(ranges)
    if not live:
        return iter(())
    return _read(config, live, poll_timeout_ms, fail_on_data_loss, metadata, cache, attempt > 0, on_data_loss)


def _read(config: KafkaConfig, ranges: List[OffsetRange], poll_timeout_ms: int, fail_on_data_loss: bool,
          metadata: bool, cache: ConsumerCache, fresh: bool,
          on_data_loss: Optional[DataLossCallback]) -> Iterator[RecordBlock]:
    from confluent_kafka import TopicPartition

    holder = cache.acquire(config, ranges[0], fresh)
    consumer = holder.consumer
    holder.last_error = None
    by_key: Dict[Key, OffsetRange] = {(r.topic, r.partition): r for r in ranges}
    order = list(by_key)
    pos: Dict[Key, int] = {k: r.fromOffset for k, r in by_key.items()}
    held: Dict[Key, List[RecordBlock]] = {k: [] for k in order}
    what = ", ".join(map(str, ranges))
    ok = False
    try:
        try:
            consumer.assign([TopicPartition(t, p, pos[(t, p)]) for t, p in order])
        except Exception as exc:  # noqa: BLE001 - translated at this boundary
            raise translate_confluent_error(exc, config.bootstrap, f"assigning {what}") from exc
        max_wait_s = min(200, poll_timeout_ms) / 1000
        wait_s = _FIRST_WAIT_S
        watch = stall.Watch(poll_timeout_ms)
        emitted = 0
        while emitted < len(order):
            active = [k for k in order if pos[k] < by_key[k].untilOffset]
            msgs: List[Any] = []
            if active:
                try:
                    msgs = _consume(consumer, wait_s)
                    progressed = _take(consumer, config, msgs, by_key, pos, held, metadata, fail_on_data_loss,
                                       on_data_loss)
                    short = [k for k in active if pos[k] < by_key[k].untilOffset]
                    if short:  # one call for all: positions past offsets without records
                        for k, at in zip(short, consumer.position([TopicPartition(t, p) for t, p in short]),
                                         strict=True):
                            if at.offset > pos[k]:
                                pos[k] = min(at.offset, by_key[k].untilOffset)  # markers / aborted / compacted
                                progressed = True
                    done_now = [k for k in active if pos[k] >= by_key[k].untilOffset]
                    if done_now:
                        consumer.pause([TopicPartition(t, p) for t, p in done_now])
                except DStreamExactlyOnceError:
                    raise
                except Exception as exc:  # noqa: BLE001 - translated at this boundary
                    raise translate_confluent_error(exc, config.bootstrap, f"reading {what}") from exc
            else:
                progressed = True
            while emitted < len(order) and pos[order[emitted]] >= by_key[order[emitted]].untilOffset:
                yield from held[order[emitted]]
                held[order[emitted]] = []
                emitted += 1
            if progressed:
                watch.progressed()
                wait_s = _FIRST_WAIT_S
            elif wait_s < max_wait_s:
                wait_s = min(2 * wait_s, max_wait_s)
            elif watch.due():
                verdict = stall.classify(watch.bounded(partial(log_bounds, config)), {k: pos[k] for k in active})
                watch.last = verdict
                if settle_lost(verdict, by_key, pos, fail_on_data_loss, on_data_loss,
                               partial(_assign_unfinished, consumer, by_key, pos)):
                    watch.progressed()
                elif verdict.present and watch.may_recover():
                    described = {k: f"{by_key[k]} at offset {pos[k]}" for k in active}
                    stall.log_recovery("confluent-kafka", verdict, described, watch.recoveries)
                    fresh_holder = _Consumer(config, ranges[0])
                    cache.discard(holder)
                    holder, consumer = fresh_holder, fresh_holder.consumer
                    _assign_unfinished(consumer, by_key, pos)
            elif watch.expired():
                waiting = {by_key[k]: pos[k] for k in active}
                raise stuck_or_stalled(watch, waiting, {by_key[k]: k for k in active}, "confluent-kafka",
                                       librdkafka_error(holder, config))
        ok = True
    finally:
        if ok:
            try:
                # librdkafka keeps a partition's pause across unassign/assign: a reused consumer must not
                # find the partitions this task paused at their ends still paused
                consumer.resume([TopicPartition(t, p) for t, p in order])
                consumer.unassign()  # idle: no prefetching for partitions nobody reads
            except Exception:  # noqa: BLE001 - a consumer that cannot unassign is not reused
                ok = False
        if ok:
            cache.release(config, ranges[0], holder)
        else:
            cache.discard(holder)


def _assign_unfinished(consumer: Any, by_key: Dict[Key, OffsetRange], pos: Dict[Key, int], *_moved: Any) -> None:
    """Assign ``consumer`` every partition not yet at its range's end, at its position (also the
    ``seek`` of :func:`._reader_kafka_python.settle_lost`: a partition whose offsets vanished is left in
    an error state that only a new assignment leaves)."""
    from confluent_kafka import TopicPartition

    consumer.assign([TopicPartition(t, p, pos[(t, p)]) for (t, p), q in by_key.items() if pos[(t, p)] < q.untilOffset])


def _take(consumer: Any, config: KafkaConfig, msgs: List[Any], by_key: Dict[Key, OffsetRange],
          pos: Dict[Key, int], held: Dict[Key, List[RecordBlock]], metadata: bool, fail_on_data_loss: bool,
          on_data_loss: Optional[DataLossCallback]) -> bool:
    """Sort ``msgs`` by partition into ``held`` (inside each range) and move ``pos``; whether any moved."""
    groups: Dict[Key, List[Any]] = {}
    errors: List[Any] = []
    for m in msgs:
        if m.error() is not None:
            errors.append(m)
        else:
            groups.setdefault((m.topic(), m.partition()), []).append(m)
    progressed = bool(errors)
    for k, mine in groups.items():
        r = by_key.get(k)
        if r is None or pos[k] >= r.untilOffset:
            continue
        block, new = _block(r, mine, pos[k], metadata)
        if block is not None:
            held[k].append(block)
        progressed = progressed or new > pos[k]
        pos[k] = new
    for m in errors:
        _error(consumer, config, m, by_key, pos, fail_on_data_loss, on_data_loss)
    return progressed


def _error(consumer: Any, config: KafkaConfig, m: Any, by_key: Dict[Key, OffsetRange], pos: Dict[Key, int],
           fail_on_data_loss: bool, on_data_loss: Optional[DataLossCallback]) -> None:
    """A consumer error delivered as a message: out of range → that partition's data-loss policy; a
    fatal or permanent error of one of the partitions → raised; transient ones are retried by librdkafka."""
    from confluent_kafka import KafkaException, TopicPartition

    err = m.error()
    k = (m.topic(), m.partition())
    r = by_key.get(k)
    if is_out_of_range(err) and r is not None:
        try:
            earliest, _high = consumer.get_watermark_offsets(TopicPartition(r.topic, r.partition), timeout=30.0,
                                                             cached=False)
        except Exception as exc:  # noqa: BLE001 - translated at this boundary
            raise translate_confluent_error(exc, config.bootstrap, f"looking up the log start of {r}") from exc
        pos[k] = skip_lost_offsets(r, pos[k], int(earliest), fail_on_data_loss, KafkaException(err), on_data_loss)
        # the partition is in an error state (no seek): assign the unfinished partitions again at their positions
        _assign_unfinished(consumer, by_key, pos)
        return
    if err.fatal() or (not err.retriable() and r is not None):
        raise translate_confluent_error(err, config.bootstrap, f"reading {r}") from KafkaException(err)
