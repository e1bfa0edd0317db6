"""spark-streaming-kafka-0-10's ``ConsumerStrategies`` and ``LocationStrategies``, Python spelling.

A Spark 0-10 app wrote::

    KafkaUtils.createDirectStream(ssc, LocationStrategies.PreferConsistent,
                                  ConsumerStrategies.Subscribe(topics, kafkaParams))

and that call works here unchanged. ``ConsumerStrategies.Subscribe/SubscribePattern/Assign`` take
Spark's arguments (topics, kafkaParams, optional ``{TopicAndPartition: offset}``) and return this
library's :class:`~dstream_exactly_once.Subscribe`, :class:`~dstream_exactly_once.SubscribePattern`
and :class:`~dstream_exactly_once.Assign`, carrying the kafkaParams. They also take
``from_timestamp_ms``: start each partition at its first record with a timestamp >= that time,
looked up on the driver when the strategy is made (``kafkaParams`` are needed for that).

Location strategies decide where Spark 0-10 ran each partition's task so its cached consumer could
be reused. Here executors read with short-lived kafka-python consumers that fetch from the
partition leader wherever the task runs, and range tasks carry no preferred location, so:

- ``PreferConsistent``: what happens anyway — tasks go wherever Spark schedules them;
- ``PreferBrokers``: accepted, no effect (tasks are not moved to broker hosts);
- ``PreferFixed(hostMap)``: ``hostMap`` ``{TopicAndPartition: host}`` is validated, then has no effect.
"""

from __future__ import annotations

import re
from typing import Any, Dict, Iterable, Mapping, Optional, Tuple, Union

from ..errors import ConfigurationError
from ._offsets import TopicAndPartition
from ._params import KafkaConfig, parse_kafka_params
from ._strategies import Assign, ConsumerStrategy, Subscribe, SubscribePattern
from ._timestamps import check_timestamp, offsets_for_timestamps

__all__ = ["ConsumerStrategies", "LocationStrategies", "LocationStrategy", "direct_stream_args"]

Timestamps = Union[int, Mapping[Any, int]]


class LocationStrategy:
    """A 0-10 location strategy (see the module docstring for what each does here: nothing but checks).

    Calling it returns itself, so both ``LocationStrategies.PreferConsistent`` (Scala) and
    ``LocationStrategies.PreferConsistent()`` (Java) work.
    """

    def __init__(self, name: str, host_map: Optional[Dict[TopicAndPartition, str]] = None) -> None:
        self.name = name
        self.host_map: Dict[TopicAndPartition, str] = dict(host_map or {})

    def __call__(self) -> LocationStrategy:
        return self

    def __repr__(self) -> str:
        return f"LocationStrategies.{self.name}" + (f"({self.host_map!r})" if self.name == "PreferFixed" else "")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LocationStrategy) and (self.name, self.host_map) == (other.name, other.host_map)

    def __hash__(self) -> int:
        return hash(self.name)


def _tp(value: Any, where: str) -> TopicAndPartition:
    """A TopicAndPartition, or kafka-python's ``TopicPartition`` (0-10's key type) converted."""
    if isinstance(value, TopicAndPartition):
        return value
    topic, partition = getattr(value, "topic", None), getattr(value, "partition", None)
    if type(value).__name__ == "TopicPartition" and isinstance(topic, str) and isinstance(partition, int):
        return TopicAndPartition(topic, partition)
    raise ConfigurationError(f"{where} must be TopicAndPartition (or kafka.TopicPartition), got {value!r}")


