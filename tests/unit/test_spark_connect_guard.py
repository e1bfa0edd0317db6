"""The DStream entry points refuse Spark Connect objects with one typed error naming the Structured
Streaming form, before any store is opened (the same with a live Connect session:
tests/integration/test_spark_connect.py)."""

from __future__ import annotations

import pytest

from dstream_exactly_once import (
    ConfigurationError,
    FileUtils,
    KafkaUtils,
    OffsetRange,
    SparkConnectUnsupportedError,
    await_termination,
    exactly_once,
)
from dstream_exactly_once.streaming._connect_guard import is_spark_connect

# PySpark 4's Spark Connect client (its "connect" extra: grpcio, …); the 3.5 suite deselects these
pytestmark = pytest.mark.pyspark4

PARAMS = {"bootstrap.servers": "127.0.0.1:9"}


def _connect(kind: str) -> object:
    """A real Spark Connect SparkSession or DataFrame object that never connected (no server here)."""
    from pyspark.sql.connect.dataframe import DataFrame
    from pyspark.sql.connect.session import SparkSession

    return object.__new__(SparkSession if kind == "session" else DataFrame)


def test_connect_objects_are_recognised_by_their_class_and_others_are_not():
    assert is_spark_connect(_connect("session")) and is_spark_connect(_connect("frame"))
    assert not is_spark_connect(object()) and not is_spark_connect("sc://localhost")


CALLS = {
    "createDirectStream": (lambda s, db: KafkaUtils.createDirectStream(s, ["t"], PARAMS),
                           ['format("kafka")']),
    "createExactlyOnceStream": (lambda s, db: KafkaUtils.createExactlyOnceStream(s, PARAMS, ["t"], store=db,
                                                                                app_id="a"),
                                ['format("kafka")', 'format("deo-store")', "structured.register(spark)"]),
    "createRDD": (lambda s, db: KafkaUtils.createRDD(s, PARAMS, [OffsetRange("t", 0, 0, 1)]),
                  ['spark.read.format("kafka")', "endingOffsets"]),
    "createStream": (lambda s, db: KafkaUtils.createStream(s, "zk:2181", "g", {"t": 1}, PARAMS),
                     ['format("kafka")']),
    "createDirectFileStream": (lambda s, db: FileUtils.createDirectFileStream(s, "/var/log/app.log*"),
                               ['format("aof")']),
    "createExactlyOnceFileStream": (lambda s, db: FileUtils.createExactlyOnceFileStream(
        s, "/var/log/app.log*", store=db, app_id="a"), ['format("aof")', 'format("deo-store")']),
    "await_termination": (lambda s, db: await_termination(s), ["query.awaitTermination()"]),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_every_dstream_entry_point_names_the_structured_streaming_form(name, tmp_path):
    call, names = CALLS[name]
    with pytest.raises(SparkConnectUnsupportedError) as err:
        call(_connect("session"), f"sqlite:///{tmp_path}/s.db")
    message = str(err.value)
    assert f"{name}(s" in message and "got a Spark Connect SparkSession" in message
    assert "need a SparkContext" in message and "help(dstream_exactly_once.structured)" in message
    for part in names:
        assert part in message, (part, message)
    assert isinstance(err.value, ConfigurationError)
    assert list(tmp_path.iterdir()) == []  # refused before any store was opened


def test_exactly_once_given_a_connect_dataframe_names_the_store_sink(tmp_path):
    with pytest.raises(SparkConnectUnsupportedError, match=r'Spark Connect DataFrame.*format\("deo-store"\)'):
        exactly_once(_connect("frame"), f"sqlite:///{tmp_path}/s.db", "a")  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []
