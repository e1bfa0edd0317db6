"""``spark.readStream.format("deo-kafka")``: Kafka as a Structured Streaming source, without the JVM connector.

The Spark-free half of the source (the PySpark classes are in :mod:`._spark_kafka_source`):

- driver, :class:`KafkaSourcePlanner`: each micro-batch's offsets come from the Kafka plug-in's
  :class:`~dstream_exactly_once.kafka._planner.DirectPlanner` (``subscribe``, ``subscribePattern`` or
  ``assign``; partitions added while the query runs start at their earliest offset; one ListOffsets
  round trip per trigger; the data-loss policy), cut by ``maxOffsetsPerTrigger`` as Spark's Kafka
  source cuts it, held back by ``minOffsetsPerTrigger``/``maxTriggerDelay``, and capped at the log
  ends seen first under ``Trigger.AvailableNow``. Offsets: :mod:`.kafka_source_offsets`;
- driver, :meth:`KafkaSourcePlanner.tasks`: the batch's ranges become Spark tasks through the core's
  task planner (:func:`~dstream_exactly_once.core._tasks.plan_tasks`): empty ranges get no task, small
  ones are packed together, large ones split, aiming at ``tasks.target.count`` tasks;
- executor, :func:`read_task`: one consumer assigned to all of the task's partitions reads its
  pieces (:meth:`~dstream_exactly_once.kafka._range_reader.KafkaRangeReader.read_blocks`, kafka-python
  or confluent-kafka; gaps and ``read_committed`` handled as in the DStream readers) and hands Spark
  Arrow record batches, one per fetched block, never Python rows.

Schema (Spark's Kafka source's): ``key`` binary, ``value`` binary, ``topic`` string, ``partition``
int, ``offset`` long, ``timestamp`` timestamp, ``timestampType`` int, and with ``includeHeaders``
``headers`` array<struct<key string, value binary>> (null for a record without headers).

Unit of parallelism: one Spark task per planned task of a micro-batch (many partitions' ranges
packed into one task, or one large range split over several). Delivery: each offset of the
subscribed partitions once per micro-batch it belongs to; the offsets live in the query's
checkpoint and a replayed micro-batch reads exactly the offsets of its first attempt, so the query
is end-to-end exactly-once with an idempotent or transactional sink (``deo-store``, ``deo-kafka``),
otherwise at-least-once. Offsets gone before they were read follow ``failOnDataLoss``: ``true``
stops the query with a :class:`~dstream_exactly_once.errors.DataLossError` naming the partition and
range; ``false`` skips them and logs them at WARN. With ``starting.positions.store``/``.app`` a query
without an offset log starts from the Kafka positions a store holds for the application (committed
by the ``deo-store`` sink with ``anchor=true``, or by a DStream application): then exactly-once also
across a new or lost checkpoint (:mod:`.anchor`).
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence

from ...core._loss import DataLoss
from ...core._tasks import Task, plan_tasks
from ...errors import ConfigurationError, DataLossError
from .._metadata import KafkaMetadata, MetadataSource, close_metadata
from .._offsets import OffsetRange, TopicAndPartition
from .._planner import DirectPlanner
from .._range_reader import SPLIT_FLOOR, KafkaRangeReader
from .._records import RecordBlock
from .._strategies import Assign, ConsumerStrategy, Subscribe, SubscribePattern
from ._source_offsets import doc_of, offsets_of, prorate, ranges_between
from ._source_options import KafkaSourceOptions

__all__ = ["KAFKA_SOURCE_NAME", "KafkaSourcePlanner", "arrow_schema", "read_task", "record_batch"]

log = logging.getLogger(__name__)

#: The name to pass to ``readStream.format`` (the ``deo-kafka`` sink's name too: one format, both ways).
KAFKA_SOURCE_NAME = "deo-kafka"


def _strategy(opts: KafkaSourceOptions, offsets: Optional[Dict[TopicAndPartition, int]] = None) -> ConsumerStrategy:
    kind, value = opts.strategy
    if kind == "subscribe":
        return Subscribe(value, offsets)
    if kind == "subscribePattern":
        return SubscribePattern(value, offsets)
    return Assign(offsets if offsets is not None else value)


class KafkaSourcePlanner:
    """The driver side of one ``deo-kafka`` query: offsets and tasks (not thread-safe).

    The planner's state always matches the last offset this object returned and is rebuilt from the
    offset Spark passes whenever they differ (a restart from a checkpoint). ``metadata`` makes the
    broker metadata seam (default: a :class:`~dstream_exactly_once.kafka._metadata.KafkaMetadata` of
    the options' Kafka settings); ``clock`` returns milliseconds (``maxTriggerDelay``).
    """

    def __init__(self, opts: KafkaSourceOptions, *, parallelism: int = 1,
                 metadata: Optional[Callable[[], MetadataSource]] = None,
                 clock: Callable[[], float] = lambda: time.time() * 1000) -> None:
        self.opts = opts
        self.parallelism = max(1, int(parallelism))
        self._make_metadata = metadata or (lambda: KafkaMetadata(opts.config))
        self._clock = clock
        self._planner: Optional[DirectPlanner] = None
        self._doc: Optional[Dict[str, Any]] = None  # the offset the planner's state matches
        self._initial: Optional[Dict[str, Any]] = None  # this run's initial offset, once resolved
        self._available_now = False
        self._target: Optional[Dict[TopicAndPartition, int]] = None  # AvailableNow: log ends at its start
        self._last_trigger_ms = 0.0

    # ---------------------------------------------------------------- offsets
    def _new_planner(self, strategy: ConsumerStrategy, reset: str, metadata: MetadataSource) -> DirectPlanner:
        return DirectPlanner(metadata, strategy, auto_offset_reset=reset,
                             fail_on_data_loss=self.opts.fail_on_data_loss, discovery_interval_s=0.0)

    def initial_offset(self) -> Dict[str, Any]:
        """A new query's first offset: ``startingOffsets`` resolved against the broker's log (every
        partition of the subscription at that moment gets its offset; checked before anything is read).

        Resolved once per run: Spark asks again when it runs the first batch, and ``latest`` has moved
        on by then. A restarted run resolves it afresh, which is harmless: the first batch's end offset
        records where each of its ranges began (:func:`latest_offset`), so its replay reads the same
        offsets."""
        if self._initial is not None:
            return self._initial
        self.close()
        starting = self._stored_start()
        md = self._make_metadata()
        try:
            if isinstance(starting, str):
                planner = self._new_planner(_strategy(self.opts), starting, md)
                planner.start()
            else:
                parts = _strategy(self.opts).validate(md)
                missing = sorted(parts - set(starting))
                if missing:
                    raise ConfigurationError(
                        f"deo-kafka source option 'startingOffsets' must name every partition the query reads "
                        f"(as Spark's Kafka source requires); missing: {', '.join(str(tp) for tp in missing)} "
                        f"(use -2 for earliest, -1 for latest)")
                wanted = {tp: off for tp, off in starting.items() if tp in parts}
                earliest = md.earliest([tp for tp, off in wanted.items() if off == -2])
                latest = md.latest([tp for tp, off in wanted.items() if off == -1])
                resolved = {tp: earliest[tp] if off == -2 else latest[tp] if off == -1 else off
                            for tp, off in wanted.items()}
                planner = self._new_planner(_strategy(self.opts, resolved), "earliest", md)
                planner.start()
        except BaseException:
            close_metadata(md)
            raise
        self._planner, self._doc = planner, doc_of(planner.current)
        self._initial = self._doc
        return self._doc

    def _stored_start(self) -> Any:
        """``startingOffsets``, or with ``starting.positions.store`` the application's committed Kafka
        positions where there are any (partitions without one: earliest/latest as ``startingOffsets``
        says, or its explicit offset)."""
        starting = self.opts.starting
        if self.opts.positions_store is None or self.opts.positions_app is None:
            return starting
        from ...stores import open_store
        from ...structured.anchor import stored_kafka_offsets

        with open_store(self.opts.positions_store, self.opts.positions_app) as store:
            stored = stored_kafka_offsets(store.load_positions())
        if not stored:
            log.info("deo-kafka source: app %s has no committed Kafka positions; starting per startingOffsets",
                     self.opts.positions_app)
            return starting
        md = self._make_metadata()
        try:
            parts = _strategy(self.opts).validate(md)
        finally:
            close_metadata(md)
        default = -2 if starting == "earliest" else -1
        explicit: Dict[TopicAndPartition, int] = {} if isinstance(starting, str) else dict(starting)
        log.info("deo-kafka source: starting from app %s's committed positions in the store",
                 self.opts.positions_app)
        return {tp: stored[tp] if tp in stored else explicit.get(tp, default) for tp in parts}

    def prepare_available_now(self) -> None:
        """``Trigger.AvailableNow``: the run reads up to the log ends of its first planning, then stops."""
        self._available_now, self._target = True, None

    def latest_offset(self, start: Dict[str, Any], max_offsets: Optional[int] = None,
                      min_offsets: Optional[int] = None) -> Dict[str, Any]:
        """The end offset of the next micro-batch from ``start``: everything available, at most
        ``max_offsets`` (Spark's read limit, ``maxOffsetsPerTrigger``) and, unless ``maxTriggerDelay``
        has passed since the last batch, ``start`` itself while fewer than ``min_offsets`` are there."""
        planner = self._planner_at(start)
        ranges = planner.plan(0.0)
        begun = offsets_of(start)
        if self._available_now:
            if self._target is None:
                self._target = {r.topicPartition(): r.untilOffset for r in ranges}
            target = self._target
            ranges = [OffsetRange(r.topic, r.partition, r.fromOffset,
                                  max(r.fromOffset, min(r.untilOffset, target.get(r.topicPartition(), r.fromOffset))))
                      for r in ranges]
        elif min_offsets is not None and self._delay(sum(r.count() for r in ranges), min_offsets):
            return self._keep(start)
        if max_offsets is not None:
            ranges = prorate(ranges, max_offsets)
        starts = {r.topicPartition(): r.fromOffset for r in ranges if begun.get(r.topicPartition()) != r.fromOffset}
        untils = {r.topicPartition(): r.untilOffset for r in ranges}
        if untils == begun and not starts:
            return self._keep(start)
        if start == self._initial:  # every start recorded: a restarted run resolves another initial offset
            starts = {r.topicPartition(): r.fromOffset for r in ranges}
        planner.advance(ranges)
        end = doc_of(untils, starts)
        self._doc = end
        return end

    def _keep(self, start: Dict[str, Any]) -> Dict[str, Any]:
        self._doc = start
        return start

    def _delay(self, available: int, min_offsets: int) -> bool:
        """Spark's ``minOffsetsPerTrigger`` rule: run when ``maxTriggerDelay`` has passed since the last
        batch or ``min_offsets`` are available; otherwise wait."""
        now = self._clock()
        if now - self._last_trigger_ms >= self.opts.max_trigger_delay_ms or available >= min_offsets:
            self._last_trigger_ms = now
            return False
        return True

    def _planner_at(self, start: Dict[str, Any]) -> DirectPlanner:
        if self._planner is not None and self._doc == start:
            return self._planner
        self.close()
        md = self._make_metadata()
        try:
            planner = self._new_planner(_strategy(self.opts), "earliest", md)
            planner.start(offsets_of(start))
        except BaseException:
            close_metadata(md)
            raise
        self._planner, self._doc = planner, start
        return planner

    def latest_known(self) -> Optional[Dict[str, Any]]:
        """The log ends of the last planning (Spark's ``reportLatestOffset``; ``None`` before one)."""
        if self._planner is None or not self._planner.last_latest:
            return None
        return doc_of(self._planner.last_latest)

    # ---------------------------------------------------------------- tasks
    def tasks(self, start: Dict[str, Any], end: Dict[str, Any]) -> List[Task]:
        """The Spark tasks of the micro-batch from ``start`` to ``end`` (a pure function of the two
        offsets, the task options and the parallelism: a replay gets the same tasks)."""
        return plan_tasks(ranges_between(start, end), self.opts.tasks, parallelism=self.parallelism,
                          split_floor=SPLIT_FLOOR)

    def __getstate__(self) -> Dict[str, Any]:
        """Pickled without the planner's broker connections (rebuilt from the next offset)."""
        state = dict(self.__dict__)
        state.update(_planner=None, _doc=None)
        return state

    def close(self) -> None:
        planner, self._planner = self._planner, None
        if planner is not None:
            close_metadata(planner.metadata)


# ---------------------------------------------------------------- executors
def arrow_schema(include_headers: bool) -> Any:
    """The Arrow schema of the source's record batches (what Spark derives from the source's schema)."""
    import pyarrow as pa

    fields = [pa.field("key", pa.binary()), pa.field("value", pa.binary()), pa.field("topic", pa.string()),
              pa.field("partition", pa.int32()), pa.field("offset", pa.int64()),
              pa.field("timestamp", pa.timestamp("us", tz="UTC")), pa.field("timestampType", pa.int32())]
    if include_headers:
        fields.append(pa.field("headers", pa.list_(pa.struct([pa.field("key", pa.string()),
                                                               pa.field("value", pa.binary())]))))
    return pa.schema(fields)


def record_batch(block: RecordBlock, schema: Any) -> Any:
    """One Arrow record batch of the records of ``block`` (read with metadata) in ``schema``."""
    import pyarrow as pa

    n = len(block.offsets)
    if block.timestamps is None or block.timestamp_types is None:
        raise ConfigurationError("the deo-kafka source reads record blocks with metadata (timestamps)")
    millis = pa.array(block.timestamps, pa.int64())
    arrays = [pa.array(block.keys, pa.binary()), pa.array(block.values, pa.binary()),
              pa.array([block.topic] * n, pa.string()), pa.array([block.partition] * n, pa.int32()),
              pa.array(block.offsets, pa.int64()),
              pa.compute.multiply(millis, 1000).cast(pa.timestamp("us", tz="UTC")),
              pa.array(block.timestamp_types, pa.int32())]
    if len(schema) > len(arrays):
        arrays.append(_headers_array(block.headers, n, schema.field("headers").type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _headers_array(headers: Optional[Sequence[Any]], n: int, kind: Any) -> Any:
    """The ``headers`` column of ``n`` records: a list of (key, value) structs per record, null for a
    record without headers (as in Spark's Kafka source). Built from flat key and value arrays and list
    offsets: several times faster than converting one Python dict per header."""
    import pyarrow as pa

    if not headers:
        return pa.nulls(n, kind)
    ends, keys, values, absent = [0], [], [], []
    for h in headers:
        if h:
            for k, v in h:
                keys.append(k)
                values.append(v)
        absent.append(not h)
        ends.append(len(keys))
    pairs = pa.StructArray.from_arrays([pa.array(keys, pa.string()), pa.array(values, pa.binary())],
                                       fields=list(kind.value_type))
    return pa.ListArray.from_arrays(pa.array(ends, pa.int32()), pairs, type=kind, mask=pa.array(absent, pa.bool_()))


def _warn_loss(loss: DataLoss) -> None:
    log.warning("deo-kafka source: data loss (failOnDataLoss=false): %s; these offsets are skipped", loss.describe())


def _first_attempt(r: OffsetRange) -> int:
    return 0


def read_task(opts: KafkaSourceOptions, task: Task,
              attempt: Callable[[OffsetRange], int] = _first_attempt) -> Iterator[Any]:
    """The Arrow record batches of one planned task (executor side): its pieces read with one consumer,
    in order, one batch per fetched block. ``attempt`` returns the task's attempt number (a retry reads
    with a fresh consumer)."""
    import pyarrow.compute  # noqa: F401 - record_batch uses pa.compute

    schema = arrow_schema(opts.include_headers)
    reader = KafkaRangeReader(opts.config, poll_timeout_ms=opts.poll_timeout_ms,
                              fail_on_data_loss=opts.fail_on_data_loss, reader=opts.reader,
                              on_data_loss=_warn_loss, task_attempt=attempt)
    try:
        for block in reader.read_blocks(task, metadata=True):
            if block.offsets:
                yield record_batch(block, schema)
    except DataLossError as exc:
        raise DataLossError(
            f"{exc}; the query stops (failOnDataLoss=true). Restart it from the same checkpoint with "
            f".option('failOnDataLoss', 'false') to continue without these offsets (they are then logged at "
            f"WARN)") from None
