"""The optional confluent-kafka (librdkafka) executor reader: config translation, reader selection,
refused settings and secrets (librdkafka itself, no broker, no Spark)."""

from __future__ import annotations

import sys

import pytest

from dstream_exactly_once import ConfigurationError, DataLossError, KafkaAuthError, KafkaUnavailableError, OffsetRange
from dstream_exactly_once.kafka._confluent_params import (
    check_confluent_config,
    describe_properties,
    librdkafka_properties,
    translate_confluent_error,
)
from dstream_exactly_once.kafka._params import parse_kafka_params
from dstream_exactly_once.kafka._reader_choice import READER_KEY, check_reader, range_reader

SECRET = "pw-Zq8!never-shown"


def test_kafka_params_become_librdkafka_properties_with_the_readers_fixed_settings():
    config = parse_kafka_params({
        "bootstrap.servers": "h1:9092,h2:9093", "security.protocol": "sasl_plaintext",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice", "sasl.password": SECRET, "client.id": "app-7", "isolation.level": "read_committed",
        "request.timeout.ms": 40000, "fetch.max.wait.ms": 250, "receive.buffer.bytes": -1, "check.crcs": "false",
        "group.id": "g1", "max.poll.records": 500, "auto.offset.reset": "earliest"})
    props = librdkafka_properties(config)
    assert props == {
        "bootstrap.servers": "h1:9092,h2:9093", "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice", "sasl.password": SECRET, "client.id": "app-7", "isolation.level": "read_committed",
        "socket.timeout.ms": 40000, "fetch.wait.max.ms": 250, "check.crcs": False, "group.id": "g1",
        "enable.auto.commit": False, "enable.auto.offset.store": False, "auto.offset.reset": "error",
        "enable.partition.eof": False, "max.partition.fetch.bytes": 4 * 1024 * 1024, "fetch.queue.backoff.ms": 1}
    assert describe_properties(props)["sasl.password"] == "***"


def test_fetch_sizes_equal_the_kafka_python_readers_and_ssl_settings_map():
    from dstream_exactly_once.kafka._consumers import EXECUTOR_FETCH_BYTES

    default = librdkafka_properties(parse_kafka_params({"bootstrap.servers": "h:1"}))
    assert default["max.partition.fetch.bytes"] == EXECUTOR_FETCH_BYTES == 4 * 1024 * 1024
    assert default["group.id"] == "dstream-exactly-once-executor" and "fetch.max.bytes" not in default
    props = librdkafka_properties(parse_kafka_params({
        "bootstrap.servers": "h:1", "max.partition.fetch.bytes": 1 << 20, "fetch.max.bytes": 200_000_000,
        "security.protocol": "SSL", "ssl.ca.location": "/ca.pem", "ssl.key.password": SECRET,
        "ssl.endpoint.identification.algorithm": ""}))
    assert props["max.partition.fetch.bytes"] == 1 << 20 and props["fetch.max.bytes"] == 200_000_000
    assert props["receive.message.max.bytes"] == 200_000_512  # librdkafka: must exceed fetch.max.bytes
    assert props["ssl.ca.location"] == "/ca.pem" and props["ssl.key.password"] == SECRET
    assert props["ssl.endpoint.identification.algorithm"] == "none"


def test_reader_name_is_checked_naming_key_value_and_allowed():
    config = parse_kafka_params({"bootstrap.servers": "127.0.0.1:9"})
    assert check_reader("kafka-python", config) == "kafka-python"
    assert check_reader(" Confluent-Kafka ", config) == "confluent-kafka"
    for bad in ("librdkafka", "", None, 3):
        with pytest.raises(ConfigurationError, match=rf"spark.streaming.kafka.reader must be one of 'kafka-python', "
                                                     rf"'confluent-kafka', got {bad!r}"):
            check_reader(bad, config)
    assert range_reader("kafka-python").__module__ == "dstream_exactly_once.kafka._reader_kafka_python"
    assert range_reader("confluent-kafka").__module__ == "dstream_exactly_once.kafka._reader_confluent"


def test_read_options_take_the_reader_from_spark_conf():
    from dstream_exactly_once.kafka.spark._direct import ReadOptions

    config = parse_kafka_params({"bootstrap.servers": "127.0.0.1:9"})
    assert ReadOptions({}, config=config).reader == "kafka-python"
    assert ReadOptions({READER_KEY: "confluent-kafka"}, config=config).reader == "confluent-kafka"
    with pytest.raises(ConfigurationError, match=r"spark.streaming.kafka.reader .*got 'rdkafka'"):
        ReadOptions({READER_KEY: "rdkafka"}, config=config)


