"""The optional confluent-kafka (librdkafka) reader against the real broker: the same records as the
kafka-python reader for the same ranges (plain, compressed, transactional with aborted records and
markers, deleted offsets, retries), then on Spark through ``spark.streaming.kafka.reader``."""

from __future__ import annotations

import contextlib
import uuid
from typing import Iterator

import pytest
from pyspark.streaming import StreamingContext

from dstream_exactly_once import ConfigurationError, DataLossError, KafkaUtils, OffsetRange
from dstream_exactly_once.kafka import _reader_confluent as reader_confluent
from dstream_exactly_once.kafka import _reader_kafka_python as reader_kafka_python
from dstream_exactly_once.kafka._consumers import ConsumerCache
from dstream_exactly_once.kafka._params import parse_kafka_params
from dstream_exactly_once.kafka._reader_choice import READER_KEY
from dstream_exactly_once.stores import Writes, open_store

from .streams import run_until


def _flat(blocks, metadata):
    if not metadata:
        return [rec for b in blocks for rec in zip(b.offsets, b.keys, b.values, strict=True)]
    return [rec for b in blocks for rec in zip(b.offsets, b.keys, b.values, b.timestamps, b.timestamp_types,
                                                 b.headers, strict=True)]


def _both(config, ranges, metadata=True, **kw):
    """(kafka-python records, confluent-kafka records) of ``ranges``, read range by range."""
    py = [_flat(reader_kafka_python.read_range(config, r, metadata=metadata, **kw), metadata) for r in ranges]
    ck = [_flat(reader_confluent.read_range(config, r, metadata=metadata, **kw), metadata) for r in ranges]
    return py, ck


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_same_records_as_kafka_python_with_and_without_metadata(kafka, topic_name, compression):
    kafka.create_topic(topic_name, 2)
    producer = kafka.producer(compression_type=compression, linger_ms=20, batch_size=32 * 1024)
    for i in range(4000):
        producer.send(topic_name, key=None if i % 7 == 0 else f"k{i}".encode(),
                      value=None if i % 11 == 0 and i % 7 else b"" if i % 13 == 0 else (f"v{i}-" * (i % 40)).encode(),
                      headers=[("h", str(i).encode()), ("e", b"")] if i % 5 == 0 else [], partition=i % 2)
    producer.flush()
    producer.close()
    ends = {p: hi for p, (_lo, hi) in kafka.offsets(topic_name).items()}
    assert ends == {0: 2000, 1: 2000}
    ranges = [OffsetRange(topic_name, 0, 0, 777), OffsetRange(topic_name, 0, 777, 2000),
              OffsetRange(topic_name, 1, 1500, 1501), OffsetRange(topic_name, 1, 3, 1999)]
    config = parse_kafka_params({"bootstrap.servers": kafka.bootstrap})
    for metadata in (False, True):
        py, ck = _both(config, ranges, metadata=metadata)
        assert [len(x) for x in ck] == [777, 1223, 1, 1996]
        assert ck == py
    headers = [rec[5] for rec in _both(config, ranges[:1])[1][0]]
    assert headers[0] == [("h", b"0"), ("e", b"")] and headers[1] == []


def test_transactional_topic_same_records_under_both_isolation_levels(kafka, topic_name):
    kafka.create_topic(topic_name, 1)
    kafka.produce_transactional(topic_name, [(["a", "b"], True), (["x", "y"], False), (["c"], True),
                                             (["z"], False)])
    # a,b,commit(2) x,y,abort(5) c,commit(7) z,abort(9) -> 10 offsets; the log ends on an abort marker
    assert kafka.offsets(topic_name)[0] == (0, 10)
    ranges = [OffsetRange(topic_name, 0, 0, 3), OffsetRange(topic_name, 0, 0, 10), OffsetRange(topic_name, 0, 3, 6),
              OffsetRange(topic_name, 0, 2, 8), OffsetRange(topic_name, 0, 7, 10), OffsetRange(topic_name, 0, 1, 7)]
    committed = parse_kafka_params({"bootstrap.servers": kafka.bootstrap, "isolation.level": "read_committed"})
    py, ck = _both(committed, ranges)
    assert ck == py
    assert [[v for _, _, v, *_ in x] for x in ck] == [[b"a", b"b"], [b"a", b"b", b"c"], [], [b"c"], [], [b"b", b"c"]]
    uncommitted = parse_kafka_params({"bootstrap.servers": kafka.bootstrap})
    py, ck = _both(uncommitted, ranges)
    assert ck == py
    assert [o for o, *_ in ck[1]] == [0, 1, 3, 4, 6, 8]


