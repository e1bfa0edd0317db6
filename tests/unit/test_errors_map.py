"""kafka-python's exceptions → our error tree: every class in ``kafka.errors`` is mapped (no broker)."""

from __future__ import annotations

import inspect

import kafka.errors as ke
import pytest

from dstream_exactly_once.errors import (
    ConfigurationError,
    DataLossError,
    DStreamExactlyOnceError,
    KafkaAuthError,
    KafkaRejectedError,
    KafkaUnavailableError,
    OffsetRangeError,
)
from dstream_exactly_once.kafka._errors_map import BASE_RULES, TABLE, rule_for, translate_kafka_error

BROKERS = "127.0.0.1:9092"
KAFKA_ERRORS = sorted({c for _, c in inspect.getmembers(ke, inspect.isclass) if issubclass(c, ke.KafkaError)},
                      key=lambda c: c.__name__)


def _instance(cls):
    try:
        return cls("boom")
    except TypeError:  # a few take other arguments
        return cls.__new__(cls)


def test_every_kafka_python_error_class_is_mapped_explicitly_or_by_a_base_class_rule():
    assert len(KAFKA_ERRORS) > 100  # kafka.errors was really inspected
    unmapped = [c.__name__ for c in KAFKA_ERRORS if rule_for(c) is None]
    assert unmapped == [], f"add these kafka-python errors to kafka/_errors_map.py TABLE: {unmapped}"


def test_a_class_kafka_python_adds_later_is_reported_as_unmapped():
    new_broker_error = type("BrandNewError", (ke.BrokerResponseError,), {"__module__": "kafka.errors"})
    new_retriable = type("BrandNewRetriableError", (ke.RetriableError,), {"__module__": "kafka.errors"})
    assert rule_for(new_broker_error) is None  # KafkaError / BrokerResponseError are not rules
    assert rule_for(new_retriable) is not None and rule_for(new_retriable).error is KafkaUnavailableError
    # at run time it still becomes one of ours: the nearest mapped base class
    err = translate_kafka_error(new_broker_error("x"), BROKERS, "reading")
    assert type(err) is KafkaRejectedError and not err.retriable


def test_the_table_names_only_classes_this_kafka_python_has():
    names = {c.__name__ for c in KAFKA_ERRORS}
    assert sorted(set(TABLE) - names) == []
    assert {base for base, _ in BASE_RULES} <= names


@pytest.mark.parametrize("cls", KAFKA_ERRORS, ids=lambda c: c.__name__)
def test_each_class_translates_to_its_rule(cls):
    rule = rule_for(cls)
    err = translate_kafka_error(_instance(cls), BROKERS, "reading t-0")
    assert isinstance(err, DStreamExactlyOnceError)
    if not rule.connection:  # connection failures may become KafkaAuthError after the SASL probe
        assert type(err) is rule.error
    assert err.retriable is rule.retriable
    assert BROKERS in str(err)
    assert "reading t-0" in str(err)


@pytest.mark.parametrize(("cls", "ours", "retriable"), [
    (ke.KafkaConnectionError, KafkaUnavailableError, True),
    (ke.KafkaTimeoutError, KafkaUnavailableError, True),
    (ke.NotLeaderForPartitionError, KafkaUnavailableError, True),
    (ke.RequestTimedOutError, KafkaUnavailableError, True),
    (ke.SaslAuthenticationFailedError, KafkaAuthError, False),
    (ke.TopicAuthorizationFailedError, KafkaAuthError, False),
    (ke.KafkaConfigurationError, ConfigurationError, False),
    (ke.UnsupportedVersionError, ConfigurationError, False),
    (ke.MessageSizeTooLargeError, ConfigurationError, False),
    (ke.UnknownTopicOrPartitionError, DataLossError, False),
    (ke.OffsetOutOfRangeError, OffsetRangeError, False),
    (ke.CorruptRecordError, KafkaRejectedError, False),
    (ke.ProducerFencedError, KafkaRejectedError, False),
])
def test_representative_mappings(cls, ours, retriable):
    err = translate_kafka_error(cls("boom"), BROKERS, "reading t-0")
    assert type(err) is ours and err.retriable is retriable


def test_errors_that_are_not_kafka_pythons():
    assert type(translate_kafka_error(TimeoutError("t"), BROKERS, "x")) is KafkaUnavailableError
    assert type(translate_kafka_error(ConnectionRefusedError("r"), BROKERS, "x")) is KafkaUnavailableError
    err = translate_kafka_error(RuntimeError("odd"), BROKERS, "listing topics")
    assert type(err) is KafkaUnavailableError and "unexpected RuntimeError while listing topics: odd" in str(err)
