"""Data loss in a running direct stream: records deleted by retention, topics deleted.

Two places detect it. The executor reading a range finds its first offsets gone (records deleted
after the batch was planned, or before the stream's first batch): the task fails with
``DataLossError`` naming topic, partition and the lost range, which surfaces from the action in
``foreachRDD``. The driver planning a batch finds a topic gone: the batch cannot be generated, and
the error surfaces from ``ssc.awaitTerminationOrTimeout``. With ``failOnDataLoss=False`` both
continue from what is still there.
"""

from __future__ import annotations

import threading
import time

import pytest
from pyspark.streaming import StreamingContext

from dstream_exactly_once import KafkaUtils, OffsetRange

from ..helpers import eventually
from .streams import run_until


def params(kafka, **extra):
    return {"bootstrap.servers": kafka.bootstrap, "auto.offset.reset": "smallest", **extra}


class Batches:
    """What a ``foreachRDD`` saw: the records of each batch, or the error its action raised."""

    def __init__(self):
        self.lock = threading.Lock()
        self.values = []
        self.errors = []
        self.ranges = []
        self.skipped = []  # per KafkaRDD: offsets its executors skipped, counted on the driver
        self.batches = 0  # foreachRDD calls, empty batches included

    def record(self, rdd):
        with self.lock:
            self.batches += 1
        # a KafkaRDD knows its ranges; the RDD after a transform() is a plain RDD (as in Spark 2.4)
        ranges = rdd.offsetRanges() if hasattr(rdd, "offsetRanges") else []
        try:
            got = [int(v) for _, v in rdd.collect()]
        except Exception as exc:  # noqa: BLE001 - the test inspects the job failure
            with self.lock:
                self.errors.append(str(exc))
            return
        skipped = rdd.data_loss_skipped() if hasattr(rdd, "data_loss_skipped") else 0
        with self.lock:
            self.ranges.extend(ranges)
            self.values.extend(got)
            self.skipped.append(skipped)

    def count(self):
        with self.lock:
            return len(self.values)

    def batch_count(self):
        with self.lock:
            return self.batches


