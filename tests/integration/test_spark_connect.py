"""This library's Structured Streaming forms under a Spark Connect session, against a real local Spark
Connect server (``LocalSparkConnect``): the sources and sinks (``deo-store``, ``deo-kafka``, ``deo-doris``,
``deo-delta``) and a ``foreachBatch`` function fed by the ``deo-kafka`` source run in the server's Python
workers, registered from the client with ``register(spark)``. The store or the output holds every input
exactly once, also after a restart from the checkpoint with more input. DStream entry points given the
Connect session refuse it by name, before any store is opened."""

from __future__ import annotations

import os
from collections import Counter

import pytest

from dstream_exactly_once import KafkaUtils, SparkConnectUnsupportedError
from dstream_exactly_once.stores import open_store
from dstream_exactly_once.structured import doris_sink_options, kafka_sink_options, register, store_sink_options
from dstream_exactly_once.testing._doris_double import DorisProtocolDouble

pytestmark = [pytest.mark.pyspark4, pytest.mark.slow]

#: Spark gives a Python source's worker 10 s to connect back; a loaded machine may miss it.
WORKER_TIMEOUT = "Python worker failed to connect back"


@pytest.fixture(scope="module")
def spark(spark_connect):
    """A Connect session of this module's on the session's server, with this library's formats registered
    (registering sends the classes to the server: once, not per test)."""
    session = spark_connect.session()
    register(session)
    yield session
    session.stop()


def _lines(path, numbers):
    with open(path, "a", encoding="utf-8") as f:
        f.write("".join(f"{n}\n" for n in numbers))


def _run(writer_of, checkpoint, server):
    """Run the query ``writer_of(checkpoint)`` builds to its end (Trigger.AvailableNow); fails the test
    with the query's error and the server's log tail."""
    for _ in range(4):
        query = writer_of(str(checkpoint)).trigger(availableNow=True).start()
        try:
            query.awaitTermination(180)
        except Exception as exc:  # noqa: BLE001 - a worker that missed its start: the same checkpoint again
            if WORKER_TIMEOUT in str(exc):
                continue
            raise AssertionError(f"{exc}\n{server.log_tail()}") from exc
        assert not query.isActive, "the query did not finish within 180 s"
        assert query.exception() is None, f"{query.exception()}\n{server.log_tail()}"
        return
    raise AssertionError(f"the query did not start 4 times ({WORKER_TIMEOUT})")


def _seen_rows(df, value="value"):
    """Each input value becomes one ``incr`` of 1 in namespace ``seen``: a value read twice counts 2."""
    return df.selectExpr("'seen' AS namespace", f"CAST({value} AS STRING) AS key", "'incr' AS op",
                         "CAST(1 AS BIGINT) AS value")


def _seen(url, app):
    with open_store(url, app) as s:
        return s.get_values("seen")


def _exactly(numbers):
    return {str(n): 1 for n in numbers}


def test_a_connect_session_has_no_spark_context_and_dstreams_refuse_it_by_name(spark, tmp_path):
    from pyspark.errors import PySparkAttributeError

    with pytest.raises(PySparkAttributeError, match="JVM_ATTRIBUTE_NOT_SUPPORTED"):
        spark.sparkContext  # noqa: B018 - the attribute access is what raises
    url = f"sqlite:///{tmp_path}/s.db"
    with pytest.raises(SparkConnectUnsupportedError, match=r'Spark Connect SparkSession.*format\("kafka"\)'):
        KafkaUtils.createExactlyOnceStream(spark, {"bootstrap.servers": "127.0.0.1:9"}, ["t"], store=url, app_id="a")
    assert list(tmp_path.iterdir()) == []  # no store file, no schema, no epoch


def test_the_test_server_takes_only_clients_with_its_token(spark, spark_connect):
    from pyspark.sql.connect.session import SparkSession

    token = spark_connect.url.rpartition("token=")[2]
    assert spark.range(3).count() == 3
    for url, why in ((f"sc://localhost:{spark_connect.port}/;token=wrong", "Invalid authentication token"),
                     (f"sc://127.0.0.1:{spark_connect.port}/", "No authentication token provided")):
        stranger = SparkSession.builder.remote(url).create()
        try:
            with pytest.raises(Exception, match=f"UNAUTHENTICATED.*{why}"):
                stranger.range(3).count()
        finally:
            stranger.stop()
    assert token not in spark_connect.log_tail(100000)


