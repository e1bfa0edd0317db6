"""The task planner on Kafka streams, on real Kafka and Spark: an exactly-once batch over 40
partitions runs as a few packed tasks and commits every record once; ``offsetRanges()`` lists every
range; ``createDirectStream``/``createRDD`` keep one partition per range unless
``spark.streaming.kafka.tasks.pack=true``; a split range is read once across its pieces, and a task
can ask which ranges it holds."""

from __future__ import annotations

import uuid
from contextlib import contextmanager

import pytest
from pyspark.streaming import StreamingContext

from dstream_exactly_once import KafkaUtils, OffsetRange, current_offset_range
from dstream_exactly_once.stores import Writes, open_store
from dstream_exactly_once.streaming._task_context import current_pieces, current_ranges

from .streams import run_until

pytestmark = pytest.mark.integration

PARTITIONS, PER_PARTITION = 40, 10
N = PARTITIONS * PER_PARTITION


def _params(kafka):
    return {"bootstrap.servers": kafka.bootstrap, "auto.offset.reset": "earliest"}


@contextmanager
def _conf(sc, **values):
    """Spark conf keys set on the running context for the streams built inside (removed after)."""
    jconf = sc._jsc.sc().conf()
    for key, value in values.items():
        jconf.set(key, str(value))
    try:
        yield
    finally:
        for key in values:
            jconf.remove(key)


@pytest.fixture()
def forty(kafka, topic_name):
    kafka.create_topic(topic_name, PARTITIONS)
    kafka.produce(topic_name, range(1, N + 1), partitions=PARTITIONS)
    return topic_name


@pytest.mark.parametrize("pattern", ["commit_each_batch", "commit_each_partition"])
def test_exactly_once_stream_packs_forty_partitions_into_few_tasks(kafka, forty, sc, tmp_path, pattern):
    url, app = f"sqlite:///{tmp_path}/s.db", f"ktasks-{uuid.uuid4().hex[:6]}"
    ssc = StreamingContext(sc, 0.5)
    stream = KafkaUtils.createExactlyOnceStream(ssc, _params(kafka), [forty], store=url, app_id=app)
    shapes = []
    if pattern == "commit_each_batch":
        def per_batch(batch, rdd):
            shapes.append((rdd.getNumPartitions(), len(rdd.offsetRanges())))
            total, count = rdd.map(lambda kv: (int(kv[1]), 1)).fold((0, 0), lambda a, b: (a[0] + b[0], a[1] + b[1]))
            return Writes().incr("n", "sum", total).incr("n", "count", count)

        stream.commit_each_batch(per_batch)
    else:
        def per_task(records, ranges, batch):
            numbers = [int(v) for _k, v in records]
            assert isinstance(ranges, tuple), ranges  # pack=True: always the tuple of the task's ranges
            held = ranges
            assert tuple(current_ranges()) == held  # the task knows what it holds
            return Writes().incr("n", "sum", sum(numbers)).incr("n", "count", len(numbers)).incr("n", "tasks", 1) \
                .incr("n", "ranges", len(held))

        stream.commit_each_partition(per_task, pack=True)

    def read_rows():  # progress records (numInputRows) follow the commits
        return sum(p["numInputRows"] for p in stream.recentProgress if p["numInputRows"] > 0)

    def done():
        with open_store(url, app) as s:
            return s.get_values("n").get("count", 0) >= N and read_rows() >= N

    run_until(ssc, done, timeout=90)
    with open_store(url, app) as s:
        values = s.get_values("n")
        assert len(s.load_positions()) == PARTITIONS
    assert values["count"] == N and values["sum"] == N * (N + 1) // 2
    assert read_rows() == N
    first = next(p for p in stream.recentProgress if p["numInputRows"] > 0)["sources"][0]
    assert first["numRanges"] == PARTITIONS and 1 <= first["numTasks"] < PARTITIONS // 4  # the task plan's size
    if pattern == "commit_each_batch":
        partitions, ranges = shapes[0]
        assert ranges == PARTITIONS  # offsetRanges() lists every range
        assert partitions < PARTITIONS // 4  # packed: about sc.defaultParallelism tasks
        assert partitions == first["numTasks"]
    else:
        assert values["ranges"] == PARTITIONS and values["tasks"] < PARTITIONS // 4


