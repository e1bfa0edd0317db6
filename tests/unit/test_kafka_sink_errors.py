"""The Kafka sink's error boundary: a bare kafka-python ``KafkaError`` naming a broker error code is
translated as that code's class, so it keeps the table's type and ``retriable`` flag."""

from __future__ import annotations

import kafka.errors as ke
import pytest

from dstream_exactly_once.errors import ConfigurationError, KafkaAuthError, KafkaUnavailableError
from dstream_exactly_once.kafka._errors_map import translate_kafka_error
from dstream_exactly_once.kafka.sinks._transactional import KafkaTransactionalSink, broker_error


@pytest.mark.parametrize("text, expected, retriable", [
    ("Unexpected error in InitProducerIdResponse: [Error 50] InvalidTransactionTimeoutError", ConfigurationError,
     False),
    ("Unexpected error in AddOffsetsToTxnResponse: [Error 30] GroupAuthorizationFailedError", KafkaAuthError, False),
    ("Unexpected error in TxnOffsetCommitResponse: [Error 15] CoordinatorNotAvailableError", KafkaUnavailableError,
     True),
])
def test_a_bare_kafka_error_naming_a_code_keeps_that_codes_type_and_flag(text, expected, retriable) -> None:
    err = translate_kafka_error(broker_error(ke.KafkaError(text)), "b:9092", "writing")
    assert type(err) is expected and err.retriable is retriable


@pytest.mark.parametrize("exc", [ke.KafkaError("no code here"), ke.KafkaError("[Error 50] NotTheRightName"),
                                 ke.KafkaTimeoutError("[Error 50] InvalidTransactionTimeoutError")])
def test_other_errors_are_left_as_they_are(exc) -> None:
    assert broker_error(exc) is exc


def test_a_partitioner_that_is_not_callable_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="partitioner"):
        KafkaTransactionalSink({"bootstrap.servers": "b:9092"}, "out", partitioner=3)  # type: ignore[arg-type]
