"""KafkaUtils.createDirectStream on a real broker with a local[2] StreamingContext."""

from __future__ import annotations

import re
import threading

import pytest
from pyspark.streaming import StreamingContext

from dstream_exactly_once import (
    ConfigurationError,
    KafkaUnavailableError,
    KafkaUtils,
    OffsetRange,
    OffsetRangeError,
    SubscribePattern,
    TopicAndPartition,
)

from .streams import run_until


def params(kafka, **extra):
    return {"bootstrap.servers": kafka.bootstrap, "auto.offset.reset": "smallest", **extra}


class Collector:
    """Driver-side sink: every batch's records and ranges, as Spark 2.4's docs show it."""

    def __init__(self):
        self.lock = threading.Lock()
        self.values = []
        self.ranges = []

    def total(self):
        with self.lock:
            return len(self.values)


def test_direct_stream_from_smallest_with_offset_ranges(kafka, topic_name, sc):
    kafka.create_topic(topic_name, 3)
    kafka.produce(topic_name, range(1, 301), partitions=3)
    ssc = StreamingContext(sc, 1)
    stream = KafkaUtils.createDirectStream(ssc, [topic_name], params(kafka))
    got = Collector()
    seen_in_transform = []

    def store_offset_ranges(rdd):  # Spark 2.4's documented idiom, first operation on the stream
        seen_in_transform.append(rdd.offsetRanges())
        return rdd

    def keep(time, rdd):
        with got.lock:
            got.ranges.append(rdd.offsetRanges())
            got.values.extend(int(v) for _, v in rdd.collect())

    stream.transform(store_offset_ranges).foreachRDD(lambda rdd: None)
    stream.foreachRDD(keep)
    run_until(ssc, lambda: got.total() >= 300)
    assert sorted(got.values) == list(range(1, 301))
    # ranges of consecutive batches are contiguous per partition and cover [0, 100) each
    per_tp = {}
    for batch in got.ranges:
        for r in batch:
            assert per_tp.get(r.topicPartition(), 0) == r.fromOffset
            per_tp[r.topicPartition()] = r.untilOffset
    assert per_tp == {TopicAndPartition(topic_name, p): 100 for p in range(3)}
    assert seen_in_transform[: len(got.ranges)] == got.ranges[: len(seen_in_transform)]


def test_direct_stream_from_explicit_offsets_and_handler(kafka, topic_name, sc):
    kafka.create_topic(topic_name, 2)
    kafka.produce(topic_name, range(40), partitions=2)
    ssc = StreamingContext(sc, 1)
    stream = KafkaUtils.createDirectStream(
        ssc, [topic_name], params(kafka), fromOffsets={TopicAndPartition(topic_name, 1): 15},
        messageHandler=lambda m: (m.partition, m.offset, m.message))
    got = Collector()

    def keep(rdd):
        with got.lock:
            got.values.extend(rdd.collect())

    stream.foreachRDD(keep)
    run_until(ssc, lambda: got.total() >= 5)
    assert sorted(got.values) == [(1, off, str(2 * off + 1)) for off in range(15, 20)]


def test_transform_then_map_keeps_ranges_and_records(kafka, topic_name, sc):
    kafka.create_topic(topic_name, 2)
    kafka.produce(topic_name, ["a b", "b c", "c d", "d e"], partitions=2)
    ssc = StreamingContext(sc, 1)
    stream = KafkaUtils.createDirectStream(ssc, [topic_name], params(kafka))
    ranges = []
    counts = {}
    lock = threading.Lock()

    def remember(t, rdd):
        with lock:
            ranges.append((t, rdd.offsetRanges()))
        return rdd

    words = (stream.transform(remember).flatMap(lambda kv: kv[1].split()).map(lambda w: (w, 1))
             .reduceByKey(lambda a, b: a + b))

    def add(rdd):
        with lock:
            for w, n in rdd.collect():
                counts[w] = counts.get(w, 0) + n

    words.foreachRDD(add)
    run_until(ssc, lambda: sum(counts.values()) >= 8)
    assert counts == {"a": 1, "b": 2, "c": 2, "d": 2, "e": 1}
    assert all(len(r) == 2 for _, r in ranges)


def test_partitions_added_mid_stream_are_read(kafka, topic_name, sc):
    kafka.create_topic(topic_name, 1)
    kafka.produce(topic_name, range(10), partition=0)
    ssc = StreamingContext(sc, 1)
    stream = KafkaUtils.createDirectStream(ssc, [topic_name], params(kafka), discovery_interval_s=0.5)
    got = Collector()

    def keep(rdd):
        with got.lock:
            got.values.extend(int(v) for _, v in rdd.collect())
            if len(got.values) == 10 and not got.ranges:
                got.ranges.append("grown")
                kafka.add_partitions(topic_name, 3)
                kafka.produce(topic_name, range(100, 120), partitions=3)

    stream.foreachRDD(keep)
    run_until(ssc, lambda: got.total() >= 30)
    assert sorted(got.values) == list(range(10)) + list(range(100, 120))


