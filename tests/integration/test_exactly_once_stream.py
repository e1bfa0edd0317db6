"""createExactlyOnceStream in-process: both output patterns, raw SQL, monitoring mirror, bad input."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from pyspark.streaming import StreamingContext

from dstream_exactly_once import (
    ConfigurationError,
    KafkaUtils,
    OffsetRangeError,
    TopicAndPartition,
)
from dstream_exactly_once.stores import Writes, open_store

from ..helpers import eventually
from .streams import run_until


def params(kafka):
    return {"bootstrap.servers": kafka.bootstrap, "auto.offset.reset": "earliest"}


def _words(kafka, topic, n=200):
    kafka.create_topic(topic, 3)
    lines = [f"w{i % 7} w{i % 3}" for i in range(n)]
    kafka.produce(topic, lines, partitions=3)
    expected = {}
    for line in lines:
        for w in line.split():
            expected[w] = expected.get(w, 0) + 1
    return expected


def test_commit_each_batch_word_count_with_raw_sql_and_monitor_group(kafka, topic_name, sc, tmp_path):
    expected = _words(kafka, topic_name)
    url = f"sqlite:///{tmp_path}/wc.db"
    group = "monitor-" + uuid.uuid4().hex[:6]
    ssc = StreamingContext(sc, 1)
    stream = KafkaUtils.createExactlyOnceStream(ssc, params(kafka), [topic_name], store=url, app_id="wc",
                                                monitor_group=group)
    import sqlite3

    with sqlite3.connect(str(tmp_path / "wc.db")) as conn:  # the user's own table beside the store's
        conn.execute("CREATE TABLE batch_audit (batch_id INTEGER PRIMARY KEY, n INTEGER)")

    def per_batch(batch, rdd):
        w = Writes()
        counts = rdd.flatMap(lambda kv: kv[1].split()).countByValue()
        for word, n in counts.items():
            w.incr("words", word, n)
        return w.execute("INSERT INTO batch_audit (batch_id, n) VALUES (?, ?)", (batch.batch_id, sum(counts.values())))

    stream.commit_each_batch(per_batch)
    store = open_store(url, "wc")
    run_until(ssc, lambda: sum(store.get_values("words").values()) >= 400)
    assert store.get_values("words") == expected
    with sqlite3.connect(str(tmp_path / "wc.db")) as conn:
        audit = conn.execute("SELECT batch_id, n FROM batch_audit ORDER BY batch_id").fetchall()
    assert sum(n for _, n in audit) == 400
    assert [b for b, _ in audit] == list(range(len(audit)))
    # the monitoring mirror shows the committed offsets in the consumer group
    admin = kafka.admin()
    deadline = time.time() + 20
    while time.time() < deadline:
        got = admin.list_group_offsets({group: None}).get(group, {})
        mirrored = {TopicAndPartition(tp.topic, tp.partition): m.offset for tp, m in got.items()}
        if mirrored == store.load_offsets():
            break
        time.sleep(0.5)
    assert mirrored == store.load_offsets() and len(mirrored) == 3


@pytest.mark.parametrize("kind", ["postgres", "redis"])
def test_commit_each_partition_word_count(kind, kafka, topic_name, sc, postgres_url, redis_url):
    expected = _words(kafka, topic_name)
    url = postgres_url if kind == "postgres" else redis_url
    app = "wcp-" + uuid.uuid4().hex[:6]
    ssc = StreamingContext(sc, 1)
    stream = KafkaUtils.createExactlyOnceStream(ssc, params(kafka), {TopicAndPartition(topic_name, p): 0
                                                                     for p in range(3)},
                                                store=url, app_id=app)

    def per_partition(records, offset_range, batch):
        w = Writes()
        for _, line in records:
            for word in line.split():
                w.incr("words", word)
        ranges = offset_range if isinstance(offset_range, tuple) else (offset_range,)  # a packed task's ranges
        return w.put_batch_rows("seen", [{"range": list(r.toTuple())} for r in ranges])

    stream.commit_each_partition(per_partition)
    store = open_store(url, app)
    run_until(ssc, lambda: sum(store.get_values("words").values()) >= 400)
    assert store.get_values("words") == expected
    ranges = [tuple(r["range"]) for rows in store.get_batch_rows("seen").values() for r in rows]
    assert sum(u - f for _, _, f, u in ranges) == 200 and len(set(ranges)) == len(ranges)


def test_output_function_error_names_batch_and_commits_nothing(kafka, topic_name, sc, tmp_path):
    kafka.create_topic(topic_name, 2)
    kafka.produce(topic_name, range(10), partitions=2)
    url = f"sqlite:///{tmp_path}/err.db"
    ssc = StreamingContext(sc, 1)
    stream = KafkaUtils.createExactlyOnceStream(ssc, params(kafka), [topic_name], store=url, app_id="err")
    errors = []
    lock = threading.Lock()

    def boom(batch, rdd):
        raise RuntimeError("user bug")

    stream.commit_each_batch(boom)
    stream.foreachRDD(lambda rdd: None)
    original = stream.committer.fail

    def record(exc):
        with lock:
            errors.append(exc)
        original(exc)

    stream.committer.fail = record
    run_until(ssc, lambda: bool(errors))
    err = errors[0]
    assert type(err).__name__ == "OutputError"
    assert "batch 0" in str(err) and f"'{topic_name}'" in str(err) and "user bug" in str(err)
    with open_store(url, "err") as s:
        assert s.load_offsets() == {} and s.last_committed_batch_id() is None
        assert [b.batch_id for b in s.pending_batches()] == [0]


def test_bad_input_before_anything_is_written(kafka, topic_name, sc, tmp_path):
    kafka.create_topic(topic_name, 1)
    kafka.produce(topic_name, range(5), partition=0)
    ssc = StreamingContext(sc, 1)
    url = f"sqlite:///{tmp_path}/bad.db"
    with pytest.raises(ConfigurationError, match="unknown store URL scheme|scheme"):
        KafkaUtils.createExactlyOnceStream(ssc, params(kafka), [topic_name], store="mongo://x", app_id="a")
    with pytest.raises(ConfigurationError, match="app_id"):
        KafkaUtils.createExactlyOnceStream(ssc, params(kafka), [topic_name], store=url)
    # offsets in the store beyond the broker's log end
    with open_store(url, "ahead") as s:
        from dstream_exactly_once.kafka._offsets import OffsetRange
        from dstream_exactly_once.stores import PlannedBatch

        e = s.start_epoch()
        b = PlannedBatch(0, 0, (OffsetRange(topic_name, 0, 0, 50),))
        s.log_batch(e, b)
        s.commit(e, b, Writes())
    with pytest.raises(OffsetRangeError, match="beyond the log end 5"):
        KafkaUtils.createExactlyOnceStream(ssc, params(kafka), [topic_name], store=url, app_id="ahead")
    with pytest.raises(ConfigurationError, match="cannot be stored as JSON"):
        Writes().put("ns", "k", object())


def test_several_uncommitted_batches_are_replayed_in_order_with_their_ranges(kafka, topic_name, sc, tmp_path):
    """A crashed driver left batches 0..2 planned (offset log) but uncommitted, as Spark's job
    generator plans ahead of running jobs: they are replayed first, in order, with the same ids and
    ranges and the same labels, before anything new is planned."""
    from dstream_exactly_once.kafka._offsets import OffsetRange
    from dstream_exactly_once.sinks import make_label
    from dstream_exactly_once.stores import PlannedBatch

    kafka.create_topic(topic_name, 2)
    kafka.produce(topic_name, range(100), partitions=2)
    url = f"sqlite:///{tmp_path}/replay.db"
    logged = [PlannedBatch(i, 1000 * (i + 1), (OffsetRange(topic_name, 0, 10 * i, 10 * i + 10),
                                               OffsetRange(topic_name, 1, 5 * i, 5 * i + 5)))
              for i in range(3)]
    with open_store(url, "replay") as s:
        crashed_epoch = s.start_epoch()
        for b in logged:
            s.log_batch(crashed_epoch, b)
    ssc = StreamingContext(sc, 1)
    stream = KafkaUtils.createExactlyOnceStream(ssc, params(kafka), [topic_name], store=url, app_id="replay")
    with open_store(url, "replay") as s:
        assert s.current_epoch() == crashed_epoch  # the epoch waits for ssc.start()
    seen = []
    lock = threading.Lock()

    def per_batch(batch, rdd):
        with lock:
            seen.append((batch.batch_id, batch.ranges, rdd.offsetRanges()))
        w = Writes()
        for pid in range(len(batch.ranges)):
            w.add_label(make_label("replay", batch.batch_id, pid))
        return w.incr("t", "n", rdd.count())

    stream.commit_each_batch(per_batch)
    store = open_store(url, "replay")
    run_until(ssc, lambda: store.get_value("t", "n") == 100)
    assert stream.epoch == crashed_epoch + 1
    assert [(b, r) for b, r, _ in seen[:3]] == [(b.batch_id, b.ranges) for b in logged]
    assert all(list(r) == rr for _, r, rr in seen)
    assert [b for b, _, _ in seen] == list(range(len(seen)))
    assert all(store.has_label(make_label("replay", b, p)) for b in range(3) for p in range(2))
    # the first new batch starts where the replayed ones ended
    assert seen[3][1][0].fromOffset == 30 and seen[3][1][1].fromOffset == 15


def test_direct_stream_made_exactly_once_with_the_explicit_helper(kafka, topic_name, sc, tmp_path):
    from dstream_exactly_once import exactly_once

    kafka.create_topic(topic_name, 2)
    kafka.produce(topic_name, range(1, 101), partitions=2)
    url = f"sqlite:///{tmp_path}/helper.db"
    ssc = StreamingContext(sc, 1)
    direct = KafkaUtils.createDirectStream(ssc, [topic_name], params(kafka))
    stream = exactly_once(direct, url, "helper")
    stream.commit_each_batch(lambda batch, rdd: Writes().incr("t", "sum", rdd.map(lambda kv: int(kv[1])).sum()))
    store = open_store(url, "helper")
    run_until(ssc, lambda: store.get_value("t", "sum") == 5050)
    assert store.get_value("t", "sum") == 5050
    with pytest.raises(ConfigurationError, match="needs a stream from KafkaUtils.createDirectStream"):
        exactly_once(stream, url, "helper")
    with pytest.raises(ConfigurationError, match="converted by exactly_once"):
        direct._rdd_for(__import__("datetime").datetime(2000, 1, 1))


def test_foreach_batch_applies_each_batch_id_once(kafka, topic_name, sc, tmp_path):
    from dstream_exactly_once import BatchIdSink

    kafka.create_topic(topic_name, 2)
    kafka.produce(topic_name, range(60), partitions=2)
    url = f"sqlite:///{tmp_path}/ss.db"
    calls = []

    class CountingSink(BatchIdSink):
        def add_batch(self, batch_id, data):
            calls.append(batch_id)
            return Writes().incr("t", "n", data.count()).put("ids", str(batch_id), True)

    sc._conf.set("spark.streaming.kafka.maxRatePerPartition", "10")
    try:
        ssc = StreamingContext(sc, 1)
        stream = KafkaUtils.createExactlyOnceStream(ssc, params(kafka), [topic_name], store=url, app_id="ss")
        stream.foreach_batch(CountingSink())
        store = open_store(url, "ss")
        run_until(ssc, lambda: store.get_value("t", "n") == 60)
    finally:
        sc._conf.set("spark.streaming.kafka.maxRatePerPartition", "0")
    assert calls == list(range(len(calls))) and len(calls) >= 3
    assert sorted(store.get_values("ids"), key=int) == [str(i) for i in calls]
    ssc = StreamingContext(sc, 1)
    with pytest.raises(ConfigurationError, match="BatchIdSink or a function"):
        KafkaUtils.createExactlyOnceStream(ssc, params(kafka), [topic_name], store=url,
                                           app_id="ss").foreach_batch(42)  # type: ignore[arg-type]


def test_old_offset_log_entries_are_dropped_and_the_stream_resumes(kafka, topic_name, sc, tmp_path):
    """retain_batches=3: after 12+ batches only the newest committed entries stay in the offset
    and commit logs, every result stays, and a new driver resumes exactly where the last left off."""
    kafka.create_topic(topic_name, 1)
    kafka.produce(topic_name, range(1, 31), partition=0)
    url = f"sqlite:///{tmp_path}/retain.db"
    ssc = StreamingContext(sc, 0.5)
    with pytest.raises(ConfigurationError, match="'retain_batches' must be an integer >= 1, got 0"):
        KafkaUtils.createExactlyOnceStream(ssc, params(kafka), [topic_name], store=url, app_id="r", retain_batches=0)
    store = open_store(url, "r")
    assert store.last_logged_batch_id() is None  # the refused stream wrote nothing

    def per_batch(batch, rdd):
        return Writes().incr("t", "sum", sum(int(v) for _, v in rdd.collect())).put_batch_rows("b", [batch.batch_id])

    sc._conf.set("spark.streaming.kafka.maxRatePerPartition", "4")  # 2 records per 0.5 s batch
    try:
        stream = KafkaUtils.createExactlyOnceStream(ssc, params(kafka), [topic_name], store=url, app_id="r",
                                                    retain_batches=3)
        stream.commit_each_batch(per_batch)
        run_until(ssc, lambda: (store.last_committed_batch_id() or 0) >= 11)
    finally:
        sc._conf.set("spark.streaming.kafka.maxRatePerPartition", "0")
    assert stream.committer.purged >= 8
    last = store.last_committed_batch_id()
    assert last is not None and last >= 11
    assert store.get_batch(0) is None and store.get_batch(7) is None and not store.is_committed(7)
    assert store.get_batch(last) is not None and store.is_committed(last)
    assert sorted(store.get_batch_rows("b")) == list(range(last + 1))  # results are never dropped
    ssc2 = StreamingContext(sc, 0.5)
    KafkaUtils.createExactlyOnceStream(ssc2, params(kafka), [topic_name], store=url, app_id="r",
                                       retain_batches=3).commit_each_batch(per_batch)
    run_until(ssc2, lambda: store.get_value("t", "sum") == sum(range(1, 31)))
    assert store.get_value("t", "sum") == 465 and store.load_offsets() == {TopicAndPartition(topic_name, 0): 30}


def test_create_direct_stream_argument_order_and_keywords_are_accepted(kafka, topic_name, sc, tmp_path):
    """(ssc, topics, kafkaParams) as createDirectStream has them, and keywords, both work; the
    foreach_batch and commit_each_partition signatures shown in the README are the ones called."""
    kafka.create_topic(topic_name, 2)
    kafka.produce(topic_name, [str(i) for i in range(1, 101)], partitions=2)
    url = f"sqlite:///{tmp_path}/order.db"
    ssc = StreamingContext(sc, 1)
    stream = KafkaUtils.createExactlyOnceStream(ssc, [topic_name], params(kafka), store=url, app_id="order")
    seen_ids = []

    def add_batch(batch_id, rdd):
        seen_ids.append(batch_id)
        return Writes().incr("sum", "total", sum(int(v) for _, v in rdd.collect()))

    stream.foreach_batch(add_batch)
    store = open_store(url, "order")
    run_until(ssc, lambda: store.get_value("sum", "total") == 5050)
    assert seen_ids == sorted(set(seen_ids)) and seen_ids[0] == 0

    ssc2 = StreamingContext(sc, 1)
    by_keyword = KafkaUtils.createExactlyOnceStream(ssc=ssc2, topics=[topic_name], kafkaParams=params(kafka),
                                                    store=url, app_id="order-kw")

    def per_partition(records, offset_range, batch):
        return Writes().incr("sum", "total", sum(int(v) for _, v in records))

    by_keyword.commit_each_partition(per_partition)
    store_kw = open_store(url, "order-kw")
    run_until(ssc2, lambda: store_kw.get_value("sum", "total") == 5050)


def test_offset_log_in_commit_logs_each_batch_with_its_commit(kafka, topic_name, sc, tmp_path):
    """``commit_each_batch(offset_log="in_commit")``: batches logged ahead by an earlier driver are
    still replayed with their ranges; new batches enter the offset log only with their commit, so
    at any moment every logged batch is committed; bad values and a second output are refused
    before anything is written."""
    from dstream_exactly_once.kafka._offsets import OffsetRange
    from dstream_exactly_once.stores import PlannedBatch

    kafka.create_topic(topic_name, 2)
    kafka.produce(topic_name, range(100), partitions=2)
    url = f"sqlite:///{tmp_path}/one-tx.db"
    logged = PlannedBatch(0, 1000, (OffsetRange(topic_name, 0, 0, 10), OffsetRange(topic_name, 1, 0, 5)))
    with open_store(url, "one-tx") as s:
        s.log_batch(s.start_epoch(), logged)
    ssc = StreamingContext(sc, 1)
    stream = KafkaUtils.createExactlyOnceStream(ssc, params(kafka), [topic_name], store=url, app_id="one-tx")
    with pytest.raises(ConfigurationError, match=r"offset_log must be one of 'ahead', 'in_commit', got 'later'"):
        stream.commit_each_batch(lambda b, rdd: Writes(), offset_log="later")
    store = open_store(url, "one-tx")
    seen, pending_seen = [], []

    def per_batch(batch, rdd):
        seen.append((batch.batch_id, batch.ranges))
        pending_seen.append([b.batch_id for b in store.pending_batches()])
        return Writes().incr("t", "n", rdd.count())

    stream.commit_each_batch(per_batch, offset_log="in_commit")
    with pytest.raises(ConfigurationError, match="must be the stream's only output"):
        stream.foreach_batch(lambda batch_id, rdd: None)
    run_until(ssc, lambda: store.get_value("t", "n") == 100)
    assert seen[0] == (0, logged.ranges)  # the batch logged ahead is replayed with its ranges
    assert [b for b, _ in seen] == list(range(len(seen)))
    assert pending_seen[0] == [0] and all(p == [] for p in pending_seen[1:])  # new batches: not logged ahead
    assert store.pending_batches() == []
    assert store.last_logged_batch_id() == store.last_committed_batch_id() == len(seen) - 1
    # the entry keeps the ranges with data (both partitions have positions from batch 0 on)
    assert store.get_batch(1).ranges == tuple(r for r in seen[1][1] if r.count())
    assert store.load_offsets() == {TopicAndPartition(topic_name, 0): 50, TopicAndPartition(topic_name, 1): 50}


@pytest.mark.parametrize("catch_up", [True, False])
def test_catch_up_lets_a_slow_stream_take_its_backlog_in_fewer_batches_exactly_once(catch_up, kafka, topic_name, sc,
                                                                                    tmp_path, caplog):
    """Batches that take over 1.5 s at a 0.2 s interval while a producer writes for 6 s: with
    ``spark.streaming.exactlyOnce.catchUp`` the batches generated behind an uncommitted one plan nothing
    and the next takes the backlog, so the stream commits a few large batches; without it every
    interval queues a batch of its own and the driver warns that the queue does not shrink."""
    kafka.create_topic(topic_name, 4)
    url = f"sqlite:///{tmp_path}/catchup.db"
    sc._conf.set("spark.streaming.exactlyOnce.catchUp", str(catch_up).lower())
    try:
        ssc = StreamingContext(sc, 0.2)
        stream = KafkaUtils.createExactlyOnceStream(ssc, params(kafka), [topic_name], store=url, app_id="catchup")
    finally:
        sc._conf.set("spark.streaming.exactlyOnce.catchUp", "false")
    committed = []

    def slow(batch, rdd):
        values = rdd.map(lambda kv: int(kv[1])).collect()
        time.sleep(1.5)
        committed.append(len(values))
        return Writes().incr("seen", "n", len(values)).incr("seen", "sum", sum(values))

    stream.commit_each_batch(slow)
    total = 3_000

    def write() -> None:
        for start in range(0, total, 100):  # 100 records every 0.2 s for 6 s
            kafka.produce(topic_name, [str(i) for i in range(start, start + 100)], partitions=4)
            time.sleep(0.2)

    store = open_store(url, "catchup")
    producer = threading.Thread(target=write)
    with caplog.at_level("WARNING", logger="dstream_exactly_once.engine._committer"):
        ssc.start()
        try:
            producer.start()
            producer.join()
            if catch_up:  # the backlog drains in a few batches
                eventually(lambda: store.get_values("seen").get("n") == total, "every record committed", 60)
            else:  # one queued batch per 0.2 s interval: the queue grows while batches take 1.5 s
                eventually(lambda: any("planned and not committed" in r.getMessage() for r in caplog.records),
                           "the warning about the growing queue", 60)
        finally:
            ssc.stop(stopSparkContext=False, stopGraceFully=False)
    deferred = stream.committer.deferred
    warned = [r.getMessage() for r in caplog.records if "planned and not committed" in r.getMessage()]
    if catch_up:
        assert store.get_values("seen") == {"n": total, "sum": total * (total - 1) // 2}
        assert deferred >= len(committed) - 1 > 0  # batches behind a running one planned nothing
        assert len(committed) <= 10, committed  # 6 s of records at 1.5 s or more per batch: a few batches
        assert not warned
    else:
        assert deferred == 0
        assert len(warned) == 1 and "spark.streaming.exactlyOnce.catchUp=true" in warned[0]
