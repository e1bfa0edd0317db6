"""The ``deo-kafka`` Structured Streaming source without Spark running: options, offset documents,
planning on the in-memory cluster of ``dstream_exactly_once.testing._fake_kafka``, tasks, Arrow batches."""

from __future__ import annotations

import datetime
import pickle

import pytest

from dstream_exactly_once.core._tasks import task_size
from dstream_exactly_once.errors import ConfigurationError, OffsetRangeError, UnknownKafkaParamError
from dstream_exactly_once.kafka._offsets import OffsetRange, TopicAndPartition
from dstream_exactly_once.kafka._records import RecordBlock
from dstream_exactly_once.kafka.structured._source import KafkaSourcePlanner, arrow_schema, record_batch
from dstream_exactly_once.kafka.structured._source_offsets import doc_of, offsets_of, prorate, ranges_between
from dstream_exactly_once.kafka.structured._source_options import parse_kafka_source_options
from dstream_exactly_once.testing._fake_kafka import FakeKafkaCluster

TP = TopicAndPartition
BROKER = {"kafka.bootstrap.servers": "localhost:9092"}


def opts(**kw):
    return parse_kafka_source_options({**BROKER, **{k.replace("_", "."): v for k, v in kw.items()}})


def planner(cluster, clock=None, parallelism=1, **kw):
    kw.setdefault("subscribe", "t")
    return KafkaSourcePlanner(opts(**kw), parallelism=parallelism, metadata=lambda: cluster,
                              **({} if clock is None else {"clock": clock}))


# ---------------------------------------------------------------- options
def test_options_take_spark_kafka_source_names_case_insensitively():
    o = parse_kafka_source_options({**BROKER, "SUBSCRIBE": "a, b", "startingOffsets": "Earliest",
                                    "maxOffsetsPerTrigger": "10", "minoffsetspertrigger": "2",
                                    "maxTriggerDelay": "5s", "failOnDataLoss": "false", "includeHeaders": "true",
                                    "kafka.isolation.level": "read_committed", "path": "ignored"})
    assert o.strategy == ("subscribe", ["a", "b"]) and o.starting == "earliest"
    assert (o.max_offsets_per_trigger, o.min_offsets_per_trigger, o.max_trigger_delay_ms) == (10, 2, 5000)
    assert not o.fail_on_data_loss and o.include_headers and o.config.isolation_level == "read_committed"
    assert parse_kafka_source_options({**BROKER, "assign": '{"t": [1, 0]}'}).strategy == ("assign", [TP("t", 0),
                                                                                                     TP("t", 1)])
    assert parse_kafka_source_options({**BROKER, "subscribePattern": "t.*"}).strategy == ("subscribePattern", "t.*")
    assert parse_kafka_source_options({**BROKER, "subscribe": "t", "maxTriggerDelay": "250"}).max_trigger_delay_ms \
        == 250  # a bare number is in milliseconds, as in Spark


@pytest.mark.parametrize(("options", "words"), [
    ({"subscribe": "t"}, ["kafka.bootstrap.servers", "required"]),
    ({**BROKER}, ["exactly one of", "subscribe"]),
    ({**BROKER, "subscribe": "t", "assign": '{"t": [0]}'}, ["exactly one of", "assign"]),
    ({**BROKER, "subscribe": "t", "endingOffsets": "latest"}, ["endingOffsets", "batch queries"]),
    ({**BROKER, "subscribe": "t", "minPartitions": "4"}, ["minPartitions", "tasks.target.count"]),
    ({**BROKER, "subscribe": "t", "kafka.auto.offset.reset": "earliest"}, ["auto.offset.reset", "startingOffsets"]),
    ({**BROKER, "subscribe": "t", "startingOffsets": "first"}, ["startingOffsets", "'first'", "earliest"]),
    ({**BROKER, "subscribe": "t", "startingOffsets": '{"u": {"0": 1}}'}, ["startingOffsets", "u-0"]),
    ({**BROKER, "subscribe": "t", "startingOffsets": '{"t": {"0": -3}}'}, ["startingOffsets", "-3", "-2 earliest"]),
    ({**BROKER, "assign": '{"t": []}'}, ["assign", "non-empty list"]),
    ({**BROKER, "subscribePattern": "t("}, ["subscribePattern", "regular expression"]),
    ({**BROKER, "subscribe": "t", "maxOffsetsPerTrigger": "0"}, ["maxOffsetsPerTrigger", "'0'"]),
    ({**BROKER, "subscribe": "t", "maxOffsetsPerTrigger": "5", "minOffsetsPerTrigger": "9"}, ["minOffsetsPerTrigger"]),
    ({**BROKER, "subscribe": "t", "failOnDataLoss": "maybe"}, ["failOnDataLoss", "'maybe'"]),
    ({**BROKER, "subscribe": "t", "reader": "jvm"}, ["'jvm'", "kafka-python"]),
    ({**BROKER, "subscribe": "t", "tasks.target.count": "0"}, ["tasks.target.count", "'0'"]),
    ({**BROKER, "subscribe": "t", "colour": "red"}, ["colour", "'red'", "subscribePattern"]),
    ({**BROKER, "subscribe": "bad topic"}, ["subscribe", "bad topic", "legal"]),
])
def test_bad_options_are_refused_naming_key_value_and_what_is_allowed(options, words):
    with pytest.raises(ConfigurationError) as info:
        parse_kafka_source_options(options)
    for word in words:
        assert word in str(info.value)