def test_deleted_first_offsets_fail_or_are_skipped_and_counted(kafka, topic_name):
    kafka.create_topic(topic_name, 1)
    kafka.produce(topic_name, range(60), partition=0)
    kafka.delete_records(topic_name, {0: 20})
    config = parse_kafka_params({"bootstrap.servers": kafka.bootstrap})
    with pytest.raises(DataLossError,
                       match=rf"offsets \[5, 20\) of {topic_name}-0 were deleted \(log start is now 20\)"):
        list(reader_confluent.read_range(config, OffsetRange(topic_name, 0, 5, 40)))
    skipped: list = []
    blocks = list(reader_confluent.read_range(config, OffsetRange(topic_name, 0, 5, 40), fail_on_data_loss=False,
                                              on_data_loss=skipped.append))
    assert [d.lost for d in skipped] == [15]
    assert [int(v) for b in blocks for v in b.values] == list(range(20, 40))
    skipped.clear()  # the whole range is gone: everything is counted, nothing read
    assert list(reader_confluent.read_range(config, OffsetRange(topic_name, 0, 2, 12), fail_on_data_loss=False,
                                            on_data_loss=skipped.append)) == []
    assert [d.lost for d in skipped] == [10]
    py_skipped: list = []
    py, ck = _both(config, [OffsetRange(topic_name, 0, 0, 60)], fail_on_data_loss=False,
                   on_data_loss=py_skipped.append)
    assert ck == py and len(ck[0]) == 40 and [d.lost for d in py_skipped] == [20, 20]  # one report per reader


def test_a_retry_gets_a_fresh_consumer_and_reads_the_same_records(kafka, topic_name):
    kafka.create_topic(topic_name, 1)
    kafka.produce(topic_name, range(100), partition=0)
    config = parse_kafka_params({"bootstrap.servers": kafka.bootstrap})
    cache = ConsumerCache(create=reader_confluent._Consumer, close=reader_confluent._close)
    r = OffsetRange(topic_name, 0, 10, 90)
    try:
        first = _flat(reader_confluent.read_range(config, r, cache=cache), False)
        again = _flat(reader_confluent.read_range(config, r, cache=cache), False)
        assert cache.created == 1  # the idle consumer was reused
        retry = _flat(reader_confluent.read_range(config, r, cache=cache, attempt=1), False)
        assert cache.created == 2  # attempt > 0: a fresh consumer
        assert first == again == retry and [int(v) for _, _, v in retry] == list(range(10, 90))
        # a read abandoned half-way (the task failed) does not put its consumer back
        it = reader_confluent.read_range(config, r, cache=cache)
        next(it)
        it.close()
        assert cache.created == 2 and len(cache._items) == 0
    finally:
        cache.clear()


@contextlib.contextmanager
def _spark_conf(sc, key: str, value: str) -> Iterator[None]:
    """Set a key on the session SparkContext's live conf for one test (read by the driver at creation)."""
    sc._conf.set(key, value)
    try:
        yield
    finally:
        sc._conf._jconf.remove(key)


def _read_by_confluent(topic):
    def probe(records):
        n = sum(1 for _ in records)
        from dstream_exactly_once.kafka._reader_confluent import CONSUMERS

        return [(n, any(k[2] == topic for k in CONSUMERS._items))]
    return probe


def test_spark_create_rdd_and_exactly_once_stream_with_the_confluent_reader(kafka, topic_name, sc, tmp_path):
    kafka.create_topic(topic_name, 3)
    lines = [f"w{i % 7} w{i % 3}" for i in range(300)]
    kafka.produce(topic_name, lines, partitions=3)
    expected: dict = {}
    for line in lines:
        for w in line.split():
            expected[w] = expected.get(w, 0) + 1
    params = {"bootstrap.servers": kafka.bootstrap, "auto.offset.reset": "earliest"}
    ranges = [OffsetRange(topic_name, p, 0, 100) for p in range(3)]
    with _spark_conf(sc, READER_KEY, "rdkafka"):
        with pytest.raises(ConfigurationError, match=r"spark.streaming.kafka.reader must be one of 'kafka-python', "
                                                     r"'confluent-kafka', got 'rdkafka'"):
            KafkaUtils.createRDD(sc, params, ranges)
    with _spark_conf(sc, READER_KEY, "confluent-kafka"):
        rdd = KafkaUtils.createRDD(sc, params, ranges)
        assert rdd.count() == 300
        assert rdd.mapPartitions(_read_by_confluent(topic_name)).collect() == [(100, True)] * 3
        assert sorted(v for _, v in rdd.collect()) == sorted(lines)

        url = f"sqlite:///{tmp_path}/ck.db"
        app = "ck-" + uuid.uuid4().hex[:6]
        ssc = StreamingContext(sc, 1)
        stream = KafkaUtils.createExactlyOnceStream(ssc, params, [topic_name], store=url, app_id=app)
        assert stream is not None

        probes: list = []

        def per_batch(batch, rdd):
            probes.extend(ok for n, ok in rdd.mapPartitions(_read_by_confluent(topic_name)).collect() if n)
            w = Writes()
            for word, n in rdd.flatMap(lambda kv: kv[1].split()).countByValue().items():
                w.incr("words", word, n)
            return w

        stream.commit_each_batch(per_batch)
        store = open_store(url, app)
        run_until(ssc, lambda: sum(store.get_values("words").values()) >= 600)
    assert store.get_values("words") == expected
    assert probes and all(probes)  # every non-empty batch partition was read by the confluent reader
    assert {tp.partition: off for tp, off in store.load_offsets().items()} == {0: 100, 1: 100, 2: 100}
