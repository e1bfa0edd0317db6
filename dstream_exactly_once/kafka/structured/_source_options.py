"""Options of the Structured Streaming ``deo-kafka`` source, checked before the query reads anything.

The names are Spark's Kafka source's wherever the meaning is the same (keys are case-insensitive,
as Spark's ``.option()`` keys are):

==============================  ==========  =======================================================
name                            default     meaning
==============================  ==========  =======================================================
``subscribe``                   (one of 3)  topics, comma-separated
``subscribePattern``            (one of 3)  a regular expression every whole topic name is matched by
``assign``                      (one of 3)  JSON ``{"topic": [0, 1]}``: exactly these partitions
``startingOffsets``             latest      ``earliest``, ``latest`` or JSON ``{"topic": {"0": 23}}``
                                            (``-2``: earliest, ``-1``: latest; every partition named)
``maxOffsetsPerTrigger``        (none)      most offsets of one micro-batch, split over the
                                            partitions by their lag (as Spark's)
``minOffsetsPerTrigger``        (none)      fewest offsets a micro-batch waits for ...
``maxTriggerDelay``             15m         ... at most this long (then it runs with what there is)
``failOnDataLoss``              true        offsets gone before they were read stop the query
``includeHeaders``              false       a ``headers`` column
``kafkaConsumer.pollTimeoutMs`` 120000      how long an executor waits for a fetch (ms)
``kafka.<setting>``             (none)      Kafka client settings (kafkaParams: SASL, SSL, …);
                                            ``kafka.bootstrap.servers`` is required
``reader``                      kafka-...   the executor reader: ``kafka-python`` or ``confluent-kafka``
``tasks.target.count``          (Spark's)   tasks a micro-batch aims at (default: the session's
                                            default parallelism when registered with
                                            :func:`~dstream_exactly_once.structured.register`)
``tasks.target.size``           (derived)   most offsets a packed task reads
``tasks.split.size``            (derived)   a range larger than this is split (``0``: never)
``starting.positions.store``    (none)      a store URL: a query without an offset log starts from
                                            the Kafka positions committed there (with the
                                            ``deo-store`` sink's ``anchor=true``, or a DStream app)
``starting.positions.app``      (none)      that application's id (both or neither)
==============================  ==========  =======================================================

``endingOffsets`` is refused (it belongs to batch queries, as in Spark); Spark's timestamp-based
and consumer-group options are refused naming what to use instead. Nothing here imports Spark.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

from ...core._options import parse_duration
from ...core._tasks import TaskOptions
from ...errors import ConfigurationError
from ...structured._starting_positions import POSITIONS_APP, POSITIONS_STORE, check_starting_positions
from .._offsets import TopicAndPartition
from .._params import KafkaConfig, parse_kafka_params
from .._reader_choice import DEFAULT_READER, check_reader
from .._strategies import check_topic_name

__all__ = ["ENTRY_NAME", "KafkaSourceOptions", "parse_kafka_source_options"]

#: the option registry's name of this source
ENTRY_NAME = "deo-kafka source"

#: Spark Kafka source options this source does not offer, with what to do instead
_REFUSED = {
    "endingoffsets": "'endingOffsets' applies to batch queries (spark.read); a streaming query reads until it is "
                     "stopped (Trigger.AvailableNow reads what there is when it starts, then stops)",
    "startingoffsetsbytimestamp": "start from offsets: option 'startingOffsets' (JSON of offsets)",
    "startingtimestamp": "start from offsets: option 'startingOffsets' (JSON of offsets)",
    "startingoffsetsbytimestampstrategy": "start from offsets: option 'startingOffsets'",
    "endingoffsetsbytimestamp": "'endingOffsetsByTimestamp' applies to batch queries",
    "endingtimestamp": "'endingTimestamp' applies to batch queries",
    "minpartitions": "use 'tasks.target.count' (the tasks a micro-batch aims at; ranges are packed and split "
                     "to reach it)",
    "maxrecordsperpartition": "use 'tasks.split.size' (a range larger than this is split into tasks)",
    "groupidprefix": "the source reads with assign-only consumers and no consumer group",
    "kafka.auto.offset.reset": "set the source option 'startingOffsets' instead",
    "kafka.enable.auto.commit": "offsets are decided by the driver and kept in the checkpoint",
    "kafka.key.deserializer": "keys are always read as bytes (column 'key', binary)",
    "kafka.value.deserializer": "values are always read as bytes (column 'value', binary)",
    "kafka.interceptor.classes": "JVM interceptors do not exist in the Python clients",
}
_STRATEGIES = ("subscribe", "subscribepattern", "assign")
_OWN = ("startingoffsets", "maxoffsetspertrigger", "minoffsetspertrigger", "maxtriggerdelay", "failondataloss",
        "includeheaders", "kafkaconsumer.polltimeoutms", "reader", "tasks.target.count", "tasks.target.size",
        "tasks.split.size", "starting.positions.store", "starting.positions.app")
_IGNORED = ("path",)
_SPELLING = {"subscribepattern": "subscribePattern", "startingoffsets": "startingOffsets",
             "maxoffsetspertrigger": "maxOffsetsPerTrigger", "minoffsetspertrigger": "minOffsetsPerTrigger",
             "maxtriggerdelay": "maxTriggerDelay", "failondataloss": "failOnDataLoss",
             "includeheaders": "includeHeaders", "kafkaconsumer.polltimeoutms": "kafkaConsumer.pollTimeoutMs"}

#: ``startingOffsets``: ``"earliest"``, ``"latest"`` or ``{TopicAndPartition: offset}`` (-2 earliest, -1 latest)
Starting = Union[str, Dict[TopicAndPartition, int]]


@dataclass(frozen=True)
class KafkaSourceOptions:
    """The checked options of one ``deo-kafka`` source query (picklable; ``repr`` hides passwords).

    ``strategy`` is ``("subscribe", [topics])``, ``("subscribePattern", regex)`` or
    ``("assign", [TopicAndPartition])``."""

    config: KafkaConfig
    strategy: Tuple[str, Any]
    starting: Starting = "latest"
    max_offsets_per_trigger: Optional[int] = None
    min_offsets_per_trigger: Optional[int] = None
    max_trigger_delay_ms: int = 15 * 60 * 1000
    fail_on_data_loss: bool = True
    include_headers: bool = False
    poll_timeout_ms: int = 120000
    reader: str = DEFAULT_READER
    tasks: TaskOptions = field(default_factory=TaskOptions)
    #: the store (URL) and application whose committed Kafka positions start a new query (or None)
    positions_store: Optional[str] = field(default=None, repr=False)
    positions_app: Optional[str] = None

    def describe(self) -> str:
        kind, value = self.strategy
        shown = value if kind == "subscribePattern" else ",".join(str(v) for v in value)
        return f"deo-kafka {kind}={shown} at {self.config.bootstrap}"


def _spell(key: str) -> str:
    return _SPELLING.get(key, key)


def _label(key: str) -> str:
    return f"deo-kafka source option {_spell(key)!r}"


def parse_kafka_source_options(options: Mapping[str, Any]) -> KafkaSourceOptions:
    """The source's options from Spark's reader ``options``. Raises
    :class:`~dstream_exactly_once.errors.ConfigurationError` naming the key, the bad value and what is
    allowed; connects to nothing."""
    from ...option_registry import entry_point

    entry = entry_point(ENTRY_NAME)
    lowered: Dict[str, Any] = {}
    kafka_params: Dict[str, Any] = {}
    for key, value in options.items():
        name = str(key).lower()
        if name in _REFUSED:
            raise ConfigurationError(f"deo-kafka source option {key!r} is not supported: {_REFUSED[name]}")
        if name.startswith("kafka."):
            kafka_params[str(key)[len("kafka."):]] = value
        elif name in _STRATEGIES or name in _OWN:
            lowered[name] = value
        elif name not in _IGNORED:
            allowed = ", ".join(_spell(k) for k in (*_STRATEGIES, *_OWN))
            raise ConfigurationError(f"unknown deo-kafka source option {key!r} (value {value!r}); allowed: {allowed} "
                                     f"and kafka.<Kafka client setting>")
    if not kafka_params:
        raise ConfigurationError("deo-kafka source option 'kafka.bootstrap.servers' is required "
                                 "(host:port[,host:port])")
    try:
        config = parse_kafka_params(kafka_params)
    except ConfigurationError as exc:
        raise type(exc)(f"deo-kafka source options (kafka.* are Kafka client settings): {exc}") from None

    def parsed(key: str) -> Any:
        return entry.option(_spell(key)).parse(lowered[key], _label(key)) if key in lowered else None

    strategy = _strategy(lowered)
    starting = _starting(lowered.get("startingoffsets", "latest"), strategy)
    max_offsets, min_offsets = parsed("maxoffsetspertrigger"), parsed("minoffsetspertrigger")
    delay_ms = 15 * 60 * 1000
    if "maxtriggerdelay" in lowered:
        delay_ms = int(parse_duration(_label("maxtriggerdelay"), lowered["maxtriggerdelay"], "ms") * 1000)
    if max_offsets is not None and min_offsets is not None and min_offsets > max_offsets:
        raise ConfigurationError(f"deo-kafka source option 'minOffsetsPerTrigger' ({min_offsets}) must not exceed "
                                 f"'maxOffsetsPerTrigger' ({max_offsets})")
    fail = parsed("failondataloss")
    headers = parsed("includeheaders")
    poll = parsed("kafkaconsumer.polltimeoutms")
    reader = check_reader(lowered.get("reader", DEFAULT_READER), config)
    tasks = TaskOptions.from_mapping({k: v for k, v in lowered.items() if k.startswith("tasks.")},
                                     "deo-kafka source option")
    store, app = _positions_store(lowered)
    return KafkaSourceOptions(config, strategy, starting, max_offsets, min_offsets, delay_ms,
                              True if fail is None else fail, bool(headers), 120000 if poll is None else poll,
                              reader, tasks, store, app)


def _positions_store(lowered: Mapping[str, Any]) -> Tuple[Optional[str], Optional[str]]:
    """Options ``starting.positions.store`` and ``starting.positions.app``: both or neither, checked."""
    return check_starting_positions(lowered.get(POSITIONS_STORE), lowered.get(POSITIONS_APP), "deo-kafka source")


def _strategy(lowered: Mapping[str, Any]) -> Tuple[str, Any]:
    given = [k for k in _STRATEGIES if k in lowered]
    parsed = [_one_strategy(k, lowered[k]) for k in given]  # a bad value is named before a second strategy
    if len(given) != 1:
        raise ConfigurationError(f"deo-kafka source needs exactly one of the options 'subscribe', "
                                 f"'subscribePattern' or 'assign', got {[_spell(k) for k in given] or 'none'}")
    return parsed[0]


def _one_strategy(key: str, raw: Any) -> Tuple[str, Any]:
    if key == "subscribe":
        topics = [t.strip() for t in str(raw).split(",") if t.strip()]
        if not topics:
            raise ConfigurationError(f"{_label(key)} must name at least one topic (comma-separated), got {raw!r}")
        return "subscribe", [check_topic_name(t, _label(key)) for t in topics]
    if key == "subscribepattern":
        try:
            re.compile(str(raw))
        except re.error as exc:
            raise ConfigurationError(f"{_label(key)} must be a regular expression, got {raw!r}: {exc}") from None
        if not str(raw):
            raise ConfigurationError(f"{_label(key)} must be a non-empty regular expression, got {raw!r}")
        return "subscribePattern", str(raw)
    doc = _json(key, raw, 'JSON such as {"topic": [0, 1]}')
    parts: List[TopicAndPartition] = []
    for topic, partitions in doc.items():
        check_topic_name(topic, _label(key))
        if not isinstance(partitions, list) or not partitions or not all(_is_partition(p) for p in partitions):
            raise ConfigurationError(f"{_label(key)}: topic {topic!r} must map to a non-empty list of partition "
                                     f"numbers (ints >= 0), got {partitions!r}")
        parts.extend(TopicAndPartition(topic, p) for p in partitions)
    if not parts:
        raise ConfigurationError(f"{_label(key)} must name at least one partition, got {raw!r}")
    return "assign", sorted(set(parts))


def _is_partition(p: Any) -> bool:
    return isinstance(p, int) and not isinstance(p, bool) and p >= 0


def _json(key: str, raw: Any, want: str) -> Dict[str, Any]:
    try:
        doc = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        raise ConfigurationError(f"{_label(key)} must be {want}, got {raw!r}")
    return doc


def _starting(raw: Any, strategy: Tuple[str, Any]) -> Starting:
    key = "startingoffsets"
    if isinstance(raw, str) and raw.strip().lower() in ("earliest", "latest"):
        return raw.strip().lower()
    doc = _json(key, raw, "'earliest', 'latest' or JSON such as {\"topic\": {\"0\": 23, \"1\": -2}} "
                          "(-2: earliest, -1: latest)")
    out: Dict[TopicAndPartition, int] = {}
    for topic, offsets in doc.items():
        check_topic_name(topic, _label(key))
        if not isinstance(offsets, dict):
            raise ConfigurationError(f"{_label(key)}: topic {topic!r} must map to {{\"partition\": offset}}, got "
                                     f"{offsets!r}")
        for p, off in offsets.items():
            if not (isinstance(p, str) and p.isdigit()) or not isinstance(off, int) or isinstance(off, bool) \
                    or off < -2:
                raise ConfigurationError(f"{_label(key)}: {topic!r} partition {p!r} offset {off!r} is not allowed "
                                         f"(partition: a number >= 0; offset: an int >= 0, -2 earliest, -1 latest)")
            out[TopicAndPartition(topic, int(p))] = off
    kind, value = strategy
    if kind == "subscribe":
        stray = sorted(tp for tp in out if tp.topic not in value)
    elif kind == "assign":
        stray = sorted(tp for tp in out if tp not in value)
    else:
        stray = sorted(tp for tp in out if not re.fullmatch(value, tp.topic))
    if stray:
        raise ConfigurationError(f"{_label(key)} names partitions the query does not read: "
                                 f"{', '.join(str(tp) for tp in stray)}")
    return out
