"""dstream-exactly-once: WAL-free direct Kafka DStreams for PySpark 3.5/4.x, exactly-once output.

Port a Spark 2.4 app by changing one import::

    from dstream_exactly_once import KafkaUtils, OffsetRange, TopicAndPartition
"""

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
from .kafka.reader import current_offset_range
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
from .streaming.exactly_once import BatchIdSink, ExactlyOnceDStream, exactly_once
from .streaming.kafka_utils import KafkaUtils

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
