"""The Kafka source on the driver: validated settings, the planner, and the batch builder.

:class:`DirectBatches` is the Kafka implementation of the core's
:class:`~dstream_exactly_once.core._source.BatchSource`: it resumes from stored positions (checked
against the broker's log before anything is written), plans each batch's offset ranges (rate
limits, backpressure, data-loss policy, partition discovery) and builds the batch's
:class:`~dstream_exactly_once.KafkaRDD`. ``KafkaUtils`` is only its facade.
"""

from __future__ import annotations

import threading
from datetime import datetime
from typing import Any, Callable, Dict, Mapping, Optional, Sequence

from pyspark.streaming import StreamingContext

from ..._checks import is_int
from ...core._driver_ref import DriverOnly
from ...core._ranges import SourceRange
from ...core._tasks import TaskOptions
from ...errors import ConfigurationError
from ...streaming._backpressure import rate_controller_from_conf
from ...streaming._data_loss import LossReporter, loss_accumulator
from ...streaming._dstream import batch_seconds
from ...streaming._recovery import recovered
from ...streaming._task_context import remember_current
from .._metadata import KafkaMetadata
from .._offsets import Decoder, KafkaMessageAndMetadata, TopicAndPartition
from .._params import KafkaConfig, parse_kafka_params
from .._planner import DirectPlanner, RateLimit
from .._range_reader import KafkaRangeReader
from .._reader_choice import DEFAULT_READER, check_reader
from .._source import KafkaSource, kafka_ranges
from .._spark_conf import (
    FAIL_ON_DATA_LOSS,
    NETWORK_TIMEOUT,
    POLL_MS,
    READER_KEY,
    TASKS_PACK,
    TASKS_SPLIT_SIZE,
    TASKS_TARGET_COUNT,
    TASKS_TARGET_SIZE,
)
from .._strategies import Assign, ConsumerStrategy, Subscribe, check_topics
from ._rdd import KafkaRDD, make_kafka_rdd

__all__ = ["DirectBatches", "ReadOptions", "build_direct_batches", "check_decoders"]

Handler = Optional[Callable[[KafkaMessageAndMetadata], Any]]


class ReadOptions:
    """Executor read settings resolved from SparkConf and keyword arguments.

    ``reader``: the executor reader (``spark.streaming.kafka.reader``: ``kafka-python``, the default,
    or ``confluent-kafka``), checked against ``config`` (the parsed kafkaParams) here on the driver.
    ``tasks`` and ``pack``: the task planner's options (``spark.streaming.kafka.tasks.*``); ``pack``
    is ``None`` when unset (each stream kind has its own default, see :meth:`task_options`).
    """

    tasks: TaskOptions = TaskOptions()
    pack: Optional[bool] = None

    def __init__(self, conf: Any, *, poll_timeout_ms: Optional[int] = None,
                 fail_on_data_loss: Optional[bool] = None, config: Optional[KafkaConfig] = None) -> None:
        if poll_timeout_ms is None:
            poll_timeout_ms = POLL_MS.read(conf)
            if poll_timeout_ms is None:
                poll_timeout_ms = 1000 * max(1, int(NETWORK_TIMEOUT.read(conf)))
        if not is_int(poll_timeout_ms) or poll_timeout_ms <= 0:
            raise ConfigurationError(f"poll timeout must be a positive int of ms, got {poll_timeout_ms!r}")
        if fail_on_data_loss is None:
            fail_on_data_loss = FAIL_ON_DATA_LOSS.read(conf)
        if not isinstance(fail_on_data_loss, bool):
            raise ConfigurationError(f"failOnDataLoss must be a bool, got {fail_on_data_loss!r}")
        self.poll_timeout_ms = poll_timeout_ms
        self.fail_on_data_loss = fail_on_data_loss
        self.rate = RateLimit.from_spark_conf(conf)
        raw_reader = conf.get(READER_KEY, None) if conf is not None else None
        self.reader = DEFAULT_READER if raw_reader is None else raw_reader
        if config is not None:
            self.reader = check_reader(self.reader, config)
        self.pack = TASKS_PACK.read(conf)
        self.tasks = TaskOptions(TASKS_TARGET_COUNT.read(conf), TASKS_TARGET_SIZE.read(conf),
                                 TASKS_SPLIT_SIZE.read(conf))

    def task_options(self, pack_by_default: bool) -> Optional[TaskOptions]:
        """The planner's options when tasks are planned (``spark.streaming.kafka.tasks.pack``, else
        ``pack_by_default``), ``None`` for one task per range."""
        pack = self.pack if self.pack is not None else pack_by_default
        return self.tasks if pack else None


