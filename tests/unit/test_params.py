"""kafkaParams translation (Spark 2.4 and 0-10 key styles) without a broker."""

from __future__ import annotations

import re

import pytest

from dstream_exactly_once.errors import (
    ConfigurationError,
    KafkaAuthError,
    KafkaUnavailableError,
    UnknownKafkaParamError,
)
from dstream_exactly_once.kafka._metadata import translate_kafka_error
from dstream_exactly_once.kafka._params import KafkaConfig, parse_kafka_params

BROKERS = "127.0.0.1:9092"
SECRET = "s3cr3t-Pa55word"


def parse(**params):
    return parse_kafka_params({"bootstrap.servers": BROKERS, **params})


def dotted(**params):
    """Kafka's dotted keys from keyword arguments (``sasl__password`` -> ``sasl.password``)."""
    return {k.replace("__", "."): v for k, v in params.items()}


# kafka key, value given, kafka-python key, value expected
MAPPED = [
    ("client.id", "app-1", "client_id", "app-1"),
    ("client.rack", "rack-a", "client_rack", "rack-a"),
    ("request.timeout.ms", "30000", "request_timeout_ms", 30000),
    ("fetch.max.bytes", 1024, "fetch_max_bytes", 1024),
    ("fetch.min.bytes", "1", "fetch_min_bytes", 1),
    ("fetch.max.wait.ms", "500", "fetch_max_wait_ms", 500),
    ("max.partition.fetch.bytes", "1048576", "max_partition_fetch_bytes", 1048576),
    ("max.poll.records", 500, "max_poll_records", 500),
    ("receive.buffer.bytes", "65536", "receive_buffer_bytes", 65536),
    ("send.buffer.bytes", "131072", "send_buffer_bytes", 131072),
    ("connections.max.idle.ms", "540000", "connections_max_idle_ms", 540000),
    ("reconnect.backoff.ms", "50", "reconnect_backoff_ms", 50),
    ("reconnect.backoff.max.ms", "1000", "reconnect_backoff_max_ms", 1000),
    ("retry.backoff.ms", "100", "retry_backoff_ms", 100),
    ("metadata.max.age.ms", "300000", "metadata_max_age_ms", 300000),
    ("check.crcs", "false", "check_crcs", False),
    ("check.crcs", True, "check_crcs", True),
    ("security.protocol", "SSL", "security_protocol", "SSL"),
    ("sasl.mechanism", "SCRAM-SHA-256", "sasl_mechanism", "SCRAM-SHA-256"),
    ("sasl.username", "alice", "sasl_plain_username", "alice"),
    ("sasl.password", SECRET, "sasl_plain_password", SECRET),
    ("sasl.plain.username", "alice", "sasl_plain_username", "alice"),
    ("sasl.plain.password", SECRET, "sasl_plain_password", SECRET),
    ("sasl.kerberos.service.name", "kafka", "sasl_kerberos_service_name", "kafka"),
    ("ssl.ca.location", "/etc/ca.pem", "ssl_cafile", "/etc/ca.pem"),
    ("ssl.cafile", "/etc/ca.pem", "ssl_cafile", "/etc/ca.pem"),
    ("ssl.certificate.location", "/etc/cert.pem", "ssl_certfile", "/etc/cert.pem"),
    ("ssl.certfile", "/etc/cert.pem", "ssl_certfile", "/etc/cert.pem"),
    ("ssl.key.location", "/etc/key.pem", "ssl_keyfile", "/etc/key.pem"),
    ("ssl.keyfile", "/etc/key.pem", "ssl_keyfile", "/etc/key.pem"),
    ("ssl.key.password", SECRET, "ssl_password", SECRET),
    ("ssl.crl.location", "/etc/crl.pem", "ssl_crlfile", "/etc/crl.pem"),
    ("ssl.cipher.suites", "ECDHE-RSA-AES256-GCM-SHA384", "ssl_ciphers", "ECDHE-RSA-AES256-GCM-SHA384"),
    ("ssl.endpoint.identification.algorithm", "https", "ssl_check_hostname", True),
    ("ssl.endpoint.identification.algorithm", "", "ssl_check_hostname", False),
]