def test_aof_into_the_store_sink_across_a_restart(spark, spark_connect, tmp_path, postgres_url):
    """PostgreSQL here; SQLite in the documented query's test below."""
    url, path, app = postgres_url, tmp_path / "in.log", "connect-aof"
    _lines(path, range(1, 301))

    def writer(checkpoint):
        lines = (spark.readStream.format("aof").option("path", str(path)).option("bytes.max", 200)
                 .option("max.bytes.per.trigger", 400).load())
        return (_seen_rows(lines).writeStream.format("deo-store").options(**store_sink_options(url, app))
                .option("checkpointLocation", checkpoint))
    _run(writer, tmp_path / "cp", spark_connect)
    assert _seen(url, app) == _exactly(range(1, 301))
    _lines(path, range(301, 401))
    _run(writer, tmp_path / "cp", spark_connect)  # a restart from the checkpoint: the new lines only
    assert _seen(url, app) == _exactly(range(1, 401))
    with open_store(url, app) as s:
        assert s.last_committed_batch_id() >= 4  # several micro-batches a run (max.bytes.per.trigger)


@pytest.mark.parametrize("source", ["kafka", "deo-kafka"])
def test_kafka_source_into_the_store_sink(spark, spark_connect, kafka, topic_name, tmp_path, source):
    """Spark's Kafka source (its jars on the server) and this package's (no jar), same options."""
    kafka.create_topic(topic_name, 2)
    kafka.produce(topic_name, range(200), partitions=2)
    url, app = f"sqlite:///{tmp_path}/s.db", "connect-kafka"

    def writer(checkpoint):
        records = (spark.readStream.format(source).option("kafka.bootstrap.servers", kafka.bootstrap)
                   .option("subscribe", topic_name).option("startingOffsets", "earliest")
                   .option("maxOffsetsPerTrigger", 60).option("failOnDataLoss", "true").load())
        return (_seen_rows(records, "CAST(value AS STRING)").writeStream.format("deo-store")
                .options(**store_sink_options(url, app)).option("checkpointLocation", checkpoint))
    _run(writer, tmp_path / "cp", spark_connect)
    assert _seen(url, app) == _exactly(range(200))
    with open_store(url, app) as s:
        assert s.last_committed_batch_id() >= 3  # 200 records, at most 60 a micro-batch


def _read_committed(bootstrap, topic, expected):
    """Every value a ``read_committed`` consumer sees in ``topic`` once ``expected`` distinct ones arrived."""
    import time

    from kafka import KafkaConsumer

    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, isolation_level="read_committed",
                             auto_offset_reset="earliest", enable_auto_commit=False, group_id=None)
    values = []
    deadline = time.monotonic() + 60
    try:
        while len(set(values)) < expected and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                values += [r.value.decode() for r in records]
        for records in consumer.poll(timeout_ms=1000).values():  # anything written twice arrives too
            values += [r.value.decode() for r in records]
    finally:
        consumer.close()
    return values


def test_aof_into_the_kafka_sink(spark, spark_connect, kafka, topic_name, tmp_path):
    kafka.create_topic(topic_name, 2)
    path, url, app = tmp_path / "in.log", f"sqlite:///{tmp_path}/s.db", "connect-kafka-sink"
    _lines(path, range(100))

    def writer(checkpoint):
        lines = (spark.readStream.format("aof").option("path", str(path)).option("bytes.max", 100)
                 .option("max.bytes.per.trigger", 150).load())
        return (lines.selectExpr("value AS key", "value").writeStream.format("deo-kafka")
                .options(**kafka_sink_options(url, app, topic_name, {"bootstrap.servers": kafka.bootstrap},
                                              transaction_timeout_ms=20000))
                .option("checkpointLocation", checkpoint))
    _run(writer, tmp_path / "cp", spark_connect)
    values = _read_committed(kafka.bootstrap, topic_name, 100)
    assert Counter(values) == Counter(str(n) for n in range(100))


def test_aof_into_the_doris_sink(spark, spark_connect, tmp_path):
    path, url, app = tmp_path / "in.log", f"sqlite:///{tmp_path}/s.db", "connect-doris"
    _lines(path, range(100))
    with DorisProtocolDouble(password="doris-pw") as doris:
        def writer(checkpoint):
            lines = (spark.readStream.format("aof").option("path", str(path)).option("bytes.max", 100)
                     .option("max.bytes.per.trigger", 150).load())
            return (lines.writeStream.format("deo-doris")
                    .options(**doris_sink_options(url, app, doris.fe_url, "db", "t", password="doris-pw"))
                    .option("checkpointLocation", checkpoint))
        _run(writer, tmp_path / "cp", spark_connect)
        loaded = Counter(int(r[0]) for r in doris.rows("db", "t"))
        states = set(doris.labels("db").values())
    assert loaded == Counter(range(100))
    assert states == {"VISIBLE"}  # every batch's loads committed, none left pre-committed