def check_decoders(key_decoder: Any, value_decoder: Any, handler: Any) -> None:
    for name, f in (("keyDecoder", key_decoder), ("valueDecoder", value_decoder)):
        if not callable(f):
            raise ConfigurationError(f"{name} must be callable, got {f!r}")
    if handler is not None and not callable(handler):
        raise ConfigurationError(f"messageHandler must be callable or None, got {handler!r}")


def build_direct_batches(ssc: StreamingContext, topics: Any, kafkaParams: Mapping[str, Any],  # noqa: N803
                    fromOffsets: Optional[Mapping[TopicAndPartition, int]], keyDecoder: Decoder,  # noqa: N803
                    valueDecoder: Decoder, messageHandler: Handler,  # noqa: N803
                    strategy: Optional[ConsumerStrategy], failOnDataLoss: Optional[bool],  # noqa: N803
                    poll_timeout_ms: Optional[int], discovery_interval_s: float) -> DirectBatches:
    """Validate everything a direct stream needs and build its (not yet started) batch builder."""
    if not isinstance(ssc, StreamingContext):
        raise ConfigurationError(f"ssc must be a StreamingContext, got {type(ssc).__name__}")
    config = parse_kafka_params(kafkaParams)
    check_decoders(keyDecoder, valueDecoder, messageHandler)
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
    opts = ReadOptions(ssc.sparkContext.getConf(), poll_timeout_ms=poll_timeout_ms, fail_on_data_loss=failOnDataLoss,
                       config=config)
    planner = DirectPlanner(KafkaMetadata(config), strategy, auto_offset_reset=config.auto_offset_reset,
                            fail_on_data_loss=opts.fail_on_data_loss, rate=opts.rate,
                            discovery_interval_s=discovery_interval_s)
    return DirectBatches(ssc, config, planner, opts, keyDecoder, valueDecoder, messageHandler)