@pytest.mark.parametrize(("key", "value", "client_key", "expected"), MAPPED,
                         ids=[f"{m[0]}={m[1]!r}" for m in MAPPED])
def test_every_mapped_key_is_translated(key, value, client_key, expected):
    # SASL and SSL settings are refused under a protocol that would ignore them
    context = {"security.protocol": "SASL_SSL", "sasl.username": "alice", "sasl.password": SECRET} \
        if key.startswith(("sasl.", "ssl.")) else {}
    config = parse(**{**context, key: value})
    assert config.client[client_key] == expected
    assert key in config.original_keys


def test_bootstrap_servers_and_spark_24_broker_list():
    assert parse().client["bootstrap_servers"] == [BROKERS]
    spark24 = parse_kafka_params({"metadata.broker.list": "h1:9092, h2:9093"})
    assert spark24.client["bootstrap_servers"] == ["h1:9092", "h2:9093"]
    assert spark24.bootstrap == "h1:9092,h2:9093"
    as_list = parse_kafka_params({"bootstrap.servers": ["h1:9092", "[::1]:9093"]})
    assert as_list.client["bootstrap_servers"] == ["h1:9092", "[::1]:9093"]
    both_same = parse_kafka_params({"bootstrap.servers": "h1:9092", "metadata.broker.list": "h1:9092"})
    assert both_same.client["bootstrap_servers"] == ["h1:9092"]
    with pytest.raises(ConfigurationError, match="both 'bootstrap.servers' and 'metadata.broker.list'"):
        parse_kafka_params({"bootstrap.servers": "h1:9092", "metadata.broker.list": "h2:9092"})


def test_bootstrap_is_required():
    with pytest.raises(ConfigurationError, match="needs 'bootstrap.servers'.*'metadata.broker.list'"):
        parse_kafka_params({"group.id": "g"})


@pytest.mark.parametrize("bad", ["localhost", "host:port", "host:9092:", "", "a b:9092", "h1:9092,,h2:9092",
                                 "host:123456"])
def test_bad_broker_address_is_named(bad):
    with pytest.raises(ConfigurationError, match="bad broker address|must be 'host:port"):
        parse_kafka_params({"bootstrap.servers": bad})


@pytest.mark.parametrize("bad", [[], 9092, None])
def test_bootstrap_of_the_wrong_type(bad):
    with pytest.raises(ConfigurationError, match=r"kafkaParams\['bootstrap.servers'\] must be"):
        parse_kafka_params({"bootstrap.servers": bad})


@pytest.mark.parametrize(("given", "resolved"), [
    ("smallest", "earliest"), ("largest", "latest"), ("earliest", "earliest"), ("latest", "latest"),
    ("none", "none"), ("SMALLEST", "earliest"), ("Largest", "latest"),
])
def test_auto_offset_reset_spark_24_and_kafka_names(given, resolved):
    assert parse(**{"auto.offset.reset": given}).auto_offset_reset == resolved


def test_auto_offset_reset_defaults_to_largest_and_rejects_others():
    assert parse().auto_offset_reset == "latest"
    with pytest.raises(ConfigurationError, match=r"auto.offset.reset.*got 'oldest'"):
        parse(**{"auto.offset.reset": "oldest"})


def test_unknown_keys_are_listed_in_one_error():
    with pytest.raises(UnknownKafkaParamError) as info:
        parse(**{"bogus.key": 1, "another.one": "x", "client.id": "ok", "fetch.max.bytez": 5})
    message = str(info.value)
    unknown, _, allowed = message.partition("; allowed keys: ")
    assert unknown == "unknown kafkaParams key(s): 'another.one', 'bogus.key', 'fetch.max.bytez'"
    # every key the stream takes is listed, and the ones it accepts and ignores
    from dstream_exactly_once.kafka._params import _DIRECT, _IGNORED

    for key in [*_DIRECT, "bootstrap.servers", "metadata.broker.list", "sasl.jaas.config", "group.id",
                "auto.offset.reset", "enable.auto.commit", "isolation.level", *_IGNORED]:
        assert key in re.findall(r"[\w.]+", allowed), key
    assert isinstance(info.value, ConfigurationError) and isinstance(info.value, ValueError)