def test_pattern_subscription_picks_up_new_topics(kafka, topic_name, sc):
    first = topic_name + "-a"
    kafka.create_topic(first, 1)
    kafka.produce(first, ["1"], partition=0)
    ssc = StreamingContext(sc, 1)
    stream = KafkaUtils.createDirectStream(ssc, None, params(kafka),  # type: ignore[arg-type]
                                           strategy=SubscribePattern(re.escape(topic_name) + "-.*"),
                                           discovery_interval_s=0.5)
    got = Collector()
    created = []

    def keep(rdd):
        with got.lock:
            got.values.extend(int(v) for _, v in rdd.collect())
            if got.values and not created:
                created.append(True)
                kafka.create_topic(topic_name + "-b", 2)
                kafka.produce(topic_name + "-b", ["2", "3"], partitions=2)

    stream.foreachRDD(keep)
    run_until(ssc, lambda: got.total() >= 3)
    assert sorted(got.values) == [1, 2, 3]


def test_rate_limit_per_partition(kafka, topic_name, sc):
    kafka.create_topic(topic_name, 2)
    kafka.produce(topic_name, range(100), partitions=2)
    sc.getConf()  # the limit is read from the context's SparkConf
    sc._conf.set("spark.streaming.kafka.maxRatePerPartition", "10")
    try:
        ssc = StreamingContext(sc, 1)
        stream = KafkaUtils.createDirectStream(ssc, [topic_name], params(kafka))
        got = Collector()

        def keep(rdd):
            with got.lock:
                got.ranges.append(rdd.offsetRanges())
                got.values.extend(rdd.collect())

        stream.foreachRDD(keep)
        run_until(ssc, lambda: got.total() >= 40)
    finally:
        sc._conf.set("spark.streaming.kafka.maxRatePerPartition", "0")
    assert all(r.count() <= 10 for batch in got.ranges for r in batch)
    assert any(r.count() == 10 for batch in got.ranges for r in batch)


#: The estimator sizes batches by measured processing rates, so on a loaded machine (slow batches) it
#: may go down to its minRate: the records and the wait leave room for that.
RECORDS_BP = 1500


def test_backpressure_starts_at_the_initial_rate_then_follows_the_estimator(kafka, topic_name, sc):
    """spark.streaming.backpressure.enabled: the first batch reads initialRate x 1 s split by lag
    share; once the streaming listener has fed two completed batches to the PID estimator, batches
    are sized by its estimate; everything is read exactly once."""
    kafka.create_topic(topic_name, 2)
    kafka.produce(topic_name, range(RECORDS_BP), partitions=2)
    keys = {"spark.streaming.backpressure.enabled": "true", "spark.streaming.backpressure.initialRate": "100",
            "spark.streaming.backpressure.pid.minRate": "50"}
    for k, v in keys.items():
        sc._conf.set(k, v)
    try:
        ssc = StreamingContext(sc, 1)
        stream = KafkaUtils.createDirectStream(ssc, [topic_name], params(kafka))
    finally:
        for k in keys:
            sc._conf.set(k, "false" if k.endswith("enabled") else "0" if k.endswith("initialRate") else "100")
    batches = stream._build
    controller = batches.backpressure
    assert controller is not None and controller.rate() == 100
    planned = []
    plan = batches.planner.plan

    def spy(seconds, rate=None):
        ranges = plan(seconds, rate)
        planned.append((rate, [r.count() for r in ranges]))
        return ranges

    batches.planner.plan = spy
    got = Collector()

    def keep(rdd):
        with got.lock:
            got.values.extend(int(v) for _, v in rdd.collect())

    stream.foreachRDD(keep)
    run_until(ssc, lambda: got.total() >= RECORDS_BP, timeout=240)
    assert sorted(got.values) == list(range(RECORDS_BP))
    assert planned[0] == (100.0, [50, 50])
    assert controller.updates >= 1
    estimated = [(rate, sizes) for rate, sizes in planned if rate not in (None, 100.0) and sum(sizes)]
    assert estimated, planned
    for rate, sizes in estimated:  # each partition gets round(rate x its lag share), at least minRate=1
        assert abs(sum(sizes) - rate) <= 2 or sum(sizes) < rate


