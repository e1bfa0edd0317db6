"""No SASL password in any log record, at DEBUG, on the real SASL_PLAINTEXT listener.

The driver's metadata client, an executor-side consumer read and the library's own SASL PLAIN
credentials check all run with the root logger at DEBUG and a capturing handler; the password
must appear in no message, argument, exception text or chained exception — right or wrong.
"""

from __future__ import annotations

import logging
import traceback
from typing import Iterator, List

import pytest

from dstream_exactly_once import KafkaAuthError, OffsetRange
from dstream_exactly_once.kafka._metadata import KafkaMetadata
from dstream_exactly_once.kafka._params import parse_kafka_params
from dstream_exactly_once.kafka._reader_kafka_python import ConsumerCache, read_range

# Passwords unique to this file, so nothing else in the session could have registered them.
WRONG_PASSWORD = "wr0ng-Pa55-7c1e-in-logs"
WRONG_NON_ASCII = "wr0ng-pässwörd-\u20ac-9d2a"


class Capture(logging.Handler):
    """Keeps every record and its formatted line."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
        self.records: List[logging.LogRecord] = []
        self.lines: List[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        self.lines.append(self.format(record))


@pytest.fixture
def captured() -> Iterator[Capture]:
    root = logging.getLogger()
    handler = Capture()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)


def forms(secret: str) -> List[str]:
    """The password as text, and as it shows inside a bytes repr (the SASL PLAIN token)."""
    return [secret, repr(secret.encode("utf-8"))[2:-1]]


def exception_texts(exc: BaseException) -> List[str]:
    out = ["".join(traceback.format_exception(type(exc), exc, exc.__traceback__))]
    current: BaseException | None = exc
    while current is not None:
        out += [str(current), repr(current), repr(current.args)]
        current = current.__cause__ or current.__context__
    return out


def assert_nowhere(handler: Capture, secret: str, *extra_texts: str) -> None:
    assert handler.records, "nothing was logged: the test would prove nothing"
    for record in handler.records:
        texts = [record.getMessage(), repr(record.msg), repr(record.args), record.exc_text or "",
                 record.stack_info or ""]
        if record.exc_info and record.exc_info[1] is not None:
            texts += exception_texts(record.exc_info[1])
        for text in texts:
            for form in forms(secret):
                assert form not in text, f"password in a record of {record.name}: {text[:300]!r}"
    for line in handler.lines + list(extra_texts):
        for form in forms(secret):
            assert form not in line, f"password in a log line: {line[:300]!r}"


def sasl(kafka, user: str, password: str, **extra):
    return parse_kafka_params({"bootstrap.servers": kafka.sasl_bootstrap, "security.protocol": "SASL_PLAINTEXT",
                               "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": password,
                               **extra})


def test_right_password_never_logged_by_metadata_and_consumer(kafka, topic_name, captured):
    password = "alice-secret"
    kafka.create_topic(topic_name, 1)
    kafka.produce(topic_name, ["a", "b", "c"], partition=0)
    captured.records.clear()
    captured.lines.clear()
    config = sasl(kafka, "alice", password)
    md = KafkaMetadata(config)
    try:
        assert md.partitions([topic_name]) == {topic_name: [0]}
        assert md.latest([OffsetRange(topic_name, 0, 0, 0).topicPartition()])
    finally:
        md.close()
    cache = ConsumerCache()
    blocks = list(read_range(config, OffsetRange(topic_name, 0, 0, 3), poll_timeout_ms=20000, cache=cache))
    assert [v for b in blocks for v in b.values] == [b"a", b"b", b"c"]
    assert any(r.name.startswith("kafka.") for r in captured.records)
    assert_nowhere(captured, password, repr(config), repr(md))


@pytest.mark.parametrize("password", [WRONG_PASSWORD, WRONG_NON_ASCII])
def test_wrong_password_never_logged_by_the_credentials_check(kafka, captured, password):
    config = sasl(kafka, "alice", password, **{"request.timeout.ms": "5000"})
    md = KafkaMetadata(config)
    with pytest.raises(KafkaAuthError) as info:
        md.topics()
    md.close()
    assert "refused the credentials" in str(info.value)
    # the library's own SASL PLAIN check ran and kafka-python logged its requests
    assert any(r.name.startswith("kafka.") for r in captured.records)
    assert_nowhere(captured, password, *exception_texts(info.value))
