"""docs/security.md's examples against a broker configured as each of them needs: PLAIN and SCRAM-SHA-512
users on SASL_PLAINTEXT, an SSL listener and a SASL_SSL one with a self-signed certificate.

Each ``<!-- test: security-… -->`` block is run as written (its listener address and CA file
replaced, the password in ``KAFKA_PASSWORD``); the ``kafkaParams`` it defines then drive an
exactly-once stream that must count every record of a topic once (driver and executors connect).
"""

from __future__ import annotations

import threading
import traceback
from typing import Dict, Iterator

import pytest
from pyspark.streaming import StreamingContext

from dstream_exactly_once import KafkaAuthError, KafkaUnavailableError, KafkaUtils, Writes, open_store
from dstream_exactly_once.testing import LocalKafka

from .. import docblocks
from .streams import run_until

pytestmark = pytest.mark.slow  # its own broker, five streams and three bootstrap timeouts: ~4 min

PASSWORD = "alice-Secret-7c1e"
WRONG = "not-alice-secret-3d2a"
RECORDS = 60


@pytest.fixture(scope="module")
def secure_kafka() -> Iterator[LocalKafka]:
    broker = LocalKafka(sasl_users={"alice": PASSWORD}, scram_users={"alice": PASSWORD}, tls=True)
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


def params_of(block_name: str, broker: LocalKafka, monkeypatch) -> Dict[str, str]:
    (block,) = docblocks.named(block_name)
    subs = {}
    for placeholder, address in (("broker:9092", "sasl_bootstrap"), ("broker:9093", "ssl_bootstrap"),
                                 ("broker:9094", "sasl_ssl_bootstrap")):
        if placeholder in block.text:
            subs[placeholder] = getattr(broker, address)
    if "/etc/kafka/ca.pem" in block.text:
        subs["/etc/kafka/ca.pem"] = broker.ca_file
    monkeypatch.setenv("KAFKA_PASSWORD", PASSWORD)
    namespace: dict = {}
    exec(compile(docblocks.substitute(block.text, subs), block.where, "exec"), namespace)  # noqa: S102
    assert PASSWORD not in block.text
    return namespace["kafkaParams"]


@pytest.mark.parametrize("block_name", ["security-plain", "security-jaas", "security-scram", "security-ssl",
                                        "security-sasl-ssl"])
def test_documented_security_settings_count_exactly_once(block_name, secure_kafka, topic_name, sc, tmp_path,
                                                         monkeypatch):
    params = params_of(block_name, secure_kafka, monkeypatch)
    secure_kafka.create_topic(topic_name, 2)
    secure_kafka.produce(topic_name, range(RECORDS), partitions=2)
    url = f"sqlite:///{tmp_path / 'state.db'}"
    ssc = StreamingContext(sc, 1)
    stream = KafkaUtils.createExactlyOnceStream(ssc, params, [topic_name], store=url, app_id="secure-count")
    lock = threading.Lock()
    seen = []

    def per_batch(batch, rdd):
        values = [int(v) for _k, v in rdd.collect()]
        with lock:
            seen.extend(values)
        return Writes().incr("count", "records", len(values)).incr("count", "sum", sum(values))

    stream.commit_each_batch(per_batch)
    run_until(ssc, lambda: len(seen) >= RECORDS)
    with open_store(url, "secure-count") as store:
        assert store.get_values("count") == {"records": RECORDS, "sum": sum(range(RECORDS))}


def test_a_wrong_plain_password_is_an_auth_error_without_the_password(secure_kafka, topic_name, sc, monkeypatch):
    params = {**params_of("security-plain", secure_kafka, monkeypatch), "sasl.password": WRONG}
    secure_kafka.create_topic(topic_name, 1)
    with pytest.raises(KafkaAuthError) as info:
        KafkaUtils.createDirectStream(StreamingContext(sc, 1), [topic_name], params)
    text = "".join(traceback.format_exception(info.value))
    assert "'alice'" in str(info.value) and params["bootstrap.servers"] in str(info.value)
    assert WRONG not in text and PASSWORD not in text


@pytest.mark.parametrize("block_name", ["security-scram", "security-sasl-ssl"])
def test_a_wrong_scram_password_fails_as_the_page_says(block_name, secure_kafka, topic_name, sc, monkeypatch):
    """SCRAM and SASL_SSL: kafka-python sees only a closed connection, so the error is "cannot reach"
    (as docs/security.md says), never an authentication success, and it holds no password."""
    params = {**params_of(block_name, secure_kafka, monkeypatch), "sasl.password": WRONG}
    secure_kafka.create_topic(topic_name, 1)
    with pytest.raises(KafkaUnavailableError) as info:
        KafkaUtils.createDirectStream(StreamingContext(sc, 1), [topic_name], params)
    text = "".join(traceback.format_exception(info.value))
    assert "cannot reach Kafka at" in str(info.value) and "Unable to bootstrap" in str(info.value)
    assert params["bootstrap.servers"] in str(info.value)
    assert WRONG not in text and PASSWORD not in text