def test_aof_into_the_delta_sink(spark, spark_connect, tmp_path):
    import deltalake

    from dstream_exactly_once.structured import delta_sink_options

    path, url, app, table = tmp_path / "in.log", f"sqlite:///{tmp_path}/s.db", "connect-delta", str(tmp_path / "tbl")
    _lines(path, range(100))

    def writer(checkpoint):
        lines = (spark.readStream.format("aof").option("path", str(path)).option("bytes.max", 100)
                 .option("max.bytes.per.trigger", 150).load())
        return (lines.selectExpr("CAST(value AS BIGINT) AS v").writeStream.format("deo-delta")
                .options(**delta_sink_options(url, app, table)).option("checkpointLocation", checkpoint))
    _run(writer, tmp_path / "cp", spark_connect)
    _lines(path, range(100, 130))
    _run(writer, tmp_path / "cp", spark_connect)  # a restart from the checkpoint: the new lines only
    rows = deltalake.DeltaTable(table).to_pyarrow_table().column("v").to_pylist()
    assert Counter(rows) == Counter(range(130))
    with open_store(url, app) as s:
        batches = s.last_committed_batch_id()
    assert batches is not None and batches >= 2  # several micro-batches, each one Delta commit
    assert deltalake.DeltaTable(table).transaction_version(app) == batches  # the table knows the last batch


def test_deo_kafka_source_into_a_foreach_batch_function(spark, spark_connect, kafka, topic_name, tmp_path):
    """``foreachBatch`` runs the function in the server's Python worker; keyed by the batch id (a replayed
    micro-batch replaces its own file), its output is exactly once when every offset is in one micro-batch."""
    kafka.create_topic(topic_name, 3)
    kafka.produce(topic_name, range(90), partitions=3)
    out = str(tmp_path / "batches")
    os.makedirs(out)

    def write_batch(df, batch_id):  # pickled by value to the server
        import json
        import os

        values = sorted(int(r.v) for r in df.selectExpr("CAST(CAST(value AS STRING) AS INT) AS v").collect())
        target = os.path.join(out, f"{batch_id}.json")
        with open(target + ".tmp", "w", encoding="utf-8") as f:
            json.dump(values, f)
        os.replace(target + ".tmp", target)

    def writer(checkpoint):
        records = (spark.readStream.format("deo-kafka").option("kafka.bootstrap.servers", kafka.bootstrap)
                   .option("subscribe", topic_name).option("startingOffsets", "earliest")
                   .option("maxOffsetsPerTrigger", 40).option("tasks.target.count", 1).load())
        return records.writeStream.foreachBatch(write_batch).option("checkpointLocation", checkpoint)

    def written():
        import json

        batches = {int(name.split(".")[0]): json.loads((tmp_path / "batches" / name).read_text())
                   for name in os.listdir(out) if name.endswith(".json")}
        return batches, Counter(v for values in batches.values() for v in values)

    _run(writer, tmp_path / "cp", spark_connect)
    batches, values = written()
    assert values == Counter(range(90))
    assert len(batches) >= 3  # at most 40 offsets a micro-batch
    kafka.produce(topic_name, range(90, 120), partitions=3)
    _run(writer, tmp_path / "cp", spark_connect)  # a restart from the checkpoint: the new records only
    after, values = written()
    assert values == Counter(range(120))
    assert {b: v for b, v in after.items() if b in batches} == batches  # earlier micro-batches untouched


def test_the_documented_connect_query_runs_in_a_client_process(spark_connect, tmp_path):
    """docs/structured-streaming.md's Spark Connect block, run as written (placeholders replaced) by a
    client process of its own: ``SparkSession.builder.remote(...)`` marks its whole process a Connect
    client, which a test process sharing a classic SparkContext must not become."""
    import subprocess
    import sys

    from .. import docblocks

    (block,) = docblocks.named("spark-connect")
    logs, url = tmp_path / "logs", f"sqlite:///{tmp_path}/state.db"
    logs.mkdir()
    _lines(logs / "service.log", range(50))
    script = docblocks.substitute(block.text, {
        "sc://connect-server:15002": spark_connect.url, "/var/log/app/service.log*": f"{logs}/service.log*",
        "sqlite:///state.db": url, "/checkpoints/lines-query": str(tmp_path / "cp")})
    done = subprocess.run([sys.executable, "-"], input=script, cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)  # the script on stdin: the server's token stays off command lines
    assert done.returncode == 0, done.stdout + done.stderr + spark_connect.log_tail()
    with open_store(url, "lines-query") as s:
        assert s.get_values("lines") == _exactly(range(50))