def test_missing_package_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "confluent_kafka", None)  # import raises ImportError
    config = parse_kafka_params({"bootstrap.servers": "127.0.0.1:9"})
    with pytest.raises(ConfigurationError, match=r"spark.streaming.kafka.reader='confluent-kafka' needs the "
                                                 r"confluent-kafka package.*"
                                                 r"pip install dstream-exactly-once\[confluent\]"):
        check_reader("confluent-kafka", config)
    assert check_reader("kafka-python", config) == "kafka-python"  # the default does not need it


def test_settings_librdkafka_refuses_are_named_on_the_driver_without_secrets():
    base = {"bootstrap.servers": "127.0.0.1:9", "security.protocol": "SASL_PLAINTEXT", "sasl.username": "u",
            "sasl.password": SECRET}
    with pytest.raises(ConfigurationError) as info:
        check_confluent_config(parse_kafka_params({**base, "receive.buffer.bytes": 200_000_000}))
    text = str(info.value)
    assert "kafkaParams['receive.buffer.bytes']=200000000" in text and "allowed range 0..100000000" in text
    assert "spark.streaming.kafka.reader=kafka-python" in text and SECRET not in text
    with pytest.raises(ConfigurationError, match=r"kafkaParams\['sasl.mechanism'\]='GSSAPI' cannot be honoured"):
        check_confluent_config(parse_kafka_params({"bootstrap.servers": "127.0.0.1:9",
                                                   "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI"}))
    with pytest.raises(ConfigurationError) as info:
        check_confluent_config(parse_kafka_params({**base, "security.protocol": "SASL_SSL",
                                                   "ssl.cipher.suites": "NO-SUCH-CIPHER-X"}))
    # kafkaParams' own check refuses unknown OpenSSL ciphers first; either way no secret in the message
    assert SECRET not in str(info.value) and SECRET not in repr(info.value)
    check_confluent_config(parse_kafka_params(base))  # accepted: nothing raised


def test_librdkafka_errors_map_into_the_library_tree_without_secrets():
    from confluent_kafka import KafkaError, KafkaException

    lost = translate_confluent_error(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART), "h:1", "reading t-0")
    assert isinstance(lost, DataLossError) and "reading t-0" in str(lost)
    auth = translate_confluent_error(KafkaException(KafkaError(KafkaError.SASL_AUTHENTICATION_FAILED)), "h:1", "x")
    assert isinstance(auth, KafkaAuthError) and not auth.retriable
    down = translate_confluent_error(KafkaError(KafkaError._ALL_BROKERS_DOWN, f"down {SECRET}"), "h:1", "x")
    assert type(down) is KafkaUnavailableError and down.retriable and SECRET not in str(down)
    other = translate_confluent_error(ValueError("odd"), "h:1", "x")
    assert type(other) is KafkaUnavailableError and "ValueError" in str(other)


def test_unreachable_broker_is_kafka_unavailable_after_the_poll_timeout():
    from dstream_exactly_once.kafka._consumers import ConsumerCache
    from dstream_exactly_once.kafka._reader_confluent import CONSUMERS, read_range

    config = parse_kafka_params({"bootstrap.servers": "127.0.0.1:9", "reconnect.backoff.ms": 500})
    created, cached = CONSUMERS.created, set(CONSUMERS._items)  # other tests may have left consumers
    with pytest.raises(KafkaUnavailableError, match=r"after polling for 1500 ms.*Connect to .*127.0.0.1:9") as info:
        list(read_range(config, OffsetRange("t", 0, 0, 5), poll_timeout_ms=1500))
    assert info.value.retriable
    assert CONSUMERS.created == created + 1
    assert isinstance(CONSUMERS, ConsumerCache) and set(CONSUMERS._items) <= cached  # the failed one was not kept
    assert list(read_range(config, OffsetRange("t", 0, 5, 5))) == []  # an empty range reads nothing


def test_the_confluent_cache_reuses_a_consumer_only_for_its_own_partition():
    from dstream_exactly_once.kafka._consumers import ConsumerCache
    from dstream_exactly_once.kafka._reader_confluent import CONSUMERS

    assert CONSUMERS.share_idle is False
    made = []
    cache = ConsumerCache(create=lambda config, r: made.append(r) or object(), close=lambda c: None,
                          share_idle=False)
    config = parse_kafka_params({"bootstrap.servers": "127.0.0.1:9"})
    a = cache.acquire(config, OffsetRange("t", 0, 0, 5), fresh=False)
    cache.release(config, OffsetRange("t", 0, 0, 5), a)
    b = cache.acquire(config, OffsetRange("t", 1, 0, 5), fresh=False)  # not a: its fetch may be parked
    assert b is not a and cache.created == 2
    cache.release(config, OffsetRange("t", 1, 0, 5), b)
    assert cache.acquire(config, OffsetRange("t", 0, 5, 9), fresh=False) is a  # its own partition: reused
    assert cache.created == 2
