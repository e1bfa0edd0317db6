"""Issue #12 (4, 6, 7): kafkaParams honoured as Kafka/Spark define them or refused clearly; secrets
redacted from every log record. Broker-free, except an unreachable port for the timeout check."""

from __future__ import annotations

import logging
import pickle
import subprocess
import sys
import time

import pytest

from dstream_exactly_once import KafkaUnavailableError, TopicAndPartition
from dstream_exactly_once._redaction import MASK, SecretFilter, redact, register_secret, registered_secrets
from dstream_exactly_once.errors import ConfigurationError
from dstream_exactly_once.kafka._metadata import KafkaMetadata
from dstream_exactly_once.kafka._params import parse_kafka_params
from dstream_exactly_once.kafka._strategies import Assign, Subscribe, check_topics
from dstream_exactly_once.testing._process import free_port

BROKERS = "127.0.0.1:9092"


def parse(**params):
    return parse_kafka_params({"bootstrap.servers": BROKERS, **params})


def refused(params, *fragments):
    """Parsing ``params`` raises ConfigurationError whose message holds every fragment."""
    with pytest.raises(ConfigurationError) as info:
        parse_kafka_params({"bootstrap.servers": BROKERS, **params})
    for fragment in fragments:
        assert fragment in str(info.value), str(info.value)
    return str(info.value)


SASL = {"security.protocol": "SASL_PLAINTEXT", "sasl.username": "alice", "sasl.password": "pw-Hardening-1"}
SSL = {"security.protocol": "SSL"}


# ---------------------------------------------------------------- defect 6: silently ignored or inverted
@pytest.mark.parametrize("value", [None, 0, True, ["earliest"]])
def test_auto_offset_reset_of_another_type_is_refused_not_taken_as_none(value):
    refused({"auto.offset.reset": value}, "'auto.offset.reset'", f"got {value!r}", "'earliest'", "'none'")


def test_auto_offset_reset_none_string_still_means_none():
    assert parse(**{"auto.offset.reset": "none"}).auto_offset_reset == "none"


@pytest.mark.parametrize("value", ["false", "true", "none", None, False, True, "http"])
def test_hostname_check_values_kafka_does_not_define_are_refused(value):
    refused({**SSL, "ssl.endpoint.identification.algorithm": value},
            "'ssl.endpoint.identification.algorithm'", f"got {value!r}", "'https'", "''")


@pytest.mark.parametrize(("value", "checked"), [("https", True), ("HTTPS", True), ("", False)])
def test_hostname_check_as_kafka_defines_it(value, checked):
    config = parse(**SSL, **{"ssl.endpoint.identification.algorithm": value})
    assert config.client["ssl_check_hostname"] is checked


@pytest.mark.parametrize("value", [0, "0", -5])
def test_max_poll_records_below_one_is_refused(value):
    refused({"max.poll.records": value}, "'max.poll.records'", "in [1, 2147483647]", f"got {value!r}")


def test_request_timeout_is_honoured_when_the_broker_is_unreachable():
    config = parse_kafka_params({"bootstrap.servers": f"127.0.0.1:{free_port()}", "request.timeout.ms": 2000})
    md = KafkaMetadata(config)
    started = time.monotonic()
    with pytest.raises(KafkaUnavailableError):
        md.topics()
    elapsed = time.monotonic() - started
    md.close()
    assert elapsed < 6.0, f"took {elapsed:.1f} s with request.timeout.ms=2000"


def test_explicit_timeout_wins_and_is_checked():
    config = parse(**{"request.timeout.ms": 2000})
    assert KafkaMetadata(config, timeout_ms=1500).timeout_ms == 1500
    assert KafkaMetadata(parse()).timeout_ms == 10000
    with pytest.raises(ConfigurationError, match=r"timeout_ms must be a positive int.*got 0"):
        KafkaMetadata(config, timeout_ms=0)


