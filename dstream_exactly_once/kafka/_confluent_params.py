"""Validated kafkaParams (:class:`KafkaConfig`) as librdkafka properties, for the confluent-kafka reader.

The optional executor reader (:mod:`._reader_confluent`, ``pip install dstream-exactly-once[confluent]``)
gets the same kafkaParams as the default kafka-python one. They were parsed once into kafka-python
settings (:mod:`._params`); this module maps those settings to librdkafka's names, adds the fixed
reader settings (no commits, ``auto.offset.reset=error`` so a vanished offset reaches the data-loss
policy, 4 MiB partition fetches unless kafkaParams say otherwise — the kafka-python reader's
sizes), and checks on the driver that librdkafka accepts the result. librdkafka errors are mapped
into this library's tree here too. Passwords never appear in a message or a repr.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Dict, Optional, Tuple

from .._redaction import redact
from ..errors import (
    ConfigurationError,
    DataLossError,
    DStreamExactlyOnceError,
    KafkaAuthError,
    KafkaRejectedError,
    KafkaUnavailableError,
    OffsetRangeError,
)
from ._consumers import EXECUTOR_FETCH_BYTES
from ._params import KafkaConfig
from ._spark_conf import READER_KEY

log = logging.getLogger(__name__)

__all__ = ["INSTALL_HINT", "check_confluent_config", "librdkafka_properties", "require_confluent_kafka",
           "translate_confluent_error"]

INSTALL_HINT = "pip install dstream-exactly-once[confluent]"
#: group.id of the executors' consumers when kafkaParams give none (librdkafka needs one; assign-only
#: consumers never join the group nor commit to it)
EXECUTOR_GROUP = "dstream-exactly-once-executor"
_SECRETS = frozenset({"sasl.password", "ssl.key.password"})


def _same(v: Any) -> Any:
    return v


# kafka-python setting (KafkaConfig.client) -> (kafkaParams key, librdkafka property, value converter)
_PROPERTIES: Dict[str, Tuple[str, str, Callable[[Any], Any]]] = {
    "bootstrap_servers": ("bootstrap.servers", "bootstrap.servers", ",".join),
    "client_id": ("client.id", "client.id", _same),
    "client_rack": ("client.rack", "client.rack", _same),
    "request_timeout_ms": ("request.timeout.ms", "socket.timeout.ms", _same),
    "fetch_max_bytes": ("fetch.max.bytes", "fetch.max.bytes", _same),
    "fetch_min_bytes": ("fetch.min.bytes", "fetch.min.bytes", _same),
    "fetch_max_wait_ms": ("fetch.max.wait.ms", "fetch.wait.max.ms", _same),
    "max_partition_fetch_bytes": ("max.partition.fetch.bytes", "max.partition.fetch.bytes", _same),
    "receive_buffer_bytes": ("receive.buffer.bytes", "socket.receive.buffer.bytes", _same),
    "send_buffer_bytes": ("send.buffer.bytes", "socket.send.buffer.bytes", _same),
    "connections_max_idle_ms": ("connections.max.idle.ms", "connections.max.idle.ms", _same),
    "reconnect_backoff_ms": ("reconnect.backoff.ms", "reconnect.backoff.ms", _same),
    "reconnect_backoff_max_ms": ("reconnect.backoff.max.ms", "reconnect.backoff.max.ms", _same),
    "retry_backoff_ms": ("retry.backoff.ms", "retry.backoff.ms", _same),
    "metadata_max_age_ms": ("metadata.max.age.ms", "metadata.max.age.ms", _same),
    "check_crcs": ("check.crcs", "check.crcs", _same),
    "security_protocol": ("security.protocol", "security.protocol", _same),
    "sasl_mechanism": ("sasl.mechanism", "sasl.mechanism", _same),
    "sasl_plain_username": ("sasl.username", "sasl.username", _same),
    "sasl_plain_password": ("sasl.password", "sasl.password", _same),
    "sasl_kerberos_service_name": ("sasl.kerberos.service.name", "sasl.kerberos.service.name", _same),
    "ssl_cafile": ("ssl.ca.location", "ssl.ca.location", _same),
    "ssl_certfile": ("ssl.certificate.location", "ssl.certificate.location", _same),
    "ssl_keyfile": ("ssl.key.location", "ssl.key.location", _same),
    "ssl_password": ("ssl.key.password", "ssl.key.password", _same),
    "ssl_crlfile": ("ssl.crl.location", "ssl.crl.location", _same),
    "ssl_ciphers": ("ssl.cipher.suites", "ssl.cipher.suites", _same),
    "ssl_check_hostname": ("ssl.endpoint.identification.algorithm", "ssl.endpoint.identification.algorithm",
                           lambda v: "https" if v else "none"),
}
#: settings both readers leave to the reader itself: it asks for up to 10000 records per call
_READER_DECIDES = frozenset({"max_poll_records"})


def librdkafka_properties(config: KafkaConfig) -> Dict[str, Any]:
    """The librdkafka properties of an executor consumer for ``config`` (contains passwords: never log it).

    Raises :class:`ConfigurationError` for a kafka-python setting without a librdkafka equivalent.
    """
    config.register_secrets()
    props: Dict[str, Any] = {
        "group.id": config.group_id or EXECUTOR_GROUP,
        "client.id": "dstream-exactly-once-executor",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "error",
        "enable.partition.eof": False,
        "isolation.level": config.isolation_level,
        "max.partition.fetch.bytes": EXECUTOR_FETCH_BYTES,
        # librdkafka stops fetching a partition once queued.min.messages (100,000) are queued and
        # then waits fetch.queue.backoff.ms (default 1 s) before the next fetch, even if the task
        # drained the queue meanwhile: a range of a few 100,000 records would wait ~1 s per 100,000
        "fetch.queue.backoff.ms": 1,
    }
    for name, value in config.client.items():
        if name in _READER_DECIDES:
            continue
        if name not in _PROPERTIES:
            raise ConfigurationError(
                f"kafkaParams setting {name!r} cannot be honoured by the confluent-kafka reader (no librdkafka "
                f"equivalent); remove it or set spark.streaming.kafka.reader=kafka-python")
        _key, prop, conv = _PROPERTIES[name]
        props[prop] = conv(value)
    fetch_max = int(props.get("fetch.max.bytes", 52428800))
    if fetch_max + 512 > 100000000:  # librdkafka wants receive.message.max.bytes > fetch.max.bytes
        props["receive.message.max.bytes"] = fetch_max + 512
    return props


def describe_properties(props: Dict[str, Any]) -> Dict[str, Any]:
    """``props`` with passwords masked (for messages and logs)."""
    return {k: ("***" if k in _SECRETS else v) for k, v in props.items()}


def require_confluent_kafka(key: str = READER_KEY) -> None:
    """Raise :class:`ConfigurationError` unless confluent-kafka (librdkafka) can be imported."""
    try:
        import confluent_kafka  # noqa: F401
    except ImportError as exc:
        raise ConfigurationError(
            f"{key}='confluent-kafka' needs the confluent-kafka package, which is not installed ({exc}); "
            f"install it with `{INSTALL_HINT}` or use {key}='kafka-python'") from None


def check_confluent_config(config: KafkaConfig) -> None:
    """On the driver, before anything runs: librdkafka must accept ``config`` as a consumer config.

    A consumer is created with the executors' properties (librdkafka validates them without
    connecting) and closed. A refused setting raises :class:`ConfigurationError` naming the
    kafkaParams key, its value (never a password's) and librdkafka's reason (which states the
    allowed values, e.g. ``allowed range 0..100000000``).
    """
    require_confluent_kafka()
    from confluent_kafka import Consumer

    props = librdkafka_properties(config)
    try:
        consumer = Consumer(props, logger=logging.getLogger(__name__ + ".librdkafka"))
    except Exception as exc:  # noqa: BLE001 - librdkafka's reason, re-raised as a configuration error
        reason = _error_text(exc)
        named = _named_setting(config, reason)
        if named is not None:
            key, prop, shown = named
            raise ConfigurationError(
                f"kafkaParams[{key!r}]={shown} cannot be honoured by the confluent-kafka reader (librdkafka "
                f"{prop!r}): {reason}; change it or set spark.streaming.kafka.reader=kafka-python") from None
        raise ConfigurationError(f"librdkafka refuses the confluent-kafka reader's consumer config "
                                 f"{describe_properties(props)!r}: {reason}") from None
    consumer.close()


def _named_setting(config: KafkaConfig, reason: str) -> Optional[Tuple[str, str, str]]:
    """(kafkaParams key, librdkafka property, shown value) of the setting librdkafka's ``reason`` names."""
    for name, value in config.client.items():
        if name not in _PROPERTIES:
            continue
        key, prop, conv = _PROPERTIES[name]
        if (f'"{prop}"' in reason or f"{prop} " in reason or f"{prop}:" in reason
                or (prop == "sasl.mechanism" and "SASL mechanism" in reason)):
            return key, prop, "(value hidden)" if prop in _SECRETS else repr(conv(value))
    return None


def _error_text(exc: BaseException) -> str:
    err: Any = exc.args[0] if exc.args else None
    text = err.str() if hasattr(err, "str") else str(exc)
    return redact(" ".join(str(text).split()))


# librdkafka error names (KafkaError.name()) -> our class; others: KafkaUnavailableError when librdkafka
# calls them retriable, else KafkaRejectedError
_AUTH_CODES = frozenset({"_AUTHENTICATION", "SASL_AUTHENTICATION_FAILED", "TOPIC_AUTHORIZATION_FAILED",
                         "GROUP_AUTHORIZATION_FAILED", "CLUSTER_AUTHORIZATION_FAILED", "_SSL"})
_LOST_CODES = frozenset({"UNKNOWN_TOPIC_OR_PART", "_UNKNOWN_TOPIC", "_UNKNOWN_PARTITION", "UNKNOWN_TOPIC_ID"})
_RANGE_CODES = frozenset({"OFFSET_OUT_OF_RANGE", "_AUTO_OFFSET_RESET"})
_CONFIG_CODES = frozenset({"_INVALID_ARG", "_UNSUPPORTED_FEATURE", "UNSUPPORTED_VERSION", "INVALID_CONFIG"})
_UNREACHABLE_CODES = frozenset({"_TRANSPORT", "_ALL_BROKERS_DOWN", "_RESOLVE", "_TIMED_OUT", "_MSG_TIMED_OUT",
                                "_WAIT_COORD", "REQUEST_TIMED_OUT", "BROKER_NOT_AVAILABLE",
                                "LEADER_NOT_AVAILABLE", "NOT_LEADER_FOR_PARTITION"})


def translate_confluent_error(err: Any, bootstrap: str, what: str) -> DStreamExactlyOnceError:
    """Map a confluent-kafka ``KafkaError`` (or a ``KafkaException`` carrying one) to this library's tree.

    The caller raises it ``from`` the original exception when there is one. librdkafka's texts
    name brokers and settings, never passwords.
    """
    if isinstance(err, BaseException):
        if not (err.args and hasattr(err.args[0], "name")):
            return KafkaUnavailableError(f"Kafka at {bootstrap}: unexpected {type(err).__name__} while {what}: {err}")
        err = err.args[0]
    name, text = str(err.name()), redact(" ".join(str(err.str()).split()))
    detail = f"{name}: {text}"
    out: DStreamExactlyOnceError
    if name in _AUTH_CODES:
        out = KafkaAuthError(f"Kafka at {bootstrap} refused access while {what}: {detail}")
    elif name in _LOST_CODES:
        out = DataLossError(f"topic, partition or offsets no longer exist at Kafka {bootstrap} while {what}: {detail}")
    elif name in _RANGE_CODES:
        out = OffsetRangeError(f"offset out of range at Kafka {bootstrap} while {what}: {detail}")
    elif name in _CONFIG_CODES:
        out = ConfigurationError(f"Kafka at {bootstrap} refused the configuration or request while {what}: {detail}")
    elif name in _UNREACHABLE_CODES:
        out = KafkaUnavailableError(f"cannot reach Kafka at {bootstrap} while {what}: {detail}")
    elif bool(err.retriable()) and not bool(err.fatal()):
        out = KafkaUnavailableError(f"Kafka at {bootstrap} failed while {what}: {detail}")
    else:
        out = KafkaRejectedError(f"Kafka at {bootstrap} failed while {what}: {detail}")
    return out


def is_out_of_range(err: Optional[Any]) -> bool:
    """Whether a consumer error says the fetch offset is no longer in the log."""
    return err is not None and str(err.name()) in _RANGE_CODES
