"""Real Spark queries into the exactly-once sinks: a new checkpoint is refused whatever the number of
committed batches (one included), and each output mode is accepted only where the sink applies it."""

from __future__ import annotations

import os

import pytest
from pyspark.sql import SparkSession

from dstream_exactly_once.stores import open_store
from dstream_exactly_once.structured import register, store_sink_options

pytestmark = pytest.mark.integration

#: Spark gives a Python source's worker 10 s to connect back; a loaded machine may miss it.
WORKER_TIMEOUT = "Python worker failed to connect back"


@pytest.fixture(scope="module")
def spark(sc):
    session = SparkSession(sc)
    register(session)
    return session


def _lines(path, numbers):
    with open(path, "a", encoding="utf-8") as f:
        f.write("".join(f"{n}\n" for n in numbers))


def _run(writer_of, checkpoint):
    """Run the query ``writer_of(checkpoint)`` builds to its end (Trigger.AvailableNow); its error or None."""
    for _ in range(6):
        query = writer_of(checkpoint).trigger(availableNow=True).start()
        try:
            query.awaitTermination(240)
        except Exception as exc:  # noqa: BLE001 - returned to the test
            if WORKER_TIMEOUT in str(exc):
                continue
            return str(exc)
        return None if query.exception() is None else str(query.exception())
    raise AssertionError(f"the query did not start 6 times ({WORKER_TIMEOUT})")


def _seen_query(spark, path, url, app, **options):
    rows = (spark.readStream.format("aof").option("path", path).load()
            .selectExpr("'seen' AS namespace", "value AS key", "'incr' AS op", "CAST(1 AS BIGINT) AS value"))

    def writer(checkpoint):
        return (rows.writeStream.format("deo-store").options(**store_sink_options(url, app, **options))
                .option("checkpointLocation", str(checkpoint)))
    return writer


def _seen(url, app):
    with open_store(url, app) as s:
        return s.get_values("seen")


def test_new_checkpoint_with_one_committed_batch_is_refused(spark, tmp_path):
    """One committed batch: the new checkpoint's batch 0 was taken for a replay of it and its input
    silently dropped; now the query fails and the store is as it was."""
    path, url, app = str(tmp_path / "in.log"), f"sqlite:///{tmp_path}/s.db", "one-batch"
    _lines(path, range(6))
    assert _run(_seen_query(spark, path, url, app), tmp_path / "cp1") is None
    assert _seen(url, app) == {str(i): 1 for i in range(6)}
    with open(url[len("sqlite:///"):], "rb") as f:
        before = f.read()
    error = _run(_seen_query(spark, path, url, app), tmp_path / "cp2")  # a new checkpoint, same application
    assert error is not None and "OffsetConflictError" in error and "a new checkpoint" in error, error
    assert "new_checkpoint=continue" in error
    with open(url[len("sqlite:///"):], "rb") as f:
        assert f.read() == before  # nothing written, no epoch taken


def test_new_checkpoint_continues_the_application_with_the_option(spark, tmp_path):
    path, url, app = str(tmp_path / "in.log"), f"sqlite:///{tmp_path}/s.db", "continued"
    _lines(path, range(3))
    assert _run(_seen_query(spark, path, url, app), tmp_path / "cp1") is None
    _lines(path, range(3, 5))
    assert _run(_seen_query(spark, path, url, app), tmp_path / "cp1") is None  # restarted: batch 1
    assert _run(_seen_query(spark, path, url, app, new_checkpoint="continue"), tmp_path / "cp2") is None
    # the new checkpoint read the file from its start (the aof source's own choice), after the store's batches
    assert _seen(url, app) == {str(i): 2 for i in range(5)}
    with open_store(url, app) as s:
        assert s.last_committed_batch_id() == 2


def _counts(spark, path, op):
    lines = spark.readStream.format("aof").option("path", path).load()
    return (lines.groupBy("value").count()
            .selectExpr("'counts' AS namespace", "value AS key", f"'{op}' AS op", "count AS value"))