def test_kafka_settings_are_checked_and_passwords_never_shown():
    with pytest.raises(UnknownKafkaParamError, match="no.such.key"):
        parse_kafka_source_options({**BROKER, "subscribe": "t", "kafka.no.such.key": "1"})
    o = parse_kafka_source_options({**BROKER, "subscribe": "t", "kafka.security.protocol": "SASL_PLAINTEXT",
                                    "kafka.sasl.mechanism": "PLAIN", "kafka.sasl.username": "u",
                                    "kafka.sasl.password": "s3cret-pw"})
    assert "s3cret-pw" not in repr(o) and "s3cret-pw" not in o.describe()
    assert o.config.client["sasl_plain_password"] == "s3cret-pw"
    assert pickle.loads(pickle.dumps(o)) == o


# ---------------------------------------------------------------- offsets
def test_a_batch_is_the_difference_of_its_offsets_and_new_partitions_carry_their_start():
    start = doc_of({TP("t", 0): 5, TP("t", 1): 7})
    assert start == {"t": {"0": 5, "1": 7}}  # Spark's Kafka offset shape
    end = doc_of({TP("t", 0): 9, TP("t", 1): 7, TP("t", 2): 3}, {TP("t", 2): 1})
    assert [r.toTuple() for r in ranges_between(start, end)] == [("t", 0, 5, 9), ("t", 2, 1, 3)]
    assert offsets_of(end) == {TP("t", 0): 9, TP("t", 1): 7, TP("t", 2): 3}
    with pytest.raises(ConfigurationError, match="without a start"):
        ranges_between(start, doc_of({TP("t", 3): 4}))
    with pytest.raises(ConfigurationError, match="another source"):
        offsets_of({"v": 1, "files": {}})


def test_max_offsets_are_shared_by_lag_as_spark_does():
    ranges = [OffsetRange("t", 0, 0, 90), OffsetRange("t", 1, 0, 9), OffsetRange("t", 2, 0, 1)]
    # 10 offsets over lags 90, 9, 1: 9 (floor), 0.9 and 0.1 rounded up (no partition starves)
    assert [r.untilOffset for r in prorate(ranges, 10)] == [9, 1, 1]
    assert prorate(ranges, 1000) == ranges


# ---------------------------------------------------------------- planning
def test_starting_offsets_latest_earliest_and_json_with_earliest_and_latest_markers():
    cluster = FakeKafkaCluster({"t": [(2, 10), (0, 4)]})
    assert planner(cluster).initial_offset() == {"t": {"0": 10, "1": 4}}
    assert planner(cluster, startingOffsets="earliest").initial_offset() == {"t": {"0": 2, "1": 0}}
    assert planner(cluster, startingOffsets='{"t": {"0": -2, "1": -1}}').initial_offset() == {"t": {"0": 2, "1": 4}}
    assert planner(cluster, startingOffsets='{"t": {"0": 5, "1": 3}}').initial_offset() == {"t": {"0": 5, "1": 3}}
    with pytest.raises(ConfigurationError, match=r"every partition.*missing: t-1"):
        planner(cluster, startingOffsets='{"t": {"0": 5}}').initial_offset()
    with pytest.raises(OffsetRangeError, match="outside the log"):
        planner(cluster, startingOffsets='{"t": {"0": 11, "1": 0}}').initial_offset()