@pytest.mark.parametrize("key", [("t", 0), ["t", 0], "t-0"], ids=["tuple", "list", "str"])
def test_from_offsets_keys_must_be_topic_and_partition(key):
    hashable = tuple(key) if isinstance(key, list) else key
    with pytest.raises(ConfigurationError, match="must be TopicAndPartition") as info:
        Assign({hashable: 3})
    assert repr(hashable) in str(info.value)
    with pytest.raises(ConfigurationError, match="must be TopicAndPartition"):
        Subscribe(["t"], {hashable: 3})
    with pytest.raises(ConfigurationError, match="Assign's partitions must be TopicAndPartition"):
        Assign([hashable])
    assert Assign({TopicAndPartition("t", 0): 3}).offsets == {TopicAndPartition("t", 0): 3}


# ---------------------------------------------------------------- defect 7: messages
def test_client_id_and_group_id_messages_name_key_value_and_rule():
    message = refused({"client.id": 12345}, "'client.id'", "got 12345", "non-empty string")
    assert "got int" not in message
    refused({"group.id": ""}, "'group.id'", "got ''", "non-empty string")


@pytest.mark.parametrize("name", ["bad topic!", "x" * 250, "x" * 300, ".", "..", "", "tÖpic", "a/b"])
def test_illegal_topic_names_are_refused_by_kafkas_rule(name):
    with pytest.raises(ConfigurationError) as info:
        check_topics([name])
    message = str(info.value)
    assert repr(name) in message
    assert "not a legal Kafka topic name" in message and "1 to 249" in message
    assert "unknown topic" not in message
    if name:  # TopicAndPartition itself refuses ''
        with pytest.raises(ConfigurationError, match="not a legal Kafka topic name"):
            Assign({TopicAndPartition(name, 0): 0})


def test_legal_topic_names_pass():
    names = ["a", "x" * 249, "my.topic_1-2", "..."]
    assert check_topics(names) == sorted(names)
    assert Assign({TopicAndPartition("my.topic_1-2", 0): 0}).assigned == {TopicAndPartition("my.topic_1-2", 0)}
    with pytest.raises(ConfigurationError, match=r"'bad topic!' is not a legal Kafka topic name"):
        Assign({TopicAndPartition("bad topic!", 0): 0})


@pytest.mark.parametrize("port", ["99999", "65536", "0"])
def test_out_of_range_port_is_refused_at_parse_time(port):
    refused({"bootstrap.servers": f"localhost:{port}"}, "'bootstrap.servers'", f"'localhost:{port}'", "1..65535")


def test_port_limits_accepted():
    assert parse_kafka_params({"bootstrap.servers": "h:1,h:65535"}).client["bootstrap_servers"] == ["h:1", "h:65535"]


# ---------------------------------------------------------------- every other key: types, ranges, enums
@pytest.mark.parametrize(("key", "value", "fragment"), [
    ("fetch.max.bytes", True, "must be an integer in [0, 2147483647], got True"),
    ("fetch.max.bytes", 1.5, "must be an integer in [0, 2147483647], got 1.5"),
    ("fetch.min.bytes", "1e3", "must be an integer in [0, 2147483647], got '1e3'"),
    ("fetch.max.wait.ms", 2**31, "must be an integer in [0, 2147483647], got 2147483648"),
    ("request.timeout.ms", 0, "must be an integer in [1, 2147483647], got 0"),
    ("receive.buffer.bytes", -2, "must be an integer in [-1, 2147483647], got -2"),
    ("metadata.max.age.ms", -1, "must be an integer in [0, 9223372036854775807], got -1"),
    ("check.crcs", "yes", "must be true or false, got 'yes'"),
    ("isolation.level", None, "got None"),
    ("security.protocol", "TLS", "'TLS' is not one of"),
    ("security.protocol", None, "None is not one of"),
])
def test_bad_types_and_ranges_name_key_value_and_rule(key, value, fragment):
    refused({key: value}, repr(key), fragment)


def test_socket_buffers_minus_one_mean_the_os_default():
    config = parse(**{"receive.buffer.bytes": -1, "send.buffer.bytes": "-1"})
    assert "receive_buffer_bytes" not in config.client and "send_buffer_bytes" not in config.client
    assert parse(**{"receive.buffer.bytes": 65536}).client["receive_buffer_bytes"] == 65536


def test_security_protocol_is_case_insensitive_as_in_kafka():
    assert parse(**{**SASL, "security.protocol": "sasl_plaintext"}).client["security_protocol"] == "SASL_PLAINTEXT"


def test_sasl_mechanism_is_checked():
    refused({**SASL, "sasl.mechanism": "PLAINTEXT"}, "'sasl.mechanism'", "got 'PLAINTEXT'", "'PLAIN'")
    refused({**SASL, "sasl.mechanism": "OAUTHBEARER"}, "OAUTHBEARER", "token provider")
    assert parse(**SASL, **{"sasl.mechanism": "SCRAM-SHA-512"}).client["sasl_mechanism"] == "SCRAM-SHA-512"


def test_sasl_plain_needs_username_and_password():
    refused({"security.protocol": "SASL_PLAINTEXT"}, "'sasl.username'", "'sasl.password'", "sasl.jaas.config")
    refused({"security.protocol": "SASL_SSL", "sasl.username": "alice"}, "needs 'sasl.password'")


def test_sasl_and_ssl_settings_under_a_protocol_that_ignores_them_are_refused():
    refused({"sasl.username": "alice", "sasl.password": "pw-Hardening-1"},
            "'sasl.password', 'sasl.username'", "'PLAINTEXT'", "SASL_PLAINTEXT")
    refused({**SASL, "ssl.key.password": "pw-Hardening-2"}, "'ssl.key.password'", "'SASL_PLAINTEXT'", "SSL")
    refused({"ssl.cafile": "/etc/ca.pem"}, "'ssl.cafile'", "'PLAINTEXT'")
    config = parse(**{**SASL, "security.protocol": "SASL_SSL", "ssl.cafile": "/etc/ca.pem"})
    assert config.client["ssl_cafile"] == "/etc/ca.pem"


def test_two_keys_for_one_setting_must_agree():
    refused({"ssl.cafile": "/a.pem", "ssl.ca.location": "/b.pem", **SSL},
            "both 'ssl.cafile' and 'ssl.ca.location'", "'/a.pem'", "'/b.pem'")
    assert parse(**SSL, **{"ssl.cafile": "/a.pem", "ssl.ca.location": "/a.pem"}).client["ssl_cafile"] == "/a.pem"
    jaas = 'PlainLoginModule required username="alice" password="pw-Hardening-3";'
    message = refused({**SASL, "sasl.jaas.config": jaas}, "'sasl.password' and 'sasl.jaas.config'", "values hidden")
    assert "pw-Hardening" not in message


def test_cipher_suites_are_checked_against_openssl():
    refused({**SSL, "ssl.cipher.suites": "TLS_NOT_A_CIPHER_SUITE"}, "'ssl.cipher.suites'", "'TLS_NOT_A_CIPHER_SUITE'")
    config = parse(**SSL, **{"ssl.cipher.suites": "ECDHE-RSA-AES128-GCM-SHA256, ECDHE-RSA-AES256-GCM-SHA384"})
    assert config.client["ssl_ciphers"] == "ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-AES256-GCM-SHA384"


def test_timeouts_that_kafka_python_would_refuse_on_an_executor_are_refused_here():
    refused({"request.timeout.ms": 400}, "fetch.max.wait.ms < request.timeout.ms < connections.max.idle.ms",
            "500 < 400 < 540000")
    refused({"connections.max.idle.ms": 1000, "request.timeout.ms": 2000}, "2000 < 1000")


@pytest.mark.parametrize("key", ["sasl.password", "ssl.key.password"])
def test_a_bad_secret_value_is_never_shown(key):
    for bad in (123456789, ["pw-list-Hardening"], ""):
        message = refused({**SASL, "security.protocol": "SASL_SSL", key: bad}, repr(key), "value hidden")
        assert "123456789" not in message and "pw-list" not in message


# ---------------------------------------------------------------- defect 4: the redaction itself
class Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        self.lines.append(self.format(record))


@pytest.fixture
def root_capture():
    root = logging.getLogger()
    handler = Capture()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    yield handler
    root.removeHandler(handler)
    root.setLevel(level)


def test_records_of_child_loggers_are_redacted_whatever_the_handler(root_capture):
    secret = "Unit-s3cret-ÄÖ-€-4411"
    parse(**{"security.protocol": "SASL_PLAINTEXT", "sasl.username": "u", "sasl.password": secret})
    token = b"\x00u\x00" + secret.encode("utf-8")
    logging.getLogger("kafka.conn.deep.child").debug("Send: %r", token)
    logging.getLogger("kafka.admin.client").debug("config %s", {"sasl_plain_password": secret})
    logging.getLogger("other.library").warning("url %s", "postgresql://u:" + secret + "@h/db")
    logging.getLogger("dstream_exactly_once.x").error("%(a)s", {"a": "fine", "b": secret})
    try:
        try:
            raise ValueError(f"inner {secret}")
        except ValueError as inner:
            raise RuntimeError("outer") from inner
    except RuntimeError:
        logging.getLogger("kafka.net").exception("failed")
    assert len(root_capture.records) == 5
    for record, line in zip(root_capture.records, root_capture.lines, strict=True):
        for text in (line, record.getMessage(), repr(record.args), record.exc_text or "",
                     repr(record.exc_info)):
            assert secret not in text
            assert repr(secret.encode("utf-8"))[2:-1] not in text
    assert [MASK in line for line in root_capture.lines] == [True, True, True, False, True]
    assert root_capture.lines[3] == "fine"  # the secret was only in an unused argument
    assert "ValueError" in root_capture.lines[-1]  # the traceback text stays, redacted


def test_records_without_secrets_are_untouched(root_capture):
    logging.getLogger("kafka.conn").debug("plain %s %d", "text", 3)
    record = root_capture.records[0]
    assert record.msg == "plain %s %d" and record.args == ("text", 3)


def test_url_quoted_and_escaped_forms_are_redacted():
    secret = "p@ss w'ord/\"x"
    register_secret(secret)
    from urllib.parse import quote, quote_plus

    for text in (secret, repr(secret), quote(secret, safe=""), quote_plus(secret), repr(secret.encode())):
        assert "w'ord" not in redact(f"before {text} after").replace("\\'", "")
        assert redact(f"before {text} after").startswith("before ") and MASK in redact(text)


def test_register_secret_checks_its_argument():
    register_secret(None)
    register_secret("")
    with pytest.raises(TypeError, match="str or bytes, got int") as info:
        register_secret(987654321)  # type: ignore[arg-type]
    assert "987654321" not in str(info.value)
    register_secret(b"bytes-Secret-\xff")
    assert "bytes-Secret-\\xff" in registered_secrets()


def test_secret_filter_scrubs_records_made_elsewhere():
    register_secret("Filter-secret-77")
    record = logging.makeLogRecord({"msg": "got %s", "args": ("Filter-secret-77",), "levelno": 10})
    assert SecretFilter().filter(record) is True
    assert record.getMessage() == f"got {MASK}"


def test_an_unpickled_config_registers_its_secrets_in_the_new_process():
    secret = "Pickled-Secret-5150"
    config = parse(**{"security.protocol": "SASL_PLAINTEXT", "sasl.username": "u", "sasl.password": secret})
    code = ("import pickle, sys; from dstream_exactly_once._redaction import registered_secrets, redact\n"
            "config = pickle.loads(sys.stdin.buffer.read())\n"
            f"print(redact('x {secret} y'), {secret!r} in registered_secrets())")
    out = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(config), capture_output=True,
                         check=True, timeout=60).stdout.decode()
    assert out.strip() == f"x {MASK} y True"
