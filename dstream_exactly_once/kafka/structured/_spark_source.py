"""PySpark's Python Data Source classes of the ``deo-kafka`` format: the source (reading) added to the
sink (writing), one format both ways. The Spark-free logic is in
:mod:`~dstream_exactly_once.kafka.structured._source` (and :mod:`._sink` for writing)."""

from __future__ import annotations

from typing import Any, Dict, Iterator, Optional, Sequence

try:
    from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
except ImportError:  # PySpark 3.5 and older: said by name
    from ...structured._requires import require_data_source_api

    require_data_source_api("the deo-kafka Structured Streaming source")
    raise
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from ...errors import ConfigurationError
from .._offsets import OffsetRange
from ._source import KafkaSourcePlanner, read_task
from ._source_options import KafkaSourceOptions, parse_kafka_source_options
from ._spark_sink import KafkaSinkDataSource

try:  # PySpark 4.2+: admission control and Trigger.AvailableNow
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows, SupportsTriggerAvailableNow
except ImportError:  # pragma: no cover - PySpark 4.0/4.1
    ReadAllAvailable = ReadMaxRows = ReadMinRows = None  # type: ignore[assignment,misc]
    SupportsTriggerAvailableNow = object  # type: ignore[assignment,misc]

__all__ = ["KafkaDataSource", "KafkaSourceReader", "KafkaTaskPartition", "kafka_data_source", "kafka_schema"]


def kafka_data_source(spark: Any) -> type:
    """The ``deo-kafka`` data source class for the session ``spark``: it carries the session's default
    parallelism (the default ``tasks.target.count``) when Spark pickles it to its Python workers."""
    parallelism: Optional[int] = None
    try:
        parallelism = int(spark.sparkContext.defaultParallelism)
    except Exception:  # noqa: BLE001 - no SparkContext (Spark Connect): the conf, if set
        try:
            value = spark.conf.get("spark.default.parallelism", None)
            parallelism = int(value) if value else None
        except Exception:  # noqa: BLE001 - not set or not a number: one task per range
            parallelism = None
    return type("KafkaDataSource", (KafkaDataSource,), {"default_parallelism": parallelism, "__module__": __name__})


def kafka_schema(include_headers: bool) -> StructType:
    """Spark's Kafka source schema (``headers`` with ``includeHeaders``)."""
    fields = [StructField("key", BinaryType()), StructField("value", BinaryType()), StructField("topic", StringType()),
              StructField("partition", IntegerType()), StructField("offset", LongType()),
              StructField("timestamp", TimestampType()), StructField("timestampType", IntegerType())]
    if include_headers:
        fields.append(StructField("headers", ArrayType(StructType([StructField("key", StringType()),
                                                                   StructField("value", BinaryType())]))))
    return StructType(fields)


class KafkaTaskPartition(InputPartition):
    """One Spark task of a ``deo-kafka`` micro-batch: the pieces of offset ranges one consumer reads."""

    def __init__(self, value: Any) -> None:
        super().__init__(value)


class KafkaDataSource(KafkaSinkDataSource):
    """``readStream.format("deo-kafka")`` (see :mod:`~dstream_exactly_once.structured.kafka_source`) and
    ``writeStream.format("deo-kafka")`` (see :mod:`~dstream_exactly_once.structured.kafka_sink`)."""

    #: the session's default parallelism captured by :func:`kafka_data_source` (``None``: unknown)
    default_parallelism: Optional[int] = None

    def _source_options(self) -> KafkaSourceOptions:
        return parse_kafka_source_options(dict(self.options))

    def schema(self) -> StructType:
        return kafka_schema(self._source_options().include_headers)

    def streamReader(self, schema: StructType) -> KafkaSourceReader:  # noqa: N802 - Spark's name
        opts = self._source_options()
        expected = kafka_schema(opts.include_headers)
        if schema != expected:
            raise ConfigurationError(f"the deo-kafka source has a fixed schema (Spark's Kafka source's): "
                                     f"{expected.simpleString()}; got {schema.simpleString()} (drop .schema(...))")
        return KafkaSourceReader(opts, self.default_parallelism)


def _task_attempt(r: OffsetRange) -> int:
    """The attempt number of the running Spark task (0 outside one)."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return 0 if ctx is None else ctx.attemptNumber()


class KafkaSourceReader(DataSourceStreamReader, SupportsTriggerAvailableNow):  # type: ignore[misc,valid-type]
    """Plans micro-batches of offset ranges on the driver; each task reads its packed ranges into Arrow
    record batches on an executor."""

    def __init__(self, opts: KafkaSourceOptions, parallelism: Optional[int]) -> None:
        self.opts = opts
        # without a known parallelism every range is a task of its own (Spark's Kafka source's layout)
        self.planner = KafkaSourcePlanner(opts, parallelism=parallelism or 1 << 30)

    def initialOffset(self) -> Dict[str, Any]:  # noqa: N802 - Spark's name
        return self.planner.initial_offset()

    def getDefaultReadLimit(self) -> Any:  # noqa: N802 - Spark's name
        if self.opts.max_offsets_per_trigger is not None and ReadMaxRows is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        if self.opts.min_offsets_per_trigger is not None and ReadMinRows is not None:
            return ReadMinRows(self.opts.min_offsets_per_trigger)
        return super().getDefaultReadLimit()

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802 - Spark's name
        self.planner.prepare_available_now()

    def latestOffset(self, start: Optional[Dict[str, Any]] = None, limit: Any = None) -> Dict[str, Any]:  # noqa: N802
        if start is None:  # PySpark 4.0/4.1 call it without arguments
            start = self.planner._doc if self.planner._doc is not None else self.initialOffset()
        if ReadAllAvailable is not None and isinstance(limit, ReadAllAvailable):
            return self.planner.latest_offset(start)
        max_offsets = limit.max_rows if ReadMaxRows is not None and isinstance(limit, ReadMaxRows) \
            else self.opts.max_offsets_per_trigger
        return self.planner.latest_offset(start, max_offsets, self.opts.min_offsets_per_trigger)

    def reportLatestOffset(self) -> Optional[Dict[str, Any]]:  # noqa: N802 - Spark's name
        return self.planner.latest_known()

    def partitions(self, start: Dict[str, Any], end: Dict[str, Any]) -> Sequence[InputPartition]:
        return [KafkaTaskPartition(task) for task in self.planner.tasks(start, end)]

    def commit(self, end: Dict[str, Any]) -> None:
        """Nothing to do: the checkpoint's offset and commit logs are the source's positions."""

    def stop(self) -> None:
        self.planner.close()

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return read_task(self.opts, partition.value, _task_attempt)
