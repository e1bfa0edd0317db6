"""dstream-exactly-once: WAL-free direct Kafka DStreams for PySpark 3.5/4.x, exactly-once output.

Port a Spark 2.4 app by changing one import::

    from dstream_exactly_once import KafkaUtils, OffsetRange, TopicAndPartition
"""

from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

from ._version import __version__
from .errors import (
    ConfigurationError,
    DataLossError,
    DecodeError,
    DStreamExactlyOnceError,
    FencedError,
    KafkaAuthError,
    KafkaUnavailableError,
    OffsetConflictError,
    OffsetRangeError,
    OutputError,
    SinkError,
    StoreError,
)
from .files import ranges as _file_ranges  # noqa: F401 - registers the range kind "file"
from .kafka.strategies import Assign, Subscribe, SubscribePattern
from .offsets import (
    Broker,
    HasOffsetRanges,
    KafkaMessageAndMetadata,
    OffsetRange,
    TopicAndPartition,
    utf8_decoder,
)
from .stores import CommitOutcome, PlannedBatch, TransactionalStore, Writes, open_store

# The Spark-facing names import pyspark, which is optional for the stores, the value types and the
# CLI: they load on first use (``from dstream_exactly_once import KafkaUtils`` works as before).
_SPARK_NAMES = {
    "BatchIdSink": "streaming.exactly_once",
    "ExactlyOnceDStream": "streaming.exactly_once",
    "exactly_once": "streaming.exactly_once",
    "FileUtils": "streaming.file_utils",
    "KafkaUtils": "streaming.kafka_utils",
    "current_offset_range": "streaming.task_context",
}

if _TYPE_CHECKING:
    from .streaming.exactly_once import BatchIdSink, ExactlyOnceDStream, exactly_once
    from .streaming.file_utils import FileUtils
    from .streaming.kafka_utils import KafkaUtils
    from .streaming.task_context import current_offset_range


def __getattr__(name: str) -> _Any:
    module = _SPARK_NAMES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_SPARK_NAMES))


__all__ = [
    "Assign",
    "BatchIdSink",
    "Broker",
    "CommitOutcome",
    "ConfigurationError",
    "DStreamExactlyOnceError",
    "DataLossError",
    "DecodeError",
    "ExactlyOnceDStream",
    "FencedError",
    "FileUtils",
    "HasOffsetRanges",
    "KafkaAuthError",
    "KafkaMessageAndMetadata",
    "KafkaUnavailableError",
    "KafkaUtils",
    "OffsetConflictError",
    "OffsetRange",
    "OffsetRangeError",
    "OutputError",
    "PlannedBatch",
    "SinkError",
    "StoreError",
    "Subscribe",
    "SubscribePattern",
    "TopicAndPartition",
    "TransactionalStore",
    "Writes",
    "__version__",
    "current_offset_range",
    "exactly_once",
    "open_store",
    "utf8_decoder",
]