def test_complete_mode_applies_put_and_refuses_incr(spark, tmp_path):
    path, url = str(tmp_path / "in.log"), f"sqlite:///{tmp_path}/s.db"
    _lines(path, ["a", "b", "a"])

    def writer(op, app):
        return lambda cp: (_counts(spark, path, op).writeStream.format("deo-store").outputMode("complete")
                           .options(**store_sink_options(url, app)).option("checkpointLocation", str(cp)))
    error = _run(writer("incr", "complete-incr"), tmp_path / "cp-incr")
    assert error is not None and "op 'incr' in output mode 'complete' is refused" in error, error
    assert not os.path.exists(tmp_path / "s.db")  # nothing written: no store, no epoch
    assert _run(writer("put", "complete-put"), tmp_path / "cp-put") is None
    _lines(path, ["b", "c"])
    assert _run(writer("put", "complete-put"), tmp_path / "cp-put") is None  # the whole table again: set
    with open_store(url, "complete-put") as s:
        assert s.get_values("counts") == {"a": 2, "b": 2, "c": 1}


def test_update_mode_is_refused_by_spark_before_anything_is_written(spark, tmp_path):
    path, url = str(tmp_path / "in.log"), f"sqlite:///{tmp_path}/s.db"
    _lines(path, ["a"])
    error = _run(lambda cp: (_counts(spark, path, "put").writeStream.format("deo-store").outputMode("update")
                             .options(**store_sink_options(url, "upd")).option("checkpointLocation", str(cp))),
                 tmp_path / "cp")
    assert error is not None and "does not support Update mode" in error, error
    assert not os.path.exists(tmp_path / "s.db")


@pytest.mark.parametrize("mode", ["complete", "update"])
def test_doris_sink_takes_append_only(spark, tmp_path, mode):
    from dstream_exactly_once.structured import doris_sink_options
    from dstream_exactly_once.testing._doris_double import DorisProtocolDouble

    path, url = str(tmp_path / "in.log"), f"sqlite:///{tmp_path}/s.db"
    _lines(path, ["a", "b"])
    with DorisProtocolDouble() as doris:
        error = _run(lambda cp: (spark.readStream.format("aof").option("path", path).load().groupBy("value").count()
                                 .writeStream.format("deo-doris").outputMode(mode)
                                 .options(**doris_sink_options(url, "dm", doris.fe_url, "db", "t"))
                                 .option("checkpointLocation", str(cp))), tmp_path / "cp")
        assert doris.labels("db") == {}
    expected = "accepts output mode 'append' only, got 'complete'" if mode == "complete" else \
        "does not support Update mode"
    assert error is not None and expected in error, error
    assert not os.path.exists(tmp_path / "s.db")


def _kafka_values(bootstrap, topic):
    from .test_structured_kafka_sink import read_committed

    return sorted(v.decode() for _, v, _ in read_committed(bootstrap, topic))


def test_kafka_sink_new_checkpoint_with_one_batch_and_output_modes(spark, kafka, tmp_path):
    """deo-kafka: a new checkpoint after one committed batch is refused before anything is produced;
    complete mode writes each batch's whole table once; Spark refuses update."""
    import uuid

    from dstream_exactly_once.structured import kafka_sink_options

    path, url = str(tmp_path / "in.log"), f"sqlite:///{tmp_path}/s.db"
    topic = "ssr-" + uuid.uuid4().hex[:8]
    kafka.create_topic(topic, partitions=1)
    _lines(path, ["a", "b"])

    def writer(app, mode="append", counts=False):
        lines = spark.readStream.format("aof").option("path", path).load()
        rows = lines.groupBy("value").count().selectExpr("concat(value, '=', CAST(count AS STRING)) AS value") \
            if counts else lines.select("value")
        return lambda cp: (rows.writeStream.format("deo-kafka").outputMode(mode)
                           .options(**kafka_sink_options(url, app, topic, {"bootstrap.servers": kafka.bootstrap}))
                           .option("checkpointLocation", str(cp)))
    assert _run(writer("k-append"), tmp_path / "cp1") is None
    assert _kafka_values(kafka.bootstrap, topic) == ["a", "b"]
    error = _run(writer("k-append"), tmp_path / "cp2")
    assert error is not None and "OffsetConflictError" in error and "a new checkpoint" in error, error
    assert _kafka_values(kafka.bootstrap, topic) == ["a", "b"]  # nothing produced
    assert _run(writer("k-complete", "complete", True), tmp_path / "cp3") is None
    _lines(path, ["a"])
    assert _run(writer("k-complete", "complete", True), tmp_path / "cp3") is None
    assert _kafka_values(kafka.bootstrap, topic) == ["a", "a=1", "a=2", "b", "b=1", "b=1"]  # one snapshot a batch
    error = _run(writer("k-update", "update", True), tmp_path / "cp4")
    assert error is not None and "does not support Update mode" in error, error