def stream_error(ssc: StreamingContext, timeout: float = 60.0) -> str:
    """The error the running StreamingContext reports (e.g. a batch that could not be planned)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if ssc.awaitTerminationOrTimeout(0.5):
                raise AssertionError("the streaming context stopped without an error")
        except AssertionError:
            raise
        except Exception as exc:  # noqa: BLE001 - Py4J wraps the Python traceback of the driver
            return str(exc)
    raise AssertionError(f"the stream reported no error within {timeout}s")


def assert_no_stream_error(ssc: StreamingContext) -> None:
    assert ssc.awaitTerminationOrTimeout(0.1) is False


# ---------------------------------------------------------------- records deleted (executor side)
def test_records_deleted_before_the_first_batch_fail_the_batch(kafka, topic_name, sc):
    kafka.create_topic(topic_name, 1)
    kafka.produce(topic_name, range(50), partition=0)
    ssc = StreamingContext(sc, 1)
    stream = KafkaUtils.createDirectStream(ssc, [topic_name], params(kafka))  # starts at offset 0
    kafka.delete_records(topic_name, {0: 20})
    seen = Batches()
    stream.foreachRDD(lambda rdd: seen.record(rdd))
    run_until(ssc, lambda: bool(seen.errors) or seen.count() > 0)
    assert seen.values == []
    error = seen.errors[0]
    assert "DataLossError" in error
    assert f"offsets [0, 20) of {topic_name}-0 were deleted" in error
    assert "failOnDataLoss=False" in error


def test_records_deleted_between_planning_and_reading_fail_the_batch(kafka, topic_name, sc):
    kafka.create_topic(topic_name, 2)
    kafka.produce(topic_name, range(60), partitions=2)  # 30 records per partition
    ssc = StreamingContext(sc, 1)
    stream = KafkaUtils.createDirectStream(ssc, [topic_name], params(kafka))
    planned = []

    def delete_after_planning(rdd):  # runs on the driver once the batch's ranges are fixed
        if not planned:
            planned.append(rdd.offsetRanges())
            kafka.delete_records(topic_name, {1: 12})
        return rdd

    seen = Batches()
    stream.transform(delete_after_planning).foreachRDD(lambda rdd: seen.record(rdd))
    run_until(ssc, lambda: bool(seen.errors) or seen.count() > 0)
    assert planned[0] == [OffsetRange(topic_name, 0, 0, 30), OffsetRange(topic_name, 1, 0, 30)]
    assert seen.values == []
    assert f"offsets [0, 12) of {topic_name}-1 were deleted" in seen.errors[0]


def test_records_deleted_are_skipped_without_fail_on_data_loss(kafka, topic_name, sc):
    kafka.create_topic(topic_name, 1)
    kafka.produce(topic_name, range(50), partition=0)
    ssc = StreamingContext(sc, 1)
    stream = KafkaUtils.createDirectStream(ssc, [topic_name], params(kafka), failOnDataLoss=False)
    kafka.delete_records(topic_name, {0: 20})
    seen = Batches()
    produced_more = []

    def keep_and_produce(rdd):
        seen.record(rdd)
        if seen.count() >= 30 and not produced_more:
            produced_more.append(True)
            kafka.produce(topic_name, range(50, 60), partition=0)

    stream.foreachRDD(keep_and_produce)
    run_until(ssc, lambda: seen.count() >= 40 or bool(seen.errors))
    assert seen.errors == []
    assert sorted(seen.values) == list(range(20, 60))
    # the first range was planned from 0; the lost offsets were skipped while reading it
    assert seen.ranges[0] == OffsetRange(topic_name, 0, 0, 50)
    # ... and counted on the driver: the 20 offsets that vanished, all in the first batch
    assert seen.skipped[0] == 20 and sum(seen.skipped) == 20


def test_create_rdd_counts_offsets_deleted_between_planning_and_reading(kafka, topic_name, sc):
    kafka.create_topic(topic_name, 2)
    kafka.produce(topic_name, range(60), partitions=2)  # 30 records per partition
    ranges = [OffsetRange(topic_name, 0, 5, 30), OffsetRange(topic_name, 1, 0, 30)]
    rdd = KafkaUtils.createRDD(sc, params(kafka), ranges, failOnDataLoss=False)
    assert rdd.data_loss_skipped() == 0  # nothing read yet
    kafka.delete_records(topic_name, {0: 12, 1: 4})
    values = sorted(int(v) for _, v in rdd.collect())
    assert values == sorted([2 * i for i in range(12, 30)] + [2 * i + 1 for i in range(4, 30)])
    assert rdd.data_loss_skipped() == (12 - 5) + 4
    assert rdd.count() == len(values)  # read again: each partition still counts once
    assert rdd.data_loss_skipped() == 11
    strict = KafkaUtils.createRDD(sc, params(kafka), [OffsetRange(topic_name, 1, 4, 30)])
    assert strict.count() == 26 and strict.data_loss_skipped() == 0


# ---------------------------------------------------------------- topic deleted (driver side)
def test_deleted_topic_fails_the_stream(kafka, topic_name, sc):
    kafka.create_topic(topic_name, 1)
    kafka.produce(topic_name, range(10), partition=0)
    ssc = StreamingContext(sc, 1)
    stream = KafkaUtils.createDirectStream(ssc, [topic_name], params(kafka), discovery_interval_s=0.5)
    seen = Batches()
    stream.foreachRDD(lambda rdd: seen.record(rdd))
    ssc.start()
    try:
        eventually(lambda: seen.count() >= 10, "the first records", 60)
        kafka.delete_topic(topic_name)
        error = stream_error(ssc)
    finally:
        ssc.stop(stopSparkContext=False, stopGraceFully=False)
    assert "DataLossError" in error
    assert f"{topic_name}-0 was deleted; offsets from 10 on cannot be read" in error
    assert sorted(seen.values) == list(range(10))


def test_deleted_topic_is_dropped_without_fail_on_data_loss(kafka, topic_name, sc):
    kept, deleted = topic_name + "-kept", topic_name + "-gone"
    kafka.create_topic(kept, 1)
    kafka.create_topic(deleted, 2)
    kafka.produce(kept, range(10), partition=0)
    kafka.produce(deleted, range(100, 110), partitions=2)
    sc._conf.set("spark.streaming.kafka.failOnDataLoss", "false")  # the SparkConf spelling of the policy
    try:
        ssc = StreamingContext(sc, 1)
        stream = KafkaUtils.createDirectStream(ssc, [kept, deleted], params(kafka), discovery_interval_s=0.5)
    finally:
        sc._conf.set("spark.streaming.kafka.failOnDataLoss", "true")
    seen = Batches()
    stream.foreachRDD(lambda rdd: seen.record(rdd))
    ssc.start()
    try:
        eventually(lambda: seen.count() >= 20, "the first records", 60)
        kafka.delete_topic(deleted)
        after = seen.batch_count()
        eventually(lambda: seen.batch_count() >= after + 3, "a few batches planned after the deletion", 60)
        kafka.produce(kept, range(10, 25), partition=0)
        eventually(lambda: seen.count() >= 35, "the records produced after the deletion", 60,
                   detail=lambda: f"errors: {seen.errors}")
        assert_no_stream_error(ssc)
    finally:
        ssc.stop(stopSparkContext=False, stopGraceFully=False)
    assert seen.errors == []
    assert sorted(seen.values) == list(range(25)) + list(range(100, 110))
    late = [r for r in seen.ranges if r.topic == kept and r.fromOffset >= 10]
    assert late and {r.topic for r in seen.ranges if r.count()} == {kept, deleted}


@pytest.mark.parametrize("fail", [True, False])
def test_create_rdd_on_a_deleted_topic_is_refused(kafka, topic_name, sc, fail):
    from dstream_exactly_once import ConfigurationError

    kafka.create_topic(topic_name, 1)
    kafka.produce(topic_name, range(3), partition=0)
    kafka.delete_topic(topic_name)
    with pytest.raises(ConfigurationError, match="unknown topic"):
        KafkaUtils.createRDD(sc, params(kafka), [OffsetRange(topic_name, 0, 0, 3)], failOnDataLoss=fail)
