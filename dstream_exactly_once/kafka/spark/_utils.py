"""``KafkaUtils``: the Spark 2.4 ``pyspark.streaming.kafka`` entry points, backed by kafka-python.

Porting an app is one import line::

    # from pyspark.streaming.kafka import KafkaUtils, OffsetRange, TopicAndPartition
    from dstream_exactly_once import KafkaUtils, OffsetRange, TopicAndPartition
"""

from __future__ import annotations

from typing import Any, List, Mapping, Optional, Sequence, Union

from pyspark import SparkContext, StorageLevel
from pyspark.streaming import StreamingContext

from ...core._ranges import check_ranges
from ...core._retry import RetryPolicy, check_retry_policy
from ...engine._committer import BatchCommitter, check_retain_batches
from ...errors import ConfigurationError
from ...option_registry import keyword_checks
from ...stores._base import TransactionalStore
from ...streaming._backpressure import catch_up_from_conf
from ...streaming._connect_guard import INSTEAD_KAFKA, INSTEAD_KAFKA_RDD, refuse_spark_connect
from ...streaming._exactly_once import ExactlyOnceDStream, check_monitor_group
from ...streaming._lifecycle import close_on_stop
from ...streaming._partition_ranges import check_task_layout
from .._offsets import Broker, OffsetRange, TopicAndPartition, utf8_decoder
from .._params import parse_kafka_params
from .._source import check_ranges_in_log
from .._spark_strategy_names import LocationStrategy, direct_stream_args
from .._strategies import ConsumerStrategy
from ._commit_async import DirectKafkaDStream
from ._direct import Decoder, Handler, ReadOptions, build_direct_batches, check_decoders
from ._rdd import KafkaRDD, make_kafka_rdd
from ._receiver_stream import create_stream