def test_each_trigger_plans_what_arrived_and_returns_start_when_nothing_did():
    cluster = FakeKafkaCluster({"t": [(0, 3), (0, 0)]})
    p = planner(cluster, startingOffsets="earliest")
    start = p.initial_offset()
    end = p.latest_offset(start)
    assert end == {"t": {"0": 3, "1": 0}, "@from": {"t": {"0": 0, "1": 0}}}  # a first batch: every start
    assert [r.toTuple() for r in ranges_between(start, end)] == [("t", 0, 0, 3)]
    assert p.latest_offset(end) is end  # nothing new: the same offset, no batch
    cluster.produce("t", 1, 4)
    assert p.latest_offset(end) == {"t": {"0": 3, "1": 4}}


def test_a_partition_added_while_running_starts_at_its_earliest_offset():
    cluster = FakeKafkaCluster({"t": [(0, 2)]})
    p = planner(cluster)
    start = p.initial_offset()
    cluster.add_partition("t", earliest=5, latest=8)
    end = p.latest_offset(start)
    assert end == {"t": {"0": 2, "1": 8}, "@from": {"t": {"0": 2, "1": 5}}}
    cluster.add_partition("t", earliest=3, latest=4)
    assert p.latest_offset(end) == {"t": {"0": 2, "1": 8, "2": 4}, "@from": {"t": {"2": 3}}}  # a later batch
    assert [r.toTuple() for r in ranges_between(start, end)] == [("t", 1, 5, 8)]


def test_the_first_batch_keeps_its_start_while_latest_moves_on():
    # Spark asks a new query's initial offset again when it runs (and re-runs) the first batch; with
    # startingOffsets=latest the log has grown meanwhile, in this process or in a restarted one.
    cluster = FakeKafkaCluster({"t": [(0, 10), (0, 10)]})
    p = planner(cluster)
    start = p.initial_offset()
    cluster.produce("t", 0, 5)
    end = p.latest_offset(start)
    cluster.produce("t", 0, 7)
    assert p.initial_offset() == start  # the same query run: the same initial offset
    assert [r.toTuple() for r in ranges_between(p.initial_offset(), end)] == [("t", 0, 10, 15)]
    again = planner(cluster)  # a restart before the first batch committed: latest is 22 now
    assert again.initial_offset() == {"t": {"0": 22, "1": 10}}
    assert [r.toTuple() for r in ranges_between(again.initial_offset(), end)] == [("t", 0, 10, 15)]
    assert again.tasks(again.initial_offset(), end) == p.tasks(start, end)


def test_a_restart_from_the_checkpoint_plans_from_the_offset_spark_passes():
    cluster = FakeKafkaCluster({"t": [(0, 10), (0, 10)]})
    first = planner(cluster, startingOffsets="earliest", maxOffsetsPerTrigger="4")
    start = first.initial_offset()
    end = first.latest_offset(start, 4)
    again = planner(cluster, startingOffsets="earliest")  # a new process: nothing kept but the offset
    assert again.latest_offset(end, 4) == first.latest_offset(end, 4) == {"t": {"0": 4, "1": 4}}
    assert again.tasks(start, end) == first.tasks(start, end)


def test_max_offsets_per_trigger_cuts_each_batch():
    cluster = FakeKafkaCluster({"t": [(0, 30), (0, 10)]})
    p = planner(cluster, startingOffsets="earliest")
    doc = p.initial_offset()
    seen = []
    for _ in range(10):
        end = p.latest_offset(doc, 8)
        if end is doc:
            break
        seen.append(sum(r.count() for r in ranges_between(doc, end)))
        doc = end
    assert doc == {"t": {"0": 30, "1": 10}} and sum(seen) == 40 and max(seen) <= 8


def test_min_offsets_wait_until_enough_arrived_or_max_trigger_delay_passed():
    now = [1_000_000.0]
    cluster = FakeKafkaCluster({"t": [(0, 0)]})
    p = planner(cluster, clock=lambda: now[0], minOffsetsPerTrigger="5", maxTriggerDelay="10s")
    start = p.initial_offset()
    assert p.latest_offset(start, None, 5) is start  # the first trigger runs at once (as Spark's): nothing there
    cluster.produce("t", 0, 2)
    now[0] += 1000
    assert p.latest_offset(start, None, 5) is start  # 2 < 5 and 1 s < 10 s: wait
    cluster.produce("t", 0, 3)
    end = p.latest_offset(start, None, 5)
    assert end == {"t": {"0": 5}, "@from": {"t": {"0": 0}}}  # 5 arrived (a first batch: its start recorded)
    cluster.produce("t", 0, 1)
    now[0] += 5000
    assert p.latest_offset(end, None, 5) is end
    now[0] += 10_000
    assert p.latest_offset(end, None, 5) == {"t": {"0": 6}}  # the delay passed: runs with what there is