class DirectBatches(DriverOnly, KafkaSource):
    """The Kafka source with its Spark glue: SparkConf read options, backpressure fed by the
    StreamingContext's completed batches, the batch's KafkaRDD, and Spark checkpoint recovery."""

    def __init__(self, ssc: StreamingContext, config: KafkaConfig, planner: DirectPlanner, opts: ReadOptions,
                 key_decoder: Decoder, value_decoder: Decoder, handler: Handler) -> None:
        self._register()
        self.sc = ssc.sparkContext
        self.opts = opts
        seconds = batch_seconds(ssc)
        #: ``spark.streaming.backpressure.enabled``: the rate estimator fed by completed batches
        self.backpressure = rate_controller_from_conf(self.sc.getConf(), int(round(seconds * 1000)))
        KafkaSource.__init__(self, config, planner, batch_seconds=seconds, poll_timeout_ms=opts.poll_timeout_ms,
                             fail_on_data_loss=opts.fail_on_data_loss, reader=opts.reader,
                             decoders={"key_decoder": key_decoder, "value_decoder": value_decoder,
                                       "message_handler": handler},
                             rate_control=self.backpressure)
        if self.backpressure is not None:
            ssc.addStreamingListener(self.backpressure.listener())

    def reader(self) -> KafkaRangeReader:
        """The executor side, recording each task's range for ``current_offset_range()``."""
        return KafkaSource.reader(self).reporting_to(None, remember_current)

    def close(self) -> None:
        if "_recipe" in self.__dict__:
            return  # recovered from a checkpoint and never opened
        KafkaSource.close(self)

    # ---------------------------------------------------------------- Spark checkpoint
    def recovery_recipe(self) -> Dict[str, Any]:
        """Settings and plan state a recovering driver rebuilds this source from (no live client).

        ``current`` is the next offset to plan from per partition: the end of the last planned batch.
        """
        pending = self.__dict__.get("_recipe")
        if pending is not None:
            return dict(pending)
        planner = self.planner
        return {"config": self.config, "strategy": planner.strategy, "opts": self.opts, "decoders": self.decoders,
                "seconds": self.seconds, "auto_offset_reset": planner.auto_offset_reset,
                "discovery_interval_s": planner.discovery_interval_s, "current": dict(planner.current),
                "monitor_group": self.monitor_group}

    def __reduce__(self) -> Any:
        return (_recover_batches, (self._driver_token, self.recovery_recipe()))

    @classmethod
    def from_recipe(cls, token: str, recipe: Mapping[str, Any]) -> DirectBatches:
        """A source rebuilt from :meth:`recovery_recipe`; it connects to Kafka at its first use."""
        self = cls.__new__(cls)
        self._driver_token = token
        self.__dict__["_open_lock"] = threading.RLock()
        self.__dict__["_recipe"] = dict(recipe)
        return self

    def __getattr__(self, name: str) -> Any:
        # Only reached for attributes not set yet: a source rebuilt from a recipe opens at first use.
        lock = self.__dict__.get("_open_lock")
        if lock is None or name.startswith("__"):
            raise AttributeError(name)
        with lock:
            recipe = self.__dict__.get("_recipe")
            if recipe is not None:
                self._open(recipe)
                del self.__dict__["_recipe"]
        return object.__getattribute__(self, name)

    def _open(self, recipe: Mapping[str, Any]) -> None:
        from pyspark import SparkContext

        sc = SparkContext._active_spark_context
        if sc is None:
            raise ConfigurationError("a direct stream recovered from a Spark checkpoint needs the SparkContext "
                                     "StreamingContext.getOrCreate starts; none is active")
        config: KafkaConfig = recipe["config"]
        opts: ReadOptions = recipe["opts"]
        planner = DirectPlanner(KafkaMetadata(config), recipe["strategy"],
                                auto_offset_reset=recipe["auto_offset_reset"],
                                fail_on_data_loss=opts.fail_on_data_loss, rate=opts.rate,
                                discovery_interval_s=recipe["discovery_interval_s"])
        planner.current = dict(recipe["current"])
        self.sc = sc
        self.opts = opts
        self.backpressure = rate_controller_from_conf(sc.getConf(), int(round(recipe["seconds"] * 1000)))
        KafkaSource.__init__(self, config, planner, batch_seconds=recipe["seconds"],
                             poll_timeout_ms=opts.poll_timeout_ms, fail_on_data_loss=opts.fail_on_data_loss,
                             reader=opts.reader, decoders=recipe["decoders"], rate_control=self.backpressure,
                             monitor_group=recipe["monitor_group"])

    def attach(self, ssc: StreamingContext) -> None:
        """Feed the recovered context's completed batches to the rate estimator (backpressure)."""
        if self.backpressure is not None:
            ssc.addStreamingListener(self.backpressure.listener())

    # ---------------------------------------------------------------- Spark side
    def rdd(self, ranges: Sequence[SourceRange], shape: Optional[TaskOptions] = None) -> KafkaRDD:
        """The batch's KafkaRDD: tasks shaped by ``shape`` (an exactly-once stream's output patterns),
        else as the direct stream's options say (one task per range unless
        ``spark.streaming.kafka.tasks.pack=true``)."""
        reporter = None if self.fail_on_data_loss else LossReporter(loss_accumulator(self.sc))
        tasks = shape if shape is not None else self.opts.task_options(pack_by_default=False)
        return make_kafka_rdd(self.sc, self.config, kafka_ranges(ranges, "the Kafka stream's batch"),
                              poll_timeout_ms=self.poll_timeout_ms, fail_on_data_loss=self.fail_on_data_loss,
                              reader=self.reader_name, reporter=reporter, tasks=tasks, **self.decoders)

    def exactly_once_tasks(self) -> Optional[TaskOptions]:
        """The task options of an exactly-once stream over this source (planned unless
        ``spark.streaming.kafka.tasks.pack=false``), ``None`` for one task per range."""
        return self.opts.task_options(pack_by_default=True)

    def __call__(self, time: datetime) -> KafkaRDD:
        return self.rdd(self.plan(time))


def _recover_batches(token: str, recipe: Dict[str, Any]) -> DirectBatches:
    """Unpickling target of :class:`DirectBatches`: one source per token and recovery."""
    return recovered(token, lambda: DirectBatches.from_recipe(token, recipe))  # type: ignore[no-any-return]
