"""kafkaParams in Kafka's own key style, translated to kafka-python keyword arguments.

Spark 2.4 apps pass ``{"metadata.broker.list": ..., "auto.offset.reset": "smallest"}``; 0-10 apps
pass ``bootstrap.servers`` and friends. Both are accepted. Keys this library cannot honour are
rejected with one error listing all of them; ``enable.auto.commit=true`` is rejected because only
the driver decides offsets. Secrets (SASL and SSL passwords) are kept out of every repr and message.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Mapping, Optional

from ..errors import ConfigurationError, UnknownKafkaParamError

log = logging.getLogger(__name__)

__all__ = ["KafkaConfig", "parse_kafka_params"]

_SECRET_CLIENT_KEYS = frozenset({"sasl_plain_password", "ssl_password"})
_SECRET_KAFKA_KEYS = ("password", "jaas.config", "secret")


def _bool(key: str, v: Any) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.strip().lower() in ("true", "false"):
        return v.strip().lower() == "true"
    raise ConfigurationError(f"kafkaParams[{key!r}] must be true or false, got {v!r}")


def _int(key: str, v: Any) -> int:
    try:
        out = int(v)
    except (TypeError, ValueError):
        raise ConfigurationError(f"kafkaParams[{key!r}] must be an integer, got {v!r}") from None
    if out < 0:
        raise ConfigurationError(f"kafkaParams[{key!r}] must be >= 0, got {v!r}")
    return out


def _str(key: str, v: Any) -> str:
    if not isinstance(v, str) or not v:
        raise ConfigurationError(f"kafkaParams[{key!r}] must be a non-empty string, got {type(v).__name__}")
    return v


def _servers(key: str, v: Any) -> list[str]:
    items = v.split(",") if isinstance(v, str) else v
    if not isinstance(items, (list, tuple)) or not items:
        raise ConfigurationError(f"kafkaParams[{key!r}] must be 'host:port[,host:port…]', got {v!r}")
    out = []
    for item in items:
        item = str(item).strip()
        if not re.fullmatch(r"\[?[\w.\-:]+\]?:\d{1,5}", item):
            raise ConfigurationError(f"kafkaParams[{key!r}] has a bad broker address {item!r} (want host:port)")
        out.append(item)
    return out


# kafka key -> (kafka-python key, converter)
_DIRECT: Dict[str, tuple[str, Callable[[str, Any], Any]]] = {
    "client.id": ("client_id", _str),
    "client.rack": ("client_rack", _str),
    "request.timeout.ms": ("request_timeout_ms", _int),
    "fetch.max.bytes": ("fetch_max_bytes", _int),
    "fetch.min.bytes": ("fetch_min_bytes", _int),
    "fetch.max.wait.ms": ("fetch_max_wait_ms", _int),
    "max.partition.fetch.bytes": ("max_partition_fetch_bytes", _int),
    "max.poll.records": ("max_poll_records", _int),
    "receive.buffer.bytes": ("receive_buffer_bytes", _int),
    "send.buffer.bytes": ("send_buffer_bytes", _int),
    "connections.max.idle.ms": ("connections_max_idle_ms", _int),
    "reconnect.backoff.ms": ("reconnect_backoff_ms", _int),
    "reconnect.backoff.max.ms": ("reconnect_backoff_max_ms", _int),
    "retry.backoff.ms": ("retry_backoff_ms", _int),
    "metadata.max.age.ms": ("metadata_max_age_ms", _int),
    "check.crcs": ("check_crcs", _bool),
    "security.protocol": ("security_protocol", _str),
    "sasl.mechanism": ("sasl_mechanism", _str),
    "sasl.username": ("sasl_plain_username", _str),
    "sasl.password": ("sasl_plain_password", _str),
    "sasl.plain.username": ("sasl_plain_username", _str),
    "sasl.plain.password": ("sasl_plain_password", _str),
    "sasl.kerberos.service.name": ("sasl_kerberos_service_name", _str),
    "ssl.ca.location": ("ssl_cafile", _str),
    "ssl.cafile": ("ssl_cafile", _str),
    "ssl.certificate.location": ("ssl_certfile", _str),
    "ssl.certfile": ("ssl_certfile", _str),
    "ssl.key.location": ("ssl_keyfile", _str),
    "ssl.keyfile": ("ssl_keyfile", _str),
    "ssl.key.password": ("ssl_password", _str),
    "ssl.crl.location": ("ssl_crlfile", _str),
    "ssl.cipher.suites": ("ssl_ciphers", _str),
}

# Keys Spark/Kafka apps commonly carry that have no effect on an assign-only, driver-planned reader.
_IGNORED = frozenset({
    "zookeeper.connect", "zookeeper.connection.timeout.ms", "zookeeper.session.timeout.ms",
    "session.timeout.ms", "heartbeat.interval.ms", "max.poll.interval.ms", "auto.commit.interval.ms",
    "partition.assignment.strategy", "key.deserializer.encoding", "value.deserializer.encoding",
})

_FORBIDDEN = {
    "key.deserializer": "records are read as bytes; pass keyDecoder= instead",
    "value.deserializer": "records are read as bytes; pass valueDecoder= instead",
    "interceptor.classes": "JVM interceptors do not exist in kafka-python",
}

_RESET = {"smallest": "earliest", "earliest": "earliest", "largest": "latest", "latest": "latest", "none": "none"}


@dataclass(frozen=True)
class KafkaConfig:
    """Validated kafkaParams: kafka-python client kwargs plus the few keys the planner uses.

    ``auto_offset_reset`` is where a partition without a known offset starts (driver only;
    executors never reset). ``repr`` hides secrets.
    """

    client: Mapping[str, Any]
    group_id: Optional[str] = None
    auto_offset_reset: str = "latest"
    isolation_level: str = "read_uncommitted"
    original_keys: tuple[str, ...] = field(default=(), compare=False)

    @property
    def bootstrap(self) -> str:
        return ",".join(self.client["bootstrap_servers"])

    def redacted(self) -> Dict[str, Any]:
        return {k: ("***" if k in _SECRET_CLIENT_KEYS else v) for k, v in self.client.items()}

    def __repr__(self) -> str:
        return (f"KafkaConfig(bootstrap={self.bootstrap!r}, group_id={self.group_id!r}, "
                f"auto_offset_reset={self.auto_offset_reset!r}, isolation_level={self.isolation_level!r}, "
                f"client={self.redacted()!r})")

    def consumer_kwargs(self, **overrides: Any) -> Dict[str, Any]:
        """kwargs for an assign-only ``KafkaConsumer``: no group commits, no auto reset."""
        kw = dict(self.client)
        kw.update(enable_auto_commit=False, group_id=None, isolation_level=self.isolation_level,
                  auto_offset_reset="none")
        kw.update(overrides)
        return kw

    def admin_kwargs(self) -> Dict[str, Any]:
        from kafka.admin import KafkaAdminClient

        allowed = set(KafkaAdminClient.DEFAULT_CONFIG)
        return {k: v for k, v in self.client.items() if k in allowed}


def _parse_jaas(value: str) -> Dict[str, str]:
    found = dict(re.findall(r'(\w+)\s*=\s*"([^"]*)"', value))
    if "username" not in found or "password" not in found:
        raise ConfigurationError(
            "kafkaParams['sasl.jaas.config'] must contain username=\"…\" and password=\"…\" (value hidden)"
        )
    return {"sasl_plain_username": found["username"], "sasl_plain_password": found["password"]}


def parse_kafka_params(kafka_params: Mapping[str, Any]) -> KafkaConfig:
    """Validate and translate ``kafkaParams``; raise before anything connects.

    Raises :class:`UnknownKafkaParamError` listing every unknown key, and
    :class:`ConfigurationError` for bad values (naming the key; never a secret's value).
    """
    if not isinstance(kafka_params, Mapping):
        raise ConfigurationError(f"kafkaParams must be a dict, got {type(kafka_params).__name__}")
    params = dict(kafka_params)
    client: Dict[str, Any] = {}
    unknown = []
    group_id = None
    reset = "latest"
    isolation = "read_uncommitted"
    servers_key = None
    for key, value in params.items():
        if not isinstance(key, str):
            raise ConfigurationError(f"kafkaParams keys must be str, got {key!r}")
        if key in ("bootstrap.servers", "metadata.broker.list"):
            if servers_key is not None and _servers(key, value) != client["bootstrap_servers"]:
                raise ConfigurationError(f"kafkaParams has both {servers_key!r} and {key!r} with different brokers")
            client["bootstrap_servers"] = _servers(key, value)
            servers_key = key
        elif key == "group.id":
            group_id = _str(key, value)
        elif key == "auto.offset.reset":
            if str(value).lower() not in _RESET:
                raise ConfigurationError(
                    f"kafkaParams['auto.offset.reset'] must be one of {sorted(_RESET)}, got {value!r}")
            reset = _RESET[str(value).lower()]
        elif key == "enable.auto.commit":
            if _bool(key, value):
                raise ConfigurationError(
                    "kafkaParams['enable.auto.commit']=true is not allowed: offsets are decided by the driver "
                    "and stored with the results (set it to false or leave it out)")
        elif key == "isolation.level":
            if value not in ("read_committed", "read_uncommitted"):
                raise ConfigurationError(
                    f"kafkaParams['isolation.level'] must be 'read_committed' or 'read_uncommitted', got {value!r}")
            isolation = value
        elif key == "sasl.jaas.config":
            client.update(_parse_jaas(_str(key, value)))
        elif key == "ssl.endpoint.identification.algorithm":
            client["ssl_check_hostname"] = bool(value)
        elif key in _DIRECT:
            name, conv = _DIRECT[key]
            client[name] = conv(key, value)
        elif key in _FORBIDDEN:
            raise ConfigurationError(f"kafkaParams[{key!r}] is not supported: {_FORBIDDEN[key]}")
        elif key in _IGNORED:
            log.info("kafkaParams[%r] has no effect on the direct stream and is ignored", key)
        else:
            unknown.append(key)
    if unknown:
        raise UnknownKafkaParamError(
            f"unknown kafkaParams key(s): {', '.join(repr(k) for k in sorted(unknown))}; "
            "use Kafka consumer config names such as 'bootstrap.servers', 'group.id', 'auto.offset.reset'")
    if "bootstrap_servers" not in client:
        raise ConfigurationError("kafkaParams needs 'bootstrap.servers' (or Spark 2.4's 'metadata.broker.list')")
    proto = client.get("security_protocol", "PLAINTEXT")
    if proto not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
        raise ConfigurationError(f"kafkaParams['security.protocol'] {proto!r} is not one of "
                                 "PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL")
    if proto.startswith("SASL"):
        client.setdefault("sasl_mechanism", "PLAIN")
    return KafkaConfig(client=client, group_id=group_id, auto_offset_reset=reset, isolation_level=isolation,
                       original_keys=tuple(sorted(params)))