def test_available_now_reads_up_to_the_log_ends_of_its_first_planning():
    cluster = FakeKafkaCluster({"t": [(0, 10)]})
    p = planner(cluster, startingOffsets="earliest")
    doc = p.initial_offset()
    p.prepare_available_now()
    doc = p.latest_offset(doc, 4)
    cluster.produce("t", 0, 100)  # arrives after the run began: not read by it
    while True:
        end = p.latest_offset(doc, 4)
        if end is doc:
            break
        doc = end
    assert doc == {"t": {"0": 10}}


def test_many_partitions_are_packed_into_few_balanced_tasks():
    cluster = FakeKafkaCluster({"t": [(0, 100)] * 12})
    p = planner(cluster, startingOffsets="earliest", parallelism=3)
    start = p.initial_offset()
    end = p.latest_offset(start)
    tasks = p.tasks(start, end)
    assert len(tasks) == 3 and [task_size(t) for t in tasks] == [400, 400, 400]
    read = sorted((piece.range.partition, piece.start, piece.end) for task in tasks for piece in task)
    assert read == [(n, 0, 100) for n in range(12)]
    assert p.tasks(start, end) == tasks  # a replay gets the same tasks
    assert len(planner(cluster, parallelism=3, tasks_target_count="12").tasks(start, end)) == 12


def test_the_planner_pickles_without_its_broker_connections():
    cluster = FakeKafkaCluster({"t": [(0, 1)]})
    p = planner(cluster)
    p.initial_offset()
    state = p.__getstate__()
    assert state["_planner"] is None and state["_doc"] is None


# ---------------------------------------------------------------- Arrow
def _block(headers=None):
    return RecordBlock("t", 3, [7, 9], [None, b"k"], [b"v1", None], [1_700_000_000_123, -1], [0, 1], headers)


@pytest.mark.pyspark4
@pytest.mark.parametrize("include_headers", [False, True])
def test_record_batches_have_the_schema_spark_derives_from_the_source_schema(include_headers):
    from pyspark.sql.pandas.types import to_arrow_schema

    from dstream_exactly_once.kafka.structured._spark_source import kafka_schema

    schema = arrow_schema(include_headers)
    assert schema.equals(to_arrow_schema(kafka_schema(include_headers), timezone="UTC"))
    batch = record_batch(_block([[("h", b"1"), ("n", None)], []] if include_headers else None), schema)
    rows = batch.to_pylist()
    assert [(r["key"], r["value"], r["topic"], r["partition"], r["offset"], r["timestampType"]) for r in rows] == [
        (None, b"v1", "t", 3, 7, 0), (b"k", None, "t", 3, 9, 1)]
    utc = datetime.timezone.utc
    assert rows[0]["timestamp"] == datetime.datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=utc)
    assert rows[1]["timestamp"] == datetime.datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=utc)
    if include_headers:
        assert rows[0]["headers"] == [{"key": "h", "value": b"1"}, {"key": "n", "value": None}]
        assert rows[1]["headers"] is None  # no headers: null, as in Spark's Kafka source
        assert record_batch(_block(None), schema).column("headers").null_count == 2  # a block without any


@pytest.mark.pyspark4
def test_the_data_source_refuses_another_schema_and_bad_options_at_load():
    from pyspark.sql.types import StringType, StructField, StructType

    from dstream_exactly_once.kafka.structured._spark_source import KafkaDataSource, kafka_schema

    source = KafkaDataSource({**BROKER, "subscribe": "t", "includeHeaders": "true"})
    assert source.schema() == kafka_schema(True) and source.name() == "deo-kafka"
    with pytest.raises(ConfigurationError, match="fixed schema"):
        source.streamReader(StructType([StructField("value", StringType())]))
    with pytest.raises(ConfigurationError, match="maxOffsetsPerTrigger"):
        KafkaDataSource({**BROKER, "subscribe": "t", "maxOffsetsPerTrigger": "-1"}).schema()
