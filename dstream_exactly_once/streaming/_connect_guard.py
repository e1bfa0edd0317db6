"""Spark Connect objects at the DStream entry points: one clear error naming what runs there instead.

A Spark Connect session has no SparkContext (``spark.sparkContext`` raises
``JVM_ATTRIBUTE_NOT_SUPPORTED``), so no StreamingContext and no DStream can exist under it. An entry
point handed a Connect session or DataFrame where it needs a StreamingContext, a SparkContext or a
DStream raises :class:`~dstream_exactly_once.errors.SparkConnectUnsupportedError` before anything
else is checked or opened, naming the Structured Streaming form of the same job
(:mod:`dstream_exactly_once.structured`, which runs under Spark Connect).
"""

from __future__ import annotations

from ..errors import SparkConnectUnsupportedError

__all__ = ["INSTEAD_FILES", "INSTEAD_KAFKA", "INSTEAD_KAFKA_RDD", "INSTEAD_OUTPUT", "INSTEAD_TERMINATION",
           "is_spark_connect", "refuse_spark_connect"]

_SINKS = ('.writeStream.format("deo-store") (or "deo-kafka", "deo-doris") after '
          "dstream_exactly_once.structured.register(spark)")
#: What each family of entry points does under Spark Connect instead.
INSTEAD_KAFKA = ('read Kafka with Structured Streaming, spark.readStream.format("kafka") (Spark\'s Kafka source, '
                 f"its jars on the Connect server), and write exactly once with {_SINKS}")
INSTEAD_KAFKA_RDD = ('read the offset ranges with spark.read.format("kafka") and the options startingOffsets / '
                     "endingOffsets (Spark's Kafka source, its jars on the Connect server)")
INSTEAD_FILES = ('read the files with Structured Streaming, spark.readStream.format("aof") (the same options), '
                 f"and write exactly once with {_SINKS}")
INSTEAD_OUTPUT = f"write a streaming DataFrame exactly once with {_SINKS}"
INSTEAD_TERMINATION = "wait for a Structured Streaming query with query.awaitTermination()"


def is_spark_connect(value: object) -> bool:
    """Whether ``value`` is an object of the Spark Connect client (a ``SparkSession``, ``DataFrame``,
    ``StreamingQuery``, … of ``pyspark.sql.connect``). Decided by its class's module: nothing of the
    Connect client (which needs grpcio) is imported."""
    return any((cls.__module__ or "").startswith("pyspark.sql.connect.") for cls in type(value).__mro__)


def refuse_spark_connect(value: object, what: str, instead: str) -> None:
    """Raise :class:`SparkConnectUnsupportedError` when ``value`` (the argument ``what`` names, e.g.
    ``"KafkaUtils.createDirectStream(ssc=...)"``) is a Spark Connect object; ``instead`` says what to
    do under Spark Connect."""
    if is_spark_connect(value):
        raise SparkConnectUnsupportedError(
            f"{what} got a Spark Connect {type(value).__name__}: DStreams need a SparkContext (a "
            f"StreamingContext is built on one), which a Spark Connect session does not have. Under Spark "
            f"Connect, {instead} (help(dstream_exactly_once.structured))")
