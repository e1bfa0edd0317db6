"""Reading through the broker's SASL_PLAINTEXT listener (PLAIN mechanism), driver and executors."""

from __future__ import annotations

import threading
import time
import traceback

import pytest
from pyspark.streaming import StreamingContext

from dstream_exactly_once import KafkaAuthError, KafkaUnavailableError, KafkaUtils, OffsetRange

from .streams import run_until

WRONG_PASSWORD = "not-alice-secret-9f3b"
AUTH_TIMEOUT_S = 40.0  # bootstrap timeout (10 s) + the direct credentials check, with headroom


def sasl_params(kafka, user="alice", password="alice-secret", **extra):
    return {"bootstrap.servers": kafka.sasl_bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": password,
            "auto.offset.reset": "smallest", **extra}


def jaas_params(kafka, user, password):
    return {"metadata.broker.list": kafka.sasl_bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.jaas.config": ("org.apache.kafka.common.security.plain.PlainLoginModule required "
                                 f'username="{user}" password="{password}";'),
            "auto.offset.reset": "smallest"}


def assert_hidden(exc: BaseException, *secrets: str) -> None:
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    for secret in secrets:
        assert secret not in str(exc)
        assert secret not in repr(exc)
        assert secret not in text


def test_direct_stream_over_sasl(kafka, topic_name, sc):
    kafka.create_topic(topic_name, 2)
    kafka.produce(topic_name, range(50), partitions=2)
    ssc = StreamingContext(sc, 1)
    stream = KafkaUtils.createDirectStream(ssc, [topic_name], sasl_params(kafka))
    lock = threading.Lock()
    values, ranges = [], []

    def keep(rdd):
        with lock:
            ranges.extend(rdd.offsetRanges())
            values.extend(int(v) for _, v in rdd.collect())

    stream.foreachRDD(keep)
    run_until(ssc, lambda: len(values) >= 50)
    assert sorted(values) == list(range(50))
    assert {(r.topic, r.partition) for r in ranges} == {(topic_name, 0), (topic_name, 1)}


def test_create_rdd_over_sasl(kafka, topic_name, sc):
    kafka.create_topic(topic_name, 1)
    kafka.produce(topic_name, ["a", "b", "c", "d"], key="k", partition=0)
    rdd = KafkaUtils.createRDD(sc, sasl_params(kafka, user="admin", password="admin-secret"),
                               [OffsetRange(topic_name, 0, 1, 4)])
    assert rdd.collect() == [("k", "b"), ("k", "c"), ("k", "d")]


def test_sasl_jaas_config(kafka, topic_name, sc):
    kafka.create_topic(topic_name, 1)
    kafka.produce(topic_name, ["x", "y"], partition=0)
    good = jaas_params(kafka, "alice", "alice-secret")
    assert KafkaUtils.createRDD(sc, good, [OffsetRange(topic_name, 0, 0, 2)]).values().collect() == ["x", "y"]
    ssc = StreamingContext(sc, 1)
    stream = KafkaUtils.createDirectStream(ssc, [topic_name], good)
    got = []
    stream.foreachRDD(lambda rdd: got.extend(rdd.values().collect()))
    run_until(ssc, lambda: len(got) >= 2)
    assert got == ["x", "y"]

    bad = jaas_params(kafka, "alice", WRONG_PASSWORD)
    with pytest.raises(KafkaAuthError) as info:
        KafkaUtils.createDirectStream(StreamingContext(sc, 1), [topic_name], bad)
    assert_hidden(info.value, WRONG_PASSWORD)


@pytest.mark.parametrize(("user", "password"), [("alice", WRONG_PASSWORD), ("mallory", WRONG_PASSWORD)])
def test_wrong_credentials_fail_stream_creation_clearly(kafka, topic_name, sc, user, password):
    kafka.create_topic(topic_name, 1)
    ssc = StreamingContext(sc, 1)
    bad = sasl_params(kafka, user=user, password=password)
    started = time.monotonic()
    with pytest.raises(KafkaAuthError) as info:
        KafkaUtils.createDirectStream(ssc, [topic_name], bad)
    elapsed = time.monotonic() - started
    assert elapsed < AUTH_TIMEOUT_S
    err = info.value
    assert isinstance(err, KafkaUnavailableError) and not err.retriable
    message = str(err)
    assert kafka.sasl_bootstrap in message
    assert "refused the credentials" in message and "Authentication failed" in message
    assert repr(user) in message
    assert_hidden(err, password)


def test_wrong_password_fails_create_rdd_clearly(kafka, topic_name, sc):
    kafka.create_topic(topic_name, 1)
    kafka.produce(topic_name, ["a"], partition=0)
    started = time.monotonic()
    with pytest.raises(KafkaAuthError) as info:
        KafkaUtils.createRDD(sc, sasl_params(kafka, password=WRONG_PASSWORD), [OffsetRange(topic_name, 0, 0, 1)])
    assert time.monotonic() - started < AUTH_TIMEOUT_S
    assert_hidden(info.value, WRONG_PASSWORD)


def test_plaintext_client_on_the_sasl_listener_is_not_an_auth_error(kafka, sc):
    # A client that does not speak SASL gets disconnected: unavailable (retriable), not "wrong password".
    ssc = StreamingContext(sc, 1)
    with pytest.raises(KafkaUnavailableError) as info:
        KafkaUtils.createDirectStream(ssc, ["t"], {"bootstrap.servers": kafka.sasl_bootstrap})
    assert not isinstance(info.value, KafkaAuthError)
    assert kafka.sasl_bootstrap in str(info.value)