class LocationStrategies:
    """Spark 0-10's location strategies, accepted for porting; none moves a task here."""

    PreferConsistent = LocationStrategy("PreferConsistent")
    PreferBrokers = LocationStrategy("PreferBrokers")

    @staticmethod
    def PreferFixed(hostMap: Mapping[Any, str]) -> LocationStrategy:  # noqa: N802, N803 - Spark API names
        """``hostMap`` ``{TopicAndPartition: host}`` is checked (non-empty host names) and has no effect."""
        if not isinstance(hostMap, Mapping):
            raise ConfigurationError(f"PreferFixed needs a dict {{TopicAndPartition: host}}, got {hostMap!r}")
        hosts: Dict[TopicAndPartition, str] = {}
        for key, host in hostMap.items():
            tp = _tp(key, "PreferFixed's keys")
            if not isinstance(host, str) or not host.strip():
                raise ConfigurationError(f"PreferFixed[{tp}] must be a host name (non-empty str), got {host!r}")
            hosts[tp] = host
        return LocationStrategy("PreferFixed", hosts)


def _offsets(offsets: Optional[Mapping[Any, Any]]) -> Dict[TopicAndPartition, Any]:
    if offsets is None:
        return {}
    if not isinstance(offsets, Mapping):
        raise ConfigurationError(f"offsets must be a dict {{TopicAndPartition: int}}, got {type(offsets).__name__}")
    return {_tp(k, "offsets keys"): v for k, v in offsets.items()}


def _params(kafka_params: Optional[Mapping[str, Any]],
            from_timestamp_ms: Optional[Timestamps]) -> Optional[KafkaConfig]:
    if kafka_params is None:
        if from_timestamp_ms is not None:
            raise ConfigurationError("from_timestamp_ms needs kafkaParams (the brokers to ask): "
                                     "ConsumerStrategies.Subscribe(topics, kafkaParams, from_timestamp_ms=...)")
        return None
    return parse_kafka_params(kafka_params)


def _by_timestamp(config: Optional[KafkaConfig], strategy: ConsumerStrategy, explicit: Dict[TopicAndPartition, Any],
                  from_timestamp_ms: Optional[Timestamps]) -> Dict[TopicAndPartition, Any]:
    """``explicit`` plus offsets looked up by timestamp for the strategy's other partitions."""
    if from_timestamp_ms is None or config is None:
        return explicit
    from ._metadata import KafkaMetadata

    if isinstance(from_timestamp_ms, Mapping):
        wanted = {_tp(k, "from_timestamp_ms keys"): check_timestamp(v, f"from_timestamp_ms[{k!r}]")
                  for k, v in from_timestamp_ms.items()}
    else:
        ts = check_timestamp(from_timestamp_ms, "from_timestamp_ms")
        metadata = KafkaMetadata(config)
        try:
            wanted = {tp: ts for tp in strategy.partitions(metadata)}
        finally:
            metadata.close()
    found = offsets_for_timestamps(config, {tp: ts for tp, ts in wanted.items() if tp not in explicit})
    return {**found, **explicit}


def _carry(strategy: ConsumerStrategy, kafka_params: Optional[Mapping[str, Any]]) -> ConsumerStrategy:
    strategy.kafka_params = None if kafka_params is None else dict(kafka_params)  # type: ignore[attr-defined]
    return strategy


