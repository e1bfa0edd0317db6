"""dstream-exactly-once: WAL-free direct Kafka DStreams for PySpark 3.5/4.x, exactly-once output.

Port a Spark 2.4 app by changing one import::

    from dstream_exactly_once import KafkaUtils, OffsetRange, TopicAndPartition
"""

from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

from ._version import __version__
from .admin import SkipPlan, skip_batch
from .core.retry import RetryPolicy
from .errors import (
    ConfigurationError,
    DataLossError,
    DecodeError,
    DriverLiveError,
    DStreamExactlyOnceError,
    FencedError,
    KafkaAuthError,
    KafkaClosedError,
    KafkaReadStalledError,
    KafkaRejectedError,
    KafkaUnavailableError,
    LoadRejectedError,
    OffsetConflictError,
    OffsetRangeError,
    OutputError,
    RowRejectedError,
    ServiceError,
    SinkError,
    SparkConnectUnsupportedError,
    StoreAuthError,
    StoreBusyError,
    StoreError,
    StoreUnavailableError,
    StoreVersionError,
    TableConflictError,
    UnknownKafkaParamError,
)
from .files import ranges as _file_ranges  # noqa: F401 - registers the range kind "file"
from .kafka.commit_queue import CanCommitOffsets
from .kafka.offsets import (
    Broker,
    HasOffsetRanges,
    KafkaMessageAndMetadata,
    OffsetRange,
    TopicAndPartition,
    utf8_decoder,
)
from .kafka.spark_strategy_names import ConsumerStrategies, LocationStrategies
from .kafka.strategies import Assign, Subscribe, SubscribePattern
from .stores import CommitOutcome, PlannedBatch, TransactionalStore, Writes, open_store

# The Spark-facing names import pyspark, which is optional for the stores, the value types and the
# CLI: they load on first use (``from dstream_exactly_once import KafkaUtils`` works as before).
_SPARK_NAMES = {
    "BatchIdSink": "streaming.exactly_once",
    "ExactlyOnceDStream": "streaming.exactly_once",
    "exactly_once": "kafka.spark.convert",
    "FileUtils": "files.spark.utils",
    "stop_gracefully_on_signals": "streaming.lifecycle",
    "KafkaDStream": "streaming.dstream",
    "KafkaRDD": "kafka.spark.rdd",
    "KafkaUtils": "kafka.spark.utils",
    "await_termination": "streaming.termination",
    "current_offset_range": "streaming.task_context",
    "current_pieces": "streaming.task_context",
    "current_ranges": "streaming.task_context",
}

if _TYPE_CHECKING:
    from .files.spark.utils import FileUtils
    from .kafka.spark.convert import exactly_once
    from .kafka.spark.rdd import KafkaRDD
    from .kafka.spark.utils import KafkaUtils
    from .streaming.dstream import KafkaDStream
    from .streaming.exactly_once import BatchIdSink, ExactlyOnceDStream
    from .streaming.lifecycle import stop_gracefully_on_signals
    from .streaming.task_context import current_offset_range, current_pieces, current_ranges
    from .streaming.termination import await_termination


def __getattr__(name: str) -> _Any:
    module = _SPARK_NAMES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    try:
        imported = import_module(f"{__name__}.{module}")
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] != "pyspark":
            raise
        raise ModuleNotFoundError(f"{name} needs PySpark, which is not installed: "
                                  "pip install 'dstream-exactly-once[spark]'", name=exc.name) from exc
    value = getattr(imported, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_SPARK_NAMES))


__all__ = [
    "Assign",
    "BatchIdSink",
    "Broker",
    "CanCommitOffsets",
    "CommitOutcome",
    "ConfigurationError",
    "ConsumerStrategies",
    "DStreamExactlyOnceError",
    "DataLossError",
    "DecodeError",
    "DriverLiveError",
    "ExactlyOnceDStream",
    "FencedError",
    "FileUtils",
    "HasOffsetRanges",
    "KafkaAuthError",
    "KafkaClosedError",
    "KafkaDStream",
    "KafkaMessageAndMetadata",
    "KafkaRDD",
    "KafkaReadStalledError",
    "KafkaRejectedError",
    "KafkaUnavailableError",
    "KafkaUtils",
    "LoadRejectedError",
    "LocationStrategies",
    "OffsetConflictError",
    "OffsetRange",
    "OffsetRangeError",
    "OutputError",
    "PlannedBatch",
    "RetryPolicy",
    "RowRejectedError",
    "ServiceError",
    "SinkError",
    "SkipPlan",
    "SparkConnectUnsupportedError",
    "StoreAuthError",
    "StoreBusyError",
    "StoreError",
    "StoreUnavailableError",
    "StoreVersionError",
    "Subscribe",
    "SubscribePattern",
    "TableConflictError",
    "TopicAndPartition",
    "TransactionalStore",
    "UnknownKafkaParamError",
    "Writes",
    "__version__",
    "await_termination",
    "current_offset_range",
    "current_pieces",
    "current_ranges",
    "exactly_once",
    "open_store",
    "skip_batch",
    "stop_gracefully_on_signals",
    "utf8_decoder",
]
