"""dstream-exactly-once: WAL-free direct Kafka DStreams for PySpark 3.5/4.x, exactly-once output.

Port a Spark 2.4 app by changing one import::

    from dstream_exactly_once import KafkaUtils, OffsetRange, TopicAndPartition
"""

from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

from . import _moved  # noqa: F401 - first: modules' earlier paths (in Spark checkpoints) import as their new homes
from ._version import __version__
from .admin import SkipPlan, skip_batch
from .core._retry import RetryPolicy
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
from .files import _ranges as _file_ranges  # noqa: F401 - registers the range kind "file"
from .kafka._commit_queue import CanCommitOffsets
from .kafka._offsets import (
    Broker,
    HasOffsetRanges,
    KafkaMessageAndMetadata,
    OffsetRange,
    TopicAndPartition,
    utf8_decoder,
)
from .kafka._spark_strategy_names import ConsumerStrategies, LocationStrategies
from .kafka._strategies import Assign, Subscribe, SubscribePattern
from .stores import CommitOutcome, PlannedBatch, TransactionalStore, Writes, open_store

# The Spark-facing names import pyspark, which is optional for the stores, the value types and the
# CLI: they load on first use (``from dstream_exactly_once import KafkaUtils`` works as before).
_SPARK_NAMES = {
    "BatchIdSink": "streaming._exactly_once",
    "ExactlyOnceDStream": "streaming._exactly_once",
    "exactly_once": "kafka.spark._convert",
    "FileUtils": "files.spark._utils",
    "stop_gracefully_on_signals": "streaming._lifecycle",
    "KafkaDStream": "streaming._dstream",
    "KafkaRDD": "kafka.spark._rdd",
    "KafkaUtils": "kafka.spark._utils",
    "await_termination": "streaming._termination",
    "current_offset_range": "streaming._task_context",
    "current_pieces": "streaming._task_context",
    "current_ranges": "streaming._task_context",
}

if _TYPE_CHECKING:
    from .files.spark._utils import FileUtils
    from .kafka.spark._convert import exactly_once
    from .kafka.spark._rdd import KafkaRDD
    from .kafka.spark._utils import KafkaUtils
    from .streaming._dstream import KafkaDStream
    from .streaming._exactly_once import BatchIdSink, ExactlyOnceDStream
    from .streaming._lifecycle import stop_gracefully_on_signals
    from .streaming._task_context import current_offset_range, current_pieces, current_ranges
    from .streaming._termination import await_termination


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
