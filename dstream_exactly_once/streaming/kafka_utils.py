"""``KafkaUtils``: the Spark 2.4 ``pyspark.streaming.kafka`` entry points, backed by kafka-python.

Porting an app is one import line::

    # from pyspark.streaming.kafka import KafkaUtils, OffsetRange, TopicAndPartition
    from dstream_exactly_once import KafkaUtils, OffsetRange, TopicAndPartition
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

from pyspark import SparkContext
from pyspark.streaming import StreamingContext

from ..errors import ConfigurationError, OffsetRangeError
from ..kafka.metadata import KafkaMetadata
from ..kafka.params import KafkaConfig, parse_kafka_params
from ..kafka.planner import DirectPlanner, RateLimit
from ..kafka.strategies import Assign, ConsumerStrategy, Subscribe, check_topics
from ..offsets import Broker, KafkaMessageAndMetadata, OffsetRange, TopicAndPartition, utf8_decoder
from ._driver_ref import DriverOnly
from .backpressure import rate_controller_from_conf
from .dstream import KafkaDStream, batch_seconds
from .rdd import KafkaRDD, make_kafka_rdd

if TYPE_CHECKING:
    from ..stores.base import TransactionalStore
    from .exactly_once import ExactlyOnceDStream

__all__ = ["KafkaUtils", "ReadOptions"]

Decoder = Callable[[Optional[bytes]], Any]
Handler = Optional[Callable[[KafkaMessageAndMetadata], Any]]


class ReadOptions:
    """Executor read settings resolved from SparkConf and keyword arguments."""

    def __init__(self, conf: Any, *, poll_timeout_ms: Optional[int] = None,
                 fail_on_data_loss: Optional[bool] = None) -> None:
        def conf_get(key: str, default: str) -> str:
            return str(conf.get(key, default)) if conf is not None else default

        if poll_timeout_ms is None:
            raw = conf_get("spark.streaming.kafka.consumer.poll.ms", "")
            if raw:
                poll_timeout_ms = _int_conf("spark.streaming.kafka.consumer.poll.ms", raw)
            else:
                poll_timeout_ms = 1000 * _seconds(conf_get("spark.network.timeout", "120s"))
        if isinstance(poll_timeout_ms, bool) or not isinstance(poll_timeout_ms, int) or poll_timeout_ms <= 0:
            raise ConfigurationError(f"poll timeout must be a positive int of ms, got {poll_timeout_ms!r}")
        if fail_on_data_loss is None:
            raw = conf_get("spark.streaming.kafka.failOnDataLoss", "true").lower()
            if raw not in ("true", "false"):
                raise ConfigurationError(f"spark.streaming.kafka.failOnDataLoss must be true/false, got {raw!r}")
            fail_on_data_loss = raw == "true"
        if not isinstance(fail_on_data_loss, bool):
            raise ConfigurationError(f"failOnDataLoss must be a bool, got {fail_on_data_loss!r}")
        self.poll_timeout_ms = poll_timeout_ms
        self.fail_on_data_loss = fail_on_data_loss
        self.rate = RateLimit.from_spark_conf(conf)


def _int_conf(key: str, raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise ConfigurationError(f"SparkConf {key} must be an integer, got {raw!r}") from None


def _seconds(raw: str) -> int:
    raw = raw.strip().lower()
    for suffix, mult in (("ms", 0.001), ("s", 1), ("min", 60), ("m", 60), ("h", 3600)):
        if raw.endswith(suffix):
            return max(1, int(float(raw[: -len(suffix)]) * mult))
    return int(raw)


def _check_decoders(key_decoder: Any, value_decoder: Any, handler: Any) -> None:
    for name, f in (("keyDecoder", key_decoder), ("valueDecoder", value_decoder)):
        if not callable(f):
            raise ConfigurationError(f"{name} must be callable, got {f!r}")
    if handler is not None and not callable(handler):
        raise ConfigurationError(f"messageHandler must be callable or None, got {handler!r}")


class KafkaUtils:
    """Factory methods for Kafka DStreams and RDDs (names and signatures as in Spark 2.4)."""

    @staticmethod
    def createDirectStream(  # noqa: N802
        ssc: StreamingContext,
        topics: Sequence[str],
        kafkaParams: Mapping[str, Any],  # noqa: N803
        fromOffsets: Optional[Mapping[TopicAndPartition, int]] = None,  # noqa: N803
        keyDecoder: Decoder = utf8_decoder,  # noqa: N803
        valueDecoder: Decoder = utf8_decoder,  # noqa: N803
        messageHandler: Handler = None,  # noqa: N803
        *,
        strategy: Optional[ConsumerStrategy] = None,
        failOnDataLoss: Optional[bool] = None,  # noqa: N803
        poll_timeout_ms: Optional[int] = None,
        discovery_interval_s: float = 5.0,
    ) -> KafkaDStream:
        """A direct stream over ``topics``: each batch is a KafkaRDD of explicit offset ranges.

        Without ``fromOffsets`` every partition of ``topics`` is read, starting at
        ``auto.offset.reset`` (``largest``/``latest`` by default, ``smallest``/``earliest``);
        partitions added later are picked up from their earliest offset. With ``fromOffsets``
        (``{TopicAndPartition: offset}``, the first offset to read) exactly those partitions are
        read, as in Spark 2.4; their topics must equal ``topics``. ``strategy`` (Subscribe,
        SubscribePattern, Assign) replaces both. Records are ``(key, value)`` decoded by the
        decoders, or ``messageHandler(KafkaMessageAndMetadata)``.

        Unit of parallelism: one Spark task per topic partition per batch. Delivery:
        at-least-once for outputs across driver restarts; see ``createExactlyOnceStream``.
        """
        batches = _direct_batches(ssc, topics, kafkaParams, fromOffsets, keyDecoder, valueDecoder, messageHandler,
                                  strategy, failOnDataLoss, poll_timeout_ms, discovery_interval_s)
        batches.planner.start()
        return KafkaDStream(ssc, batches)

    @staticmethod
    def createExactlyOnceStream(  # noqa: N802
        ssc: StreamingContext,
        kafkaParams: Mapping[str, Any],  # noqa: N803
        topics: Union[Sequence[str], Mapping[TopicAndPartition, int]],
        messageHandler: Handler = None,  # noqa: N803
        *,
        store: Union[str, TransactionalStore],
        app_id: Optional[str] = None,
        keyDecoder: Decoder = utf8_decoder,  # noqa: N803
        valueDecoder: Decoder = utf8_decoder,  # noqa: N803
        strategy: Optional[ConsumerStrategy] = None,
        failOnDataLoss: Optional[bool] = None,  # noqa: N803
        poll_timeout_ms: Optional[int] = None,
        discovery_interval_s: float = 5.0,
        monitor_group: Optional[str] = None,
        retain_batches: int = 100,
    ) -> ExactlyOnceDStream:
        """The headline API: a direct stream whose outputs commit results and offsets together.

        ``topics`` is a list/set of topic names, or — the original design's second form — a
        ``{TopicAndPartition: offset}`` map (usually with a ``messageHandler``). Offsets committed
        in ``store`` (a URL such as ``sqlite:///state.db``, ``postgresql://…``, ``redis://…``, or
        an opened :class:`TransactionalStore`) always win over ``topics``' offsets and
        ``auto.offset.reset``. ``app_id`` names the application inside the store (required with a
        URL). Write results with ``stream.commit_each_batch(f)`` or
        ``stream.commit_each_partition(f)``. ``monitor_group``: after each store commit, the same
        offsets are committed (best effort) to this Kafka consumer group so standard lag tools show
        progress — monitoring only, never read back. ``retain_batches``: how many committed batches
        the store's offset log and commit log keep (older entries are dropped every 10 batches, like
        Structured Streaming's ``spark.sql.streaming.minBatchesToRetain``, default 100); results are
        never dropped.

        Unit of parallelism: one Spark task per topic partition per batch. Delivery guarantee:
        exactly-once for everything written through the store's transaction.
        """
        from ..stores import open_store
        from ..stores.base import TransactionalStore
        from .exactly_once import BatchCommitter, ExactlyOnceDStream

        if isinstance(topics, Mapping):
            from_offsets: Optional[Mapping[TopicAndPartition, int]] = topics
            names: Any = sorted({tp.topic for tp in topics if isinstance(tp, TopicAndPartition)})
        else:
            from_offsets, names = None, topics
        if isinstance(store, str):
            if not isinstance(app_id, str) or not app_id:
                raise ConfigurationError(f"app_id must name the application in the store, got {app_id!r}")
        elif not isinstance(store, TransactionalStore):
            raise ConfigurationError(f"store must be a store URL or a TransactionalStore, got {store!r}")
        batches = _direct_batches(ssc, names, kafkaParams, from_offsets, keyDecoder, valueDecoder, messageHandler,
                                  strategy, failOnDataLoss, poll_timeout_ms, discovery_interval_s)
        opened = open_store(store, app_id) if isinstance(store, str) else store  # type: ignore[arg-type]
        if monitor_group is not None and (not isinstance(monitor_group, str) or not monitor_group):
            raise ConfigurationError(f"monitor_group must be a non-empty str, got {monitor_group!r}")
        return ExactlyOnceDStream(ssc, BatchCommitter(opened, batches, monitor_group=monitor_group,
                                                      retain_batches=retain_batches))

    @staticmethod
    def createRDD(  # noqa: N802
        sc: SparkContext,
        kafkaParams: Mapping[str, Any],  # noqa: N803
        offsetRanges: List[OffsetRange],  # noqa: N803
        leaders: Optional[Mapping[TopicAndPartition, Broker]] = None,
        keyDecoder: Decoder = utf8_decoder,  # noqa: N803
        valueDecoder: Decoder = utf8_decoder,  # noqa: N803
        messageHandler: Handler = None,  # noqa: N803
        *,
        failOnDataLoss: Optional[bool] = None,  # noqa: N803
        poll_timeout_ms: Optional[int] = None,
    ) -> KafkaRDD:
        """An RDD of the given offset ranges (one partition each, in order), checked against the
        brokers first: a range outside ``[earliest, latest]`` raises :class:`OffsetRangeError`.

        ``leaders`` is accepted for Spark 2.4 compatibility and only validated (kafka-python finds
        leaders itself). Unit of parallelism: one task per range. Delivery: a deterministic read of
        exactly these offsets.
        """
        if not isinstance(sc, SparkContext):
            raise ConfigurationError(f"sc must be a SparkContext, got {type(sc).__name__}")
        config = parse_kafka_params(kafkaParams)
        if not isinstance(offsetRanges, (list, tuple)):
            raise ConfigurationError(f"offsetRanges must be a list of OffsetRange, got {type(offsetRanges).__name__}")
        for r in offsetRanges:
            if not isinstance(r, OffsetRange):
                raise ConfigurationError(f"offsetRanges must contain OffsetRange values, got {r!r}")
        if leaders is not None:
            if not isinstance(leaders, Mapping) or not all(
                    isinstance(k, TopicAndPartition) and isinstance(v, Broker) for k, v in leaders.items()):
                raise ConfigurationError("leaders must be a dict {TopicAndPartition: Broker}")
        _check_decoders(keyDecoder, valueDecoder, messageHandler)
        opts = ReadOptions(sc.getConf(), poll_timeout_ms=poll_timeout_ms, fail_on_data_loss=failOnDataLoss)
        check_ranges_in_log(config, offsetRanges)
        return make_kafka_rdd(sc, config, offsetRanges, key_decoder=keyDecoder, value_decoder=valueDecoder,
                              message_handler=messageHandler, poll_timeout_ms=opts.poll_timeout_ms,
                              fail_on_data_loss=opts.fail_on_data_loss)

    @staticmethod
    def createStream(*_args: Any, **_kwargs: Any) -> Any:  # noqa: N802
        """Spark 2.4's receiver-based stream is not provided: it needs a WAL to avoid data loss.
        Use :meth:`createDirectStream` (same records, explicit offsets, no receivers)."""
        raise ConfigurationError(
            "KafkaUtils.createStream (receiver + ZooKeeper) is not supported; use KafkaUtils.createDirectStream "
            "with kafkaParams {'bootstrap.servers': ...} — see docs/porting.md")


def _direct_batches(ssc: StreamingContext, topics: Any, kafkaParams: Mapping[str, Any],  # noqa: N803
                    fromOffsets: Optional[Mapping[TopicAndPartition, int]], keyDecoder: Decoder,  # noqa: N803
                    valueDecoder: Decoder, messageHandler: Handler,  # noqa: N803
                    strategy: Optional[ConsumerStrategy], failOnDataLoss: Optional[bool],  # noqa: N803
                    poll_timeout_ms: Optional[int], discovery_interval_s: float) -> DirectBatches:
    """Validate everything a direct stream needs and build its (not yet started) batch builder."""
    if not isinstance(ssc, StreamingContext):
        raise ConfigurationError(f"ssc must be a StreamingContext, got {type(ssc).__name__}")
    config = parse_kafka_params(kafkaParams)
    _check_decoders(keyDecoder, valueDecoder, messageHandler)
    if strategy is None:
        names = check_topics(topics)
        if fromOffsets:
            strategy = Assign(fromOffsets)
            from_topics = sorted({tp.topic for tp in strategy.offsets})
            if from_topics != names:
                raise ConfigurationError(f"the topics {names} do not equal the topics of fromOffsets {from_topics}")
        else:
            strategy = Subscribe(names)
    elif not isinstance(strategy, ConsumerStrategy):
        raise ConfigurationError(f"strategy must be Subscribe, SubscribePattern or Assign, got {strategy!r}")
    opts = ReadOptions(ssc.sparkContext.getConf(), poll_timeout_ms=poll_timeout_ms, fail_on_data_loss=failOnDataLoss)
    planner = DirectPlanner(KafkaMetadata(config), strategy, auto_offset_reset=config.auto_offset_reset,
                            fail_on_data_loss=opts.fail_on_data_loss, rate=opts.rate,
                            discovery_interval_s=discovery_interval_s)
    return DirectBatches(ssc, config, planner, opts, keyDecoder, valueDecoder, messageHandler)


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


class DirectBatches(DriverOnly):
    """The driver-side batch builder of a direct stream: plan, advance, build the KafkaRDD."""

    def __init__(self, ssc: StreamingContext, config: KafkaConfig, planner: DirectPlanner, opts: ReadOptions,
                 key_decoder: Decoder, value_decoder: Decoder, handler: Handler) -> None:
        self._register()
        self.sc = ssc.sparkContext
        self.seconds = batch_seconds(ssc)
        self.config = config
        self.planner = planner
        self.opts = opts
        self.decoders: Dict[str, Any] = {"key_decoder": key_decoder, "value_decoder": value_decoder,
                                         "message_handler": handler}
        #: ``spark.streaming.backpressure.enabled``: the rate estimator fed by completed batches
        self.backpressure = rate_controller_from_conf(self.sc.getConf(), int(round(self.seconds * 1000)))
        if self.backpressure is not None:
            ssc.addStreamingListener(self.backpressure.listener())

    def plan(self, time: datetime) -> List[OffsetRange]:
        bp = self.backpressure
        ranges = self.planner.plan(self.seconds, None if bp is None else bp.rate())
        self.planner.advance(ranges)
        if bp is not None:
            bp.planned(int(round(time.timestamp() * 1000)), sum(r.count() for r in ranges))
        return ranges

    def rdd(self, ranges: Sequence[OffsetRange]) -> KafkaRDD:
        return make_kafka_rdd(self.sc, self.config, ranges, poll_timeout_ms=self.opts.poll_timeout_ms,
                              fail_on_data_loss=self.opts.fail_on_data_loss, **self.decoders)

    def __call__(self, time: datetime) -> KafkaRDD:
        return self.rdd(self.plan(time))