@pytest.mark.parametrize("value", [True, "true", "TRUE", " true "])
def test_enable_auto_commit_true_is_rejected(value):
    with pytest.raises(ConfigurationError, match="enable.auto.commit.*not allowed"):
        parse(**{"enable.auto.commit": value})


def test_enable_auto_commit_false_is_accepted_and_consumers_never_commit_or_reset():
    config = parse(**{"enable.auto.commit": "false", "group.id": "g1", "auto.offset.reset": "smallest"})
    assert config.group_id == "g1"
    kw = config.consumer_kwargs(client_id="x")
    assert kw["enable_auto_commit"] is False
    assert kw["auto_offset_reset"] == "none"
    assert kw["group_id"] is None
    assert kw["client_id"] == "x"
    with pytest.raises(ConfigurationError, match=r"must be true or false, got 'maybe'"):
        parse(**{"enable.auto.commit": "maybe"})


@pytest.mark.parametrize("key", ["key.deserializer", "value.deserializer", "interceptor.classes"])
def test_jvm_only_keys_are_rejected_with_a_reason(key):
    with pytest.raises(ConfigurationError, match=f"{key}.*not supported"):
        parse(**{key: "org.apache.kafka.common.serialization.StringDeserializer"})


def test_keys_without_effect_are_accepted():
    config = parse(**{"zookeeper.connect": "zk:2181", "session.timeout.ms": "10000",
                      "auto.commit.interval.ms": "1000", "heartbeat.interval.ms": "3000"})
    assert "zookeeper.connect" not in str(config.client)


def test_isolation_level():
    assert parse().isolation_level == "read_uncommitted"
    config = parse(**{"isolation.level": "read_committed"})
    assert config.isolation_level == "read_committed"
    assert config.consumer_kwargs()["isolation_level"] == "read_committed"
    with pytest.raises(ConfigurationError, match="isolation.level"):
        parse(**{"isolation.level": "serializable"})


@pytest.mark.parametrize(("key", "value", "match"), [
    ("request.timeout.ms", "soon", r"must be an integer in \[1, 2147483647\], got 'soon'"),
    ("fetch.max.bytes", -1, r"must be an integer in \[0, 2147483647\], got -1"),
    ("client.id", "", "must be a non-empty string"),
    ("security.protocol", "TLS", "'TLS' is not one of"),
])
def test_bad_values_name_the_key(key, value, match):
    with pytest.raises(ConfigurationError, match=match) as info:
        parse(**{key: value})
    assert key in str(info.value)


def test_params_must_be_a_dict_of_str_keys():
    with pytest.raises(ConfigurationError, match="must be a dict, got list"):
        parse_kafka_params([("bootstrap.servers", BROKERS)])  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="keys must be str, got 1"):
        parse_kafka_params({"bootstrap.servers": BROKERS, 1: "x"})


def test_sasl_defaults_to_plain():
    config = parse(**dotted(security__protocol="SASL_PLAINTEXT", sasl__username="alice", sasl__password=SECRET))
    assert config.client["sasl_mechanism"] == "PLAIN"
    assert config.client["sasl_plain_username"] == "alice"
    assert "sasl_mechanism" not in parse(**{"security.protocol": "SSL"}).client


JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" '
        f'password="{SECRET}";')


