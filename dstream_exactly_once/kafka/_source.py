"""The Kafka source on the driver: the core's :class:`~dstream_exactly_once.core._source.BatchSource`.

:class:`KafkaSource` resumes from stored positions (checked against the broker's log before
anything is written), plans each batch's offset ranges with the
:class:`~dstream_exactly_once.kafka._planner.DirectPlanner` (rate limits, an optional rate control
such as backpressure, the data-loss policy, partition discovery), skips past replayed ranges,
mirrors committed offsets to a monitoring consumer group off the batch path
(:mod:`._group_mirror`) and hands out the executor side,
:class:`~dstream_exactly_once.kafka._range_reader.KafkaRangeReader`. Nothing here imports Spark:
``kafka/spark/_direct.py`` adds the Spark glue (SparkConf, the batch RDD, checkpoint recovery).

Unit of parallelism: one range per topic partition per batch. Guarantee: the planned ranges are
stored before they are read and replayed unchanged, so with an exactly-once committer each offset
is reflected once in the output; a source whose ranges are read and committed elsewhere is
at-least-once.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Dict, List, Mapping, Optional, Protocol, Sequence

from ..core._ranges import Position, SourceRange
from ..core._source import BatchSource
from ..errors import ConfigurationError, OffsetRangeError
from ._group_mirror import GroupCommitter, GroupMirror
from ._metadata import KafkaMetadata, close_metadata
from ._offsets import OffsetRange, TopicAndPartition
from ._params import KafkaConfig
from ._planner import DirectPlanner
from ._range_reader import KafkaRangeReader
from ._reader_choice import DEFAULT_READER

__all__ = ["KAFKA_LOSS_OPTION", "KafkaSource", "RateControl", "check_ranges_in_log", "kafka_ranges"]

#: How a user chooses the Kafka source's skip data-loss policy (named in data-loss errors).
KAFKA_LOSS_OPTION = "failOnDataLoss=False (or Spark conf spark.streaming.kafka.failOnDataLoss=false)"


class RateControl(Protocol):
    """A per-batch record budget fed back by completed batches (e.g. Spark's backpressure estimator)."""

    def rate(self) -> Optional[float]:
        """Records per second the next batch may read in all (``None``: no limit yet)."""

    def planned(self, batch_time_ms: int, records: int) -> None:
        """Told the size of each planned batch."""


def kafka_ranges(ranges: Sequence[SourceRange], what: str) -> List[OffsetRange]:
    """``ranges`` as Kafka ranges; a range of another source raises a
    :class:`~dstream_exactly_once.errors.ConfigurationError` naming it (a batch reads one source)."""
    foreign = [r for r in ranges if not isinstance(r, OffsetRange)]
    if foreign:
        raise ConfigurationError(f"{what} got {len(foreign)} range(s) of another source, e.g. {foreign[0]!r}; "
                                 f"the Kafka source reads only OffsetRange values (a batch reads one source: "
                                 f"is the store's app_id shared with another stream?)")
    return list(ranges)  # type: ignore[arg-type]  # all OffsetRange, checked above


def check_ranges_in_log(config: KafkaConfig, ranges: Sequence[OffsetRange]) -> None:
    """Every range must lie within its partition's ``[earliest, latest]`` (one metadata round trip)."""
    if not ranges:
        return
    md = KafkaMetadata(config)
    try:
        tps = {r.topicPartition() for r in ranges}
        existing = md.partitions({tp.topic for tp in tps})
        missing = sorted(tp for tp in tps if tp.partition not in existing.get(tp.topic, []))
        if missing:
            raise OffsetRangeError("partitions do not exist: " + ", ".join(str(tp) for tp in missing))
        earliest, latest = md.earliest(tps), md.latest(tps)
    finally:
        md.close()
    bad = [f"{r} is outside the log [{earliest[r.topicPartition()]}, {latest[r.topicPartition()]}]"
           for r in ranges
           if r.fromOffset < earliest[r.topicPartition()] or r.untilOffset > latest[r.topicPartition()]]
    if bad:
        raise OffsetRangeError("; ".join(bad))


class KafkaSource(BatchSource):
    """The driver side of a direct Kafka stream: resume, plan, advance, mirror, read.

    ``batch_seconds``: the batch interval (rate limits are per second). ``decoders``: the
    ``key_decoder``/``value_decoder``/``message_handler`` keyword arguments of the reader.
    ``rate_control``: an optional per-batch budget (backpressure). ``monitor_group``: after each
    store commit, the committed offsets are also committed (best effort, in the background) to this
    Kafka consumer group so standard lag tools show progress.
    """

    kind = OffsetRange.kind
    data_loss_option = KAFKA_LOSS_OPTION

    def __init__(self, config: KafkaConfig, planner: DirectPlanner, *, batch_seconds: float,
                 poll_timeout_ms: int, fail_on_data_loss: bool, reader: str = DEFAULT_READER,
                 decoders: Optional[Mapping[str, Any]] = None, rate_control: Optional[RateControl] = None,
                 monitor_group: Optional[str] = None) -> None:
        self.config = config
        self.planner = planner
        self.seconds = batch_seconds
        self.poll_timeout_ms = poll_timeout_ms
        self.fail_on_data_loss = fail_on_data_loss
        self.reader_name = reader
        self.decoders: Dict[str, Any] = dict(decoders or {})
        self.rate_control = rate_control
        self.monitor_group = monitor_group
        self._mirror: Optional[GroupMirror] = None

    # ---------------------------------------------------------------- BatchSource
    def describe(self) -> str:
        return f"Kafka {self.planner.strategy!r} at {self.config.bootstrap}"

    def start(self, positions: Optional[Mapping[str, Position]] = None) -> None:
        stored: Dict[TopicAndPartition, int] = {}
        for key, pos in (positions or {}).items():
            tp = OffsetRange.parse_position_key(key)
            if tp is None:
                raise ConfigurationError(f"the store holds position {key!r}, which is not a Kafka topic partition: "
                                         f"its app_id belongs to another source; use another app_id")
            stored[tp] = pos.offset
        self.planner.start(stored)

    def advance(self, ranges: Sequence[SourceRange]) -> None:
        self.planner.advance(kafka_ranges(ranges, "the Kafka source's advance()"))

    def plan(self, time: datetime) -> List[SourceRange]:
        control = self.rate_control
        ranges = self.planner.plan(self.seconds, None if control is None else control.rate())
        self.planner.advance(ranges)
        if control is not None:
            control.planned(int(round(time.timestamp() * 1000)), sum(r.count() for r in ranges))
        return list(ranges)

    def reader(self) -> KafkaRangeReader:
        return KafkaRangeReader(self.config, poll_timeout_ms=self.poll_timeout_ms,
                                fail_on_data_loss=self.fail_on_data_loss, reader=self.reader_name, **self.decoders)

    def after_commit(self, ranges: Sequence[SourceRange]) -> None:
        committed = kafka_ranges(ranges, "the Kafka source's after_commit()")
        if self.monitor_group:
            self.group_mirror().offer({r.topicPartition(): r.untilOffset for r in committed})

    def group_mirror(self) -> GroupMirror:
        """The mirror to ``monitor_group`` (made at first use, with its own admin client, replaced after
        a failed commit)."""
        mirror = self._mirror
        if mirror is None or mirror.group != self.monitor_group:
            group = self.monitor_group
            if not group:
                raise ConfigurationError("the Kafka source has no monitor_group to mirror offsets to")
            config = self.config
            committer = GroupCommitter(group, lambda: KafkaMetadata(config))
            mirror = self._mirror = GroupMirror(group, committer, committer.close)
        return mirror

    @property
    def mirror_failures(self) -> int:
        """Sets of committed offsets the monitoring mirror gave up on."""
        return 0 if self._mirror is None else self._mirror.failures

    def latest_positions(self) -> Mapping[str, int]:
        """The log ends the planner's last ListOffsets returned (no extra round trip)."""
        return {f"{tp.topic}/{tp.partition}": off for tp, off in self.planner.last_latest.items()}

    def data_loss_skips(self) -> int:
        return int(self.planner.lost_offsets)

    def close(self) -> None:
        mirror, self._mirror = self._mirror, None
        if mirror is not None:
            mirror.close()
        close_metadata(self.planner.metadata)