def test_bad_arguments_fail_before_the_stream_starts(kafka, topic_name, sc):
    kafka.create_topic(topic_name, 2)
    kafka.produce(topic_name, range(10), partitions=2)
    ssc = StreamingContext(sc, 1)
    p = params(kafka)
    with pytest.raises(ConfigurationError, match="list or set"):
        KafkaUtils.createDirectStream(ssc, topic_name, p)  # a bare string
    with pytest.raises(ConfigurationError, match="unknown topic"):
        KafkaUtils.createDirectStream(ssc, ["missing-" + topic_name], p)
    with pytest.raises(ConfigurationError, match="do not exist"):
        KafkaUtils.createDirectStream(ssc, [topic_name], p, fromOffsets={TopicAndPartition(topic_name, 7): 0})
    with pytest.raises(ConfigurationError, match="do not equal"):
        KafkaUtils.createDirectStream(ssc, [topic_name, "other"], p,
                                      fromOffsets={TopicAndPartition(topic_name, 0): 0})
    with pytest.raises(OffsetRangeError, match=r"outside the log \[0, 5\]"):
        KafkaUtils.createDirectStream(ssc, [topic_name], p, fromOffsets={TopicAndPartition(topic_name, 0): 6})
    with pytest.raises(ConfigurationError, match="int >= 0"):
        KafkaUtils.createDirectStream(ssc, [topic_name], p, fromOffsets={TopicAndPartition(topic_name, 0): -1})
    with pytest.raises(ConfigurationError, match="enable.auto.commit"):
        KafkaUtils.createDirectStream(ssc, [topic_name], {**p, "enable.auto.commit": "true"})
    with pytest.raises(ConfigurationError, match="'bogus.key', 'other.key'"):
        KafkaUtils.createDirectStream(ssc, [topic_name], {**p, "bogus.key": 1, "other.key": 2})
    with pytest.raises(ConfigurationError, match="keyDecoder must be callable"):
        KafkaUtils.createDirectStream(ssc, [topic_name], p, keyDecoder="utf8")  # type: ignore[arg-type]
    assert OffsetRange(topic_name, 0, 0, 1) == OffsetRange(topic_name, 0, 0, 1)


def test_unreachable_bootstrap_names_the_address(sc):
    from dstream_exactly_once.testing._process import free_port

    port = free_port()
    ssc = StreamingContext(sc, 1)
    with pytest.raises(KafkaUnavailableError, match=f"127.0.0.1:{port}"):
        KafkaUtils.createDirectStream(ssc, ["t"], {"bootstrap.servers": f"127.0.0.1:{port}"})


_STATE: dict = {}


def test_checkpointed_context_with_update_state_by_key(kafka, topic_name, sc, tmp_path):
    """ssc.checkpoint + updateStateByKey work with the direct stream; recovery with getOrCreate is
    tested in test_checkpoint_recovery.py."""
    kafka.create_topic(topic_name, 2)
    kafka.produce(topic_name, ["a", "b", "a", "c", "a", "b"], partitions=2)
    ssc = StreamingContext(sc, 1)
    ssc.checkpoint(str(tmp_path / "ckpt"))
    stream = KafkaUtils.createDirectStream(ssc, [topic_name], params(kafka))
    _STATE.clear()

    def update(new, old):
        return sum(new) + (old or 0)

    def keep(rdd):  # checkpointed functions must pickle: no locks in the closure
        _STATE.update(dict(rdd.collect()))

    stream.map(lambda kv: (kv[1], 1)).updateStateByKey(update).foreachRDD(keep)
    run_until(ssc, lambda: _STATE == {"a": 3, "b": 2, "c": 1})
    assert any((tmp_path / "ckpt").iterdir())


def test_recovering_a_stream_from_a_checkpoint_is_refused_clearly():
    import pickle

    from dstream_exactly_once.core._driver_ref import DriverOnly, _resolve

    class Builder(DriverOnly):
        pass

    b = Builder()
    b._register()
    assert pickle.loads(pickle.dumps(b)) is b  # same driver process: the live object
    stub = _resolve("not-a-live-token", "DirectBatches")  # what a recovering process gets
    with pytest.raises(ConfigurationError, match="getOrCreate"):
        stub(None)


def test_stopping_the_context_closes_the_driver_admin_client(kafka, topic_name, sc):
    """The driver's metadata client stops with the StreamingContext instead of reconnecting forever."""
    kafka.create_topic(topic_name, 1)
    kafka.produce(topic_name, range(10), partition=0)
    ssc = StreamingContext(sc, 1)
    stream = KafkaUtils.createDirectStream(ssc, [topic_name], params(kafka))
    got = Collector()
    stream.foreachRDD(lambda rdd: got.values.extend(rdd.collect()))
    metadata = stream._build.planner.metadata
    assert not metadata.closed
    run_until(ssc, lambda: got.total() >= 10)  # ends with ssc.stop(stopSparkContext=False)
    assert metadata.closed
    with pytest.raises(KafkaUnavailableError, match="is closed"):
        metadata.topics()