class ConsumerStrategies:
    """Spark 0-10's consumer strategies; each returns this library's strategy carrying kafkaParams."""

    @staticmethod
    def Subscribe(topics: Iterable[str], kafkaParams: Optional[Mapping[str, Any]] = None,  # noqa: N802, N803
                  offsets: Optional[Mapping[Any, int]] = None, *,
                  from_timestamp_ms: Optional[Timestamps] = None) -> Subscribe:
        """Read every partition of ``topics`` (partitions added later too), from ``offsets`` where
        given, else from ``from_timestamp_ms``, else ``auto.offset.reset``."""
        config = _params(kafkaParams, from_timestamp_ms)
        explicit = _offsets(offsets)
        if not isinstance(topics, (str, bytes, list, tuple, set, frozenset)) and isinstance(topics, Iterable):
            topics = list(topics)  # a Scala-style Iterable: read it once
        strategy = Subscribe(topics)
        strategy = Subscribe(topics, _by_timestamp(config, strategy, explicit, from_timestamp_ms))
        return _carry(strategy, kafkaParams)  # type: ignore[return-value]

    @staticmethod
    def SubscribePattern(pattern: Union[str, re.Pattern[str]],  # noqa: N802
                         kafkaParams: Optional[Mapping[str, Any]] = None,  # noqa: N803
                         offsets: Optional[Mapping[Any, int]] = None, *,
                         from_timestamp_ms: Optional[Timestamps] = None) -> SubscribePattern:
        """Every topic whose whole name matches ``pattern`` (new topics too); offsets as in Subscribe."""
        config = _params(kafkaParams, from_timestamp_ms)
        explicit = _offsets(offsets)
        strategy = SubscribePattern(pattern)
        strategy = SubscribePattern(pattern, _by_timestamp(config, strategy, explicit, from_timestamp_ms))
        return _carry(strategy, kafkaParams)  # type: ignore[return-value]

    @staticmethod
    def Assign(topicPartitions: Iterable[Any], kafkaParams: Optional[Mapping[str, Any]] = None,  # noqa: N802, N803
               offsets: Optional[Mapping[Any, int]] = None, *,
               from_timestamp_ms: Optional[Timestamps] = None) -> Assign:
        """Exactly ``topicPartitions`` (no discovery); offsets as in Subscribe."""
        config = _params(kafkaParams, from_timestamp_ms)
        if isinstance(topicPartitions, (str, bytes, Mapping)) or not isinstance(topicPartitions, Iterable):
            raise ConfigurationError(f"Assign needs a list of TopicAndPartition, got {topicPartitions!r}")
        tps = [_tp(v, "Assign's topicPartitions") for v in topicPartitions]
        explicit = _offsets(offsets)
        stray = sorted(set(explicit) - set(tps))
        if stray:
            raise ConfigurationError("offsets name partitions that are not assigned: " + ", ".join(map(str, stray)))
        strategy = Assign(tps)  # checks the partitions before any broker is asked
        start = _by_timestamp(config, strategy, explicit, from_timestamp_ms)
        if start:  # Spark 0-10 allows offsets for some assigned partitions: the others use auto.offset.reset
            strategy.offsets = Assign(start).offsets
        return _carry(strategy, kafkaParams)  # type: ignore[return-value]


def direct_stream_args(topics: Any, kafka_params: Any,
                       strategy: Optional[ConsumerStrategy]) -> Tuple[Any, Any, Optional[ConsumerStrategy]]:
    """``createDirectStream``'s arguments with the 0-10 form ``(ssc, LocationStrategy, ConsumerStrategy)``
    unpacked to ``(topics=None, kafkaParams, strategy)``; the 0-8 form passes through unchanged."""
    if isinstance(topics, LocationStrategy):
        if not isinstance(kafka_params, ConsumerStrategy):
            raise ConfigurationError(
                f"after a LocationStrategy, pass a ConsumerStrategies.Subscribe/SubscribePattern/Assign(...), "
                f"got {kafka_params!r}")
        if strategy is not None:
            raise ConfigurationError("give the ConsumerStrategy once: positionally (0-10 form) or as strategy=")
        kafka_params, strategy = getattr(kafka_params, "kafka_params", None), kafka_params
        if kafka_params is None:
            raise ConfigurationError(
                f"{strategy!r} carries no kafkaParams: write ConsumerStrategies.Subscribe(topics, kafkaParams)")
        return None, kafka_params, strategy
    if isinstance(kafka_params, (ConsumerStrategy, LocationStrategy)):
        raise ConfigurationError(
            "the 0-10 form is createDirectStream(ssc, LocationStrategies.PreferConsistent, "
            f"ConsumerStrategies.Subscribe(topics, kafkaParams)); got topics={topics!r}, kafkaParams={kafka_params!r}")
    carried = getattr(strategy, "kafka_params", None)
    if kafka_params is None and carried is not None:
        return topics, carried, strategy
    return topics, kafka_params, strategy