def test_direct_stream_keeps_one_partition_per_range_unless_packing_is_asked_for(kafka, forty, sc):
    def run(seen, shapes):
        ssc = StreamingContext(sc, 0.5)
        stream = KafkaUtils.createDirectStream(ssc, [forty], _params(kafka))

        def collect(rdd):
            ranges = rdd.offsetRanges()
            if not any(r.count() for r in ranges):
                return
            parts = rdd.glom().collect()
            shapes.append((rdd.getNumPartitions(), ranges, parts))
            seen.extend(int(v) for part in parts for _k, v in part)

        stream.foreachRDD(collect)
        run_until(ssc, lambda: len(seen) >= N, timeout=90)

    seen, shapes = [], []
    run(seen, shapes)
    assert sorted(seen) == list(range(1, N + 1))
    partitions, ranges, parts = shapes[0]
    assert partitions == len(ranges) == PARTITIONS  # the Spark-2.4 layout: partition i reads offsetRanges()[i]
    for r, part in zip(ranges, parts, strict=True):
        assert len(part) == r.count()

    seen, shapes = [], []
    with _conf(sc, **{"spark.streaming.kafka.tasks.pack": "true"}):
        run(seen, shapes)
    assert sorted(seen) == list(range(1, N + 1))
    partitions, ranges, _parts = shapes[0]
    assert len(ranges) == PARTITIONS and partitions < PARTITIONS // 4


def test_create_rdd_packs_and_splits_when_asked_and_tasks_know_their_ranges(kafka, topic_name, sc):
    kafka.create_topic(topic_name, 3)
    kafka.produce(topic_name, range(300), partitions=3)  # value i -> partition i % 3
    ranges = [OffsetRange(topic_name, 0, 0, 100), OffsetRange(topic_name, 1, 0, 10), OffsetRange(topic_name, 2, 0, 10)]
    plain = KafkaUtils.createRDD(sc, _params(kafka), ranges)
    assert plain.getNumPartitions() == 3
    assert plain.mapPartitions(lambda _: [current_offset_range()]).collect() == ranges

    conf = {"spark.streaming.kafka.tasks.pack": "true", "spark.streaming.kafka.tasks.target.size": "40",
            "spark.streaming.kafka.tasks.split.size": "30"}
    with _conf(sc, **conf):
        rdd = KafkaUtils.createRDD(sc, _params(kafka), ranges)
    assert rdd.offsetRanges() == ranges
    # partition 0's 100 records in 4 pieces of 25 (25 + 25 > 40: one task each), partition 1's 10
    # packed with the last piece (35), partition 2's alone (45 > 40)
    assert rdd.getNumPartitions() == 5
    values = rdd.map(lambda kv: int(kv[1])).collect()
    assert sorted(values) == sorted([3 * i for i in range(100)] + [3 * i + 1 for i in range(10)]
                                    + [3 * i + 2 for i in range(10)])

    def shape(_records):
        pieces = current_pieces()
        try:
            one = current_offset_range()
        except LookupError:
            one = None
        return [([(p.range.partition, p.start, p.end) for p in pieces], one)]

    shapes = rdd.mapPartitions(shape).collect()
    assert shapes[0] == ([(0, 0, 25)], OffsetRange(topic_name, 0, 0, 25))  # a piece: its offsets
    assert shapes[3] == ([(0, 75, 100), (1, 0, 10)], None)  # packed: current_ranges() instead
    assert shapes[4] == ([(2, 0, 10)], ranges[2])


def test_a_bad_task_option_names_the_key_and_value_before_anything_runs(kafka, forty, sc, tmp_path):
    from dstream_exactly_once.errors import ConfigurationError

    url = tmp_path / "never.db"
    ssc = StreamingContext(sc, 0.5)
    with _conf(sc, **{"spark.streaming.kafka.tasks.target.count": "0"}):
        with pytest.raises(ConfigurationError, match=r"spark\.streaming\.kafka\.tasks\.target\.count.*'0'"):
            KafkaUtils.createExactlyOnceStream(ssc, _params(kafka), [forty], store=f"sqlite:///{url}", app_id="a")
    assert not url.exists()
