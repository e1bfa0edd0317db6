"""Lock the public surface (httpx's ``test_exported_members`` style).

Adding or removing a public name is an API change: update ``EXPECTED`` in the same commit.
"""

from __future__ import annotations

import types

import dstream_exactly_once

EXPECTED = [
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

# The Spark 2.4 ``pyspark.streaming.kafka.__all__``: a ported app's imports must keep working.
SPARK_24_NAMES = ["Broker", "KafkaMessageAndMetadata", "KafkaUtils", "OffsetRange", "TopicAndPartition",
                  "utf8_decoder"]


def test_all_is_exactly_the_locked_sorted_list():
    assert dstream_exactly_once.__all__ == EXPECTED
    assert EXPECTED == sorted(EXPECTED)


def test_every_exported_name_is_importable():
    namespace: dict = {}
    exec("from dstream_exactly_once import *", namespace)  # noqa: S102 - the star import users write
    for name in EXPECTED:
        assert getattr(dstream_exactly_once, name) is not None, name
        if not name.startswith("_"):
            assert name in namespace, name


def test_every_public_attribute_is_exported():
    public = {name for name in dir(dstream_exactly_once)
              if not name.startswith("_") and not isinstance(getattr(dstream_exactly_once, name), types.ModuleType)}
    assert public == {name for name in EXPECTED if not name.startswith("_")}


def test_spark_24_names_are_exported():
    assert set(SPARK_24_NAMES) <= set(EXPECTED)


def test_exported_errors_share_one_root():
    for name in EXPECTED:
        value = getattr(dstream_exactly_once, name)
        if isinstance(value, type) and issubclass(value, Exception):
            assert issubclass(value, dstream_exactly_once.DStreamExactlyOnceError), name


def test_version_is_a_string():
    assert isinstance(dstream_exactly_once.__version__, str) and dstream_exactly_once.__version__
