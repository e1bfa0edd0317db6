"""The broker as operator tools see it: the Kafka source's :class:`~dstream_exactly_once.core._live_log.LiveLog`,
and how Kafka positions are shown (:class:`KafkaRangeDisplay`).

Registered for range kind ``"kafka"`` when the Kafka package is imported, so ``dstream-eo offsets``
reaches the broker (``--bootstrap-servers``, ``--kafka-params``) without importing this package.
Positions are addressed by their store keys (``"topic/partition"``).
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

from ..core._live_log import LiveLog, register_live_log
from ..core._range_display import RangeDisplay, register_range_display
from ..core._ranges import Position, SourceRange
from ..errors import ConfigurationError
from ._metadata import KafkaMetadata
from ._offsets import OffsetRange, TopicAndPartition
from ._params import KafkaConfig, parse_kafka_params

__all__ = ["KafkaLiveLog", "KafkaRangeDisplay"]


def _tp(key: str) -> TopicAndPartition:
    tp = OffsetRange.parse_position_key(key)
    if tp is None:
        raise ConfigurationError(f"{key!r} is not a Kafka position key (topic/partition)")
    return tp


class KafkaLiveLog(LiveLog):
    """Earliest/latest/by-time offsets of Kafka partitions (one admin client, closed by :meth:`close`)."""

    kind = OffsetRange.kind

    def __init__(self, config: KafkaConfig) -> None:
        self.config = config
        self.md = KafkaMetadata(config)

    @classmethod
    def open(cls, settings: Mapping[str, Any]) -> KafkaLiveLog:
        """The broker reached with ``settings`` (kafkaParams, checked as a stream's are)."""
        return cls(parse_kafka_params(dict(settings)))

    @property
    def where(self) -> str:
        return self.config.bootstrap

    def stream_partitions(self, groups: Sequence[str]) -> Dict[str, Dict[int, str]]:
        unknown = sorted(set(groups) - self.md.topics())
        if unknown:
            raise ConfigurationError(f"unknown topic(s) {', '.join(map(repr, unknown))} at {self.where}")
        return {topic: {p: f"{topic}/{p}" for p in ids} for topic, ids in self.md.partitions(groups).items()}

    def ends(self, keys: Sequence[str]) -> Tuple[Dict[str, int], Dict[str, int]]:
        tps = {key: _tp(key) for key in keys}
        earliest, latest = self.md.earliest(tps.values()), self.md.latest(tps.values())
        return ({k: earliest[tp] for k, tp in tps.items() if tp in earliest},
                {k: latest[tp] for k, tp in tps.items() if tp in latest})

    def positions_at(self, keys: Sequence[str], time_ms: int) -> Dict[str, Optional[int]]:
        from kafka import KafkaConsumer, TopicPartition

        wanted = {key: TopicPartition(_tp(key).topic, _tp(key).partition) for key in keys}
        consumer = KafkaConsumer(**self.config.consumer_kwargs())
        try:
            found = consumer.offsets_for_times({tp: time_ms for tp in wanted.values()})
        finally:
            consumer.close()
        return {key: None if found.get(tp) is None else int(found[tp].offset) for key, tp in wanted.items()}

    def close(self) -> None:
        self.md.close()


class KafkaRangeDisplay(RangeDisplay):
    """How progress records and the CLI show Kafka positions."""

    kind = OffsetRange.kind

    def progress_group(self, r: SourceRange) -> Optional[Tuple[str, str]]:
        """Progress records nest Kafka positions as ``{topic: {partition: offset}}`` (as Spark does)."""
        return (r.topic, str(r.partition)) if isinstance(r, OffsetRange) else None

    def position_row(self, key: str, position: Position) -> Dict[str, Any]:
        """A stored Kafka offset: topic, partition and the next offset; the log's ends and the lag
        come from the broker (the CLI asks it when given ``--bootstrap-servers``)."""
        tp = OffsetRange.parse_position_key(key)
        if tp is None:
            return super().position_row(key, position)
        return {"source": self.kind, "topic": tp.topic, "partition": tp.partition, "position": position.offset}


register_live_log(KafkaLiveLog.kind, KafkaLiveLog.open)
register_range_display(KafkaRangeDisplay())
