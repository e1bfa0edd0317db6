"""Riding out store outages with real servers (issue 17): the same driver continues after a Redis
or PostgreSQL SIGKILL + restart and the sum of 1..N is exact; an outage longer than the retry
budget, and a fenced driver, stop the stream with the library's typed error."""

from __future__ import annotations

import time
from typing import Callable

import pytest
from pyspark.streaming import StreamingContext

from dstream_exactly_once import (
    FencedError,
    KafkaUtils,
    RetryPolicy,
    StoreError,
    StoreUnavailableError,
    Writes,
    await_termination,
    open_store,
)

from ..helpers import eventually


def params(kafka):
    return {"bootstrap.servers": kafka.bootstrap, "auto.offset.reset": "earliest"}


def _sum_of_values(batch, rdd):
    return Writes().incr("n", "sum", rdd.map(lambda kv: int(kv[1])).sum()).incr("n", "count", rdd.count())


def _sum_per_partition(records, offset_range, batch):
    values = [int(v) for _, v in records]
    return Writes().incr("n", "sum", sum(values)).incr("n", "count", len(values))


def _reads(url: str, app_id: str, n: int) -> Callable[[], bool]:
    def done() -> bool:
        try:
            with open_store(url, app_id) as store:
                return store.get_value("n", "count") == n
        except StoreError:  # the server is down or starting
            return False
    return done


@pytest.mark.parametrize("kind", ["redis", "postgres"])
def test_the_same_driver_rides_out_a_store_restart(kind, kafka, topic_name, sc, redis_server, postgres_server,
                                                   redis_url, postgres_url, app_id):
    server = redis_server if kind == "redis" else postgres_server
    url = redis_url if kind == "redis" else postgres_url
    if kind == "postgres":
        with postgres_server.connect() as admin:  # keeps crash recovery short
            admin.execute("CHECKPOINT")
    kafka.create_topic(topic_name, 3)
    kafka.produce(topic_name, [str(i) for i in range(1, 101)], partitions=3)
    ssc = StreamingContext(sc, 1)
    stream = KafkaUtils.createExactlyOnceStream(ssc, params(kafka), [topic_name], store=url, app_id=app_id)
    # redis commits each batch on the driver, postgres each partition on the executors
    if kind == "redis":
        stream.commit_each_batch(_sum_of_values)
    else:
        stream.commit_each_partition(_sum_per_partition)
    ssc.start()
    try:
        eventually(_reads(url, app_id, 100), "first 100 numbers", 90)
        server.kill()
        kafka.produce(topic_name, [str(i) for i in range(101, 201)], partitions=3)
        time.sleep(4)  # batches are planned/committed against a dead server meanwhile
        server.start()
        eventually(_reads(url, app_id, 200), "all 200 numbers after the restart", 90)
        assert stream.committer.failed is None
        assert stream.await_termination(timeout=0.1) is False  # still running, nothing raised
    finally:
        ssc.stop(stopSparkContext=False, stopGraceFully=False)
    with open_store(url, app_id) as store:
        assert store.get_value("n", "sum") == 200 * 201 // 2 and store.get_value("n", "count") == 200
        assert store.current_epoch() == stream.epoch == 1


def test_an_outage_longer_than_the_budget_stops_with_store_unavailable(kafka, topic_name, sc, redis_server,
                                                                         redis_url, app_id):
    kafka.create_topic(topic_name, 2)
    kafka.produce(topic_name, [str(i) for i in range(1, 11)], partitions=2)
    ssc = StreamingContext(sc, 1)
    stream = KafkaUtils.createExactlyOnceStream(ssc, params(kafka), [topic_name], store=redis_url, app_id=app_id,
                                                store_retry=RetryPolicy(max_seconds=3, base_delay=0.2, max_delay=1))
    stream.commit_each_batch(_sum_of_values)
    ssc.start()
    try:
        eventually(_reads(redis_url, app_id, 10), "first 10 numbers", 90)
        redis_server.kill()
        started = time.monotonic()
        with pytest.raises(StoreUnavailableError):
            await_termination(ssc, timeout=60)
        assert time.monotonic() - started < 30
        assert isinstance(stream.committer.failed, StoreUnavailableError)
    finally:
        ssc.stop(stopSparkContext=False, stopGraceFully=False)
        redis_server.start()
    with open_store(redis_url, app_id) as store:
        assert store.get_value("n", "sum") == 55


def test_a_fenced_driver_stops_with_fenced_error_from_await_termination(kafka, topic_name, sc, tmp_path):
    kafka.create_topic(topic_name, 2)
    kafka.produce(topic_name, [str(i) for i in range(1, 11)], partitions=2)
    url = f"sqlite:///{tmp_path}/state.db"
    ssc = StreamingContext(sc, 1)
    stream = KafkaUtils.createExactlyOnceStream(ssc, params(kafka), [topic_name], store=url, app_id="fenced")
    stream.commit_each_batch(_sum_of_values)
    ssc.start()
    try:
        eventually(_reads(url, "fenced", 10), "first 10 numbers", 90)
        with open_store(url, "fenced") as other:
            assert other.start_epoch() == 2  # a newer driver took over
        fenced_at = time.monotonic()
        with pytest.raises(FencedError, match="epoch 1 is fenced"):
            stream.await_termination(timeout=60)
        # no new data: the idle zombie still learns it at its next batch (1 s), not at its next commit
        assert time.monotonic() - fenced_at < 15
    finally:
        ssc.stop(stopSparkContext=False, stopGraceFully=False)
    with open_store(url, "fenced") as store:
        assert store.get_value("n", "sum") == 55