__all__ = ["KafkaUtils"]


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
    ) -> DirectKafkaDStream:
        """A direct stream over ``topics``: each batch is a KafkaRDD of explicit offset ranges.

        Without ``fromOffsets`` every partition of ``topics`` is read, starting at
        ``auto.offset.reset`` (``largest``/``latest`` by default, ``smallest``/``earliest``);
        partitions added later are picked up from their earliest offset. With ``fromOffsets``
        (``{TopicAndPartition: offset}``, the first offset to read) exactly those partitions are
        read, as in Spark 2.4; their topics must equal ``topics``. ``strategy`` (Subscribe,
        SubscribePattern, Assign) replaces both. Records are ``(key, value)`` decoded by the
        decoders, or ``messageHandler(KafkaMessageAndMetadata)``.

        Spark 0-10's form ``createDirectStream(ssc, LocationStrategies.PreferConsistent,
        ConsumerStrategies.Subscribe(topics, kafkaParams))`` works too; ``stream.commitAsync(ranges,
        callback)`` commits to kafkaParams' ``group.id`` (see docs/porting.md).

        ``StreamingContext.getOrCreate(checkpointDir, create)`` recovers the stream as Spark 2.4
        did: the batches the checkpoint holds as pending are generated again with their original
        offset ranges, then the stream continues from their end, and stateful operators get their
        checkpointed state back (the checkpoint holds kafkaParams, the decoders and the ranges of
        the last 256 batches).

        Unit of parallelism: one Spark task per topic partition per batch (partition ``i`` of a
        batch's RDD reads ``offsetRanges()[i]``, as in Spark 2.4); with SparkConf
        ``spark.streaming.kafka.tasks.pack=true`` the task planner packs small ranges into one task
        and splits large ones (``spark.streaming.kafka.tasks.*``, docs/performance.md), and
        ``offsetRanges()`` still lists every range. Delivery: at-least-once for outputs across
        driver restarts (with or without a checkpoint); see ``createExactlyOnceStream``.
        """
        refuse_spark_connect(ssc, "KafkaUtils.createDirectStream(ssc=...)", INSTEAD_KAFKA)
        keyword_checks("KafkaUtils.createDirectStream", fromOffsets=fromOffsets, failOnDataLoss=failOnDataLoss,
                       poll_timeout_ms=poll_timeout_ms, discovery_interval_s=discovery_interval_s)
        topics, params, strategy = direct_stream_args(topics, kafkaParams, strategy)
        batches = build_direct_batches(ssc, topics, params, fromOffsets, keyDecoder, valueDecoder,
                                       messageHandler, strategy, failOnDataLoss, poll_timeout_ms, discovery_interval_s)
        batches.start()
        close_on_stop(ssc, batches.close)
        return DirectKafkaDStream(ssc, batches, recoverable=True)

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
        store_retry: Optional[RetryPolicy] = None,
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
        never dropped. ``store_retry``: how long every store operation (offset log, epoch checks,
        commits on the driver and on executors) is retried while the store is unreachable — a
        :class:`~dstream_exactly_once.RetryPolicy`, default about 60 s of jittered exponential
        backoff; when it is spent the stream stops with :class:`StoreUnavailableError`.

        The two middle arguments may also come in ``createDirectStream``'s order,
        ``(ssc, topics, kafkaParams)``: kafkaParams are the mapping with str keys, so the order is
        recognised; every argument can be passed by keyword.

        Unit of parallelism: one Spark task per planned task per batch (the task planner,
        ``spark.streaming.kafka.tasks.*``, docs/performance.md): partitions without new records get no
        task, small ranges are packed into a task read by one consumer (about
        ``sc.defaultParallelism`` tasks), large ranges are split by offsets for ``commit_each_batch``
        and ``foreach_batch``; ``commit_each_partition`` packs but never splits (its function gets
        a tuple of ranges when a task holds several) and ``write_each_partition`` runs one task per
        range. ``spark.streaming.kafka.tasks.pack=false`` gives every range its own task. Delivery
        guarantee: exactly-once for everything written through the store's transaction.
        """
        refuse_spark_connect(ssc, "KafkaUtils.createExactlyOnceStream(ssc=...)", INSTEAD_KAFKA)
        keyword_checks("KafkaUtils.createExactlyOnceStream", failOnDataLoss=failOnDataLoss,
                       poll_timeout_ms=poll_timeout_ms, discovery_interval_s=discovery_interval_s,
                       monitor_group=monitor_group, retain_batches=retain_batches)
        if _looks_like_topics(kafkaParams) and _looks_like_kafka_params(topics):
            kafkaParams, topics = topics, kafkaParams  # type: ignore[assignment]  # noqa: N806
        if isinstance(topics, Mapping):
            from_offsets: Optional[Mapping[TopicAndPartition, int]] = topics
            names: Any = sorted({tp.topic for tp in topics if isinstance(tp, TopicAndPartition)})
        else:
            from_offsets, names = None, topics
        # Everything is checked before the store is written: arguments here, the
        # store read-only in open_store, topics and offsets against the broker and the store's
        # positions in BatchCommitter; the epoch is taken when the StreamingContext starts.
        check_monitor_group(monitor_group)
        check_retain_batches(retain_batches)
        retry = check_retry_policy(store_retry)
        catch_up = catch_up_from_conf(ssc)
        batches = build_direct_batches(ssc, names, kafkaParams, from_offsets, keyDecoder, valueDecoder,
                                       messageHandler, strategy, failOnDataLoss, poll_timeout_ms, discovery_interval_s)
        batches.monitor_group = monitor_group
        committer = BatchCommitter(store, batches, app_id=app_id, retain_batches=retain_batches, retry=retry,
                                   start=False, close_source=batches.close,
                                   check=lambda s: check_task_layout(s, batches.opts.pack), catch_up=catch_up)
        return ExactlyOnceDStream(ssc, committer, batches.rdd, tasks=batches.exactly_once_tasks())

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
        leaders itself). Unit of parallelism: one task per range (partition ``i`` reads
        ``offsetRanges[i]``), or planned tasks with ``spark.streaming.kafka.tasks.pack=true``.
        Delivery: a deterministic read of exactly these offsets.
        """
        refuse_spark_connect(sc, "KafkaUtils.createRDD(sc=...)", INSTEAD_KAFKA_RDD)
        if not isinstance(sc, SparkContext):
            raise ConfigurationError(f"sc must be a SparkContext, got {type(sc).__name__}")
        keyword_checks("KafkaUtils.createRDD", failOnDataLoss=failOnDataLoss, poll_timeout_ms=poll_timeout_ms)
        config = parse_kafka_params(kafkaParams)
        if not isinstance(offsetRanges, (list, tuple)):
            raise ConfigurationError(f"offsetRanges must be a list of OffsetRange, got {type(offsetRanges).__name__}")
        for r in offsetRanges:
            if not isinstance(r, OffsetRange):
                raise ConfigurationError(f"offsetRanges must contain OffsetRange values, got {r!r}")
        check_ranges(offsetRanges, "offsetRanges", one_per_partition=False)  # overlaps would read records twice
        if isinstance(leaders, LocationStrategy):  # Spark 0-10's createRDD(sc, kafkaParams, ranges, locationStrategy)
            leaders = None
        if leaders is not None:
            if not isinstance(leaders, Mapping) or not all(
                    isinstance(k, TopicAndPartition) and isinstance(v, Broker) for k, v in leaders.items()):
                raise ConfigurationError(f"leaders must be a dict {{TopicAndPartition: Broker}} or None, "
                                         f"got {leaders!r}")
        check_decoders(keyDecoder, valueDecoder, messageHandler)
        opts = ReadOptions(sc.getConf(), poll_timeout_ms=poll_timeout_ms, fail_on_data_loss=failOnDataLoss,
                           config=config)
        check_ranges_in_log(config, offsetRanges)
        return make_kafka_rdd(sc, config, offsetRanges, key_decoder=keyDecoder, value_decoder=valueDecoder,
                              message_handler=messageHandler, poll_timeout_ms=opts.poll_timeout_ms,
                              fail_on_data_loss=opts.fail_on_data_loss, reader=opts.reader,
                              tasks=opts.task_options(pack_by_default=False))

    @staticmethod
    def createStream(  # noqa: N802
        ssc: StreamingContext,
        zkQuorum: str,  # noqa: N803
        groupId: str,  # noqa: N803
        topics: Mapping[str, int],
        kafkaParams: Optional[Mapping[str, Any]] = None,  # noqa: N803
        storageLevel: StorageLevel = StorageLevel.MEMORY_AND_DISK_2,  # noqa: N803
        keyDecoder: Decoder = utf8_decoder,  # noqa: N803
        valueDecoder: Decoder = utf8_decoder,  # noqa: N803
    ) -> DirectKafkaDStream:
        """Spark 2.4's receiver stream, as consumer group ``groupId`` on the direct machinery.

        ``topics`` is ``{topic: numThreads}`` (thread counts are checked and have no effect).
        ``zkQuorum`` is accepted and ignored with one warning: the brokers come from kafkaParams'
        ``bootstrap.servers`` or ``metadata.broker.list`` (required). The stream starts from the
        group's offsets committed in Kafka, else ``auto.offset.reset`` (``smallest``/``largest``
        or ``earliest``/``latest``; default ``largest``), and commits each batch's offsets to the
        group after the batch has completed. ``storageLevel`` has no effect (there are no receiver
        blocks to store). Records are ``(key, value)`` decoded by the decoders.

        Unit of parallelism: one Spark task per topic partition per batch. Delivery guarantee:
        at-least-once, as the receiver without a write-ahead log — a crash between a batch's
        output and its commit reads that batch again. For exactly-once, change the call to
        ``KafkaUtils.createExactlyOnceStream(ssc, kafkaParams, list(topics), store=..., app_id=...)``.
        """
        refuse_spark_connect(ssc, "KafkaUtils.createStream(ssc=...)", INSTEAD_KAFKA)
        return create_stream(ssc, zkQuorum, groupId, topics, kafkaParams, storageLevel, keyDecoder, valueDecoder)


def _looks_like_kafka_params(value: object) -> bool:
    return isinstance(value, Mapping) and bool(value) and all(isinstance(k, str) for k in value)


def _looks_like_topics(value: object) -> bool:
    """A topic list/set/tuple, or a ``{TopicAndPartition: offset}`` map (never a kafkaParams dict)."""
    if isinstance(value, Mapping):
        return bool(value) and all(isinstance(k, TopicAndPartition) for k in value)
    return isinstance(value, (list, tuple, set, frozenset)) and all(isinstance(t, str) for t in value)