def test_sasl_jaas_config_is_parsed():
    config = parse(**{"security.protocol": "SASL_PLAINTEXT", "sasl.jaas.config": JAAS})
    assert config.client["sasl_plain_username"] == "alice"
    assert config.client["sasl_plain_password"] == SECRET
    spaced = parse(**{"security.protocol": "SASL_PLAINTEXT",
                      "sasl.jaas.config": 'PlainLoginModule required username = "bob"  password= "pw";'})
    assert (spaced.client["sasl_plain_username"], spaced.client["sasl_plain_password"]) == ("bob", "pw")


@pytest.mark.parametrize("jaas", [
    f'org.apache.kafka.common.security.plain.PlainLoginModule required password="{SECRET}";',
    f'PlainLoginModule required username=alice password={SECRET};',
])
def test_bad_sasl_jaas_config_hides_the_value(jaas):
    with pytest.raises(ConfigurationError, match="sasl.jaas.config.*username") as info:
        parse(**{"sasl.jaas.config": jaas})
    assert SECRET not in str(info.value)
    assert SECRET not in repr(info.value)


def secret_params():
    return {"bootstrap.servers": BROKERS, "security.protocol": "SASL_SSL", "sasl.username": "alice",
            "sasl.password": SECRET, "ssl.key.password": SECRET + "-ssl"}


def test_secrets_are_not_in_the_repr():
    config = parse_kafka_params(secret_params())
    for text in (repr(config), str(config), str(config.redacted())):
        assert SECRET not in text
        assert "***" in text
    jaas = parse_kafka_params({"bootstrap.servers": BROKERS, "security.protocol": "SASL_PLAINTEXT",
                               "sasl.jaas.config": JAAS})
    assert SECRET not in repr(jaas)
    assert "alice" in repr(jaas)  # user names are not secret; they help diagnose auth failures
    # the real values still reach kafka-python
    assert config.consumer_kwargs()["sasl_plain_password"] == SECRET
    assert config.consumer_kwargs()["ssl_password"] == SECRET + "-ssl"


@pytest.mark.parametrize("extra", [
    {"bogus.key": 1},
    {"enable.auto.commit": True},
    {"auto.offset.reset": "sometimes"},
    {"security.protocol": "PLAIN"},
    {"bootstrap.servers": "nohost"},
    {"sasl.jaas.config": "broken"},
    {"key.deserializer": "x"},
    {"sasl.password": 12345},
])
def test_secrets_are_not_in_any_error_message(extra):
    params = {**secret_params(), **extra}
    with pytest.raises(ConfigurationError) as info:
        parse_kafka_params(params)
    for text in (str(info.value), repr(info.value), repr(info.value.args)):
        assert SECRET not in text
        assert "12345" not in text


def test_config_equality_ignores_key_order():
    a = parse_kafka_params({"bootstrap.servers": BROKERS, "client.id": "c"})
    b = parse_kafka_params({"client.id": "c", "bootstrap.servers": BROKERS})
    assert a == b
    assert isinstance(a, KafkaConfig)


# ---------------------------------------------------------------- error translation (no broker)
def test_auth_errors_translate_without_the_password():
    import kafka.errors as ke

    exc = ke.SaslAuthenticationFailedError("Authentication failed: Invalid username or password")
    err = translate_kafka_error(exc, BROKERS, "connecting", parse_kafka_params(secret_params()))
    assert isinstance(err, KafkaAuthError) and isinstance(err, KafkaUnavailableError)
    assert not err.retriable
    assert BROKERS in str(err) and SECRET not in str(err)


def test_unreachable_sasl_broker_is_unavailable_not_an_auth_error():
    import kafka.errors as ke

    from dstream_exactly_once.testing._process import free_port

    params = {**secret_params(), "bootstrap.servers": f"127.0.0.1:{free_port()}", "security.protocol": "SASL_PLAINTEXT"}
    del params["ssl.key.password"]
    err = translate_kafka_error(ke.KafkaTimeoutError("Unable to bootstrap"), params["bootstrap.servers"],
                                "connecting", parse_kafka_params(params))
    assert type(err) is KafkaUnavailableError
    assert err.retriable
    assert SECRET not in str(err)
