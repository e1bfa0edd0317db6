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
from typing import Any, Callable, Dict, List, Mapping, Optional

from .._redaction import redact_url, register_secret
from ..core._options import parse_bool, parse_int
from ..errors import ConfigurationError, UnknownKafkaParamError

log = logging.getLogger(__name__)

__all__ = ["KafkaConfig", "known_kafka_params", "parse_kafka_params"]

_SECRET_CLIENT_KEYS = frozenset({"sasl_plain_password", "ssl_password"})


_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1


def _label(key: str) -> str:
    return f"kafkaParams[{key!r}]"


def _bool(key: str, v: Any) -> bool:
    return parse_bool(_label(key), v)


def _int(key: str, v: Any, lo: int = 0, hi: int = _INT32_MAX) -> int:
    """An int (or its decimal string) in ``[lo, hi]``; bools and floats are refused, not truncated."""
    return parse_int(_label(key), v, lo, hi)


def _int_range(lo: int, hi: int = _INT32_MAX) -> Callable[[str, Any], int]:
    return lambda key, v: _int(key, v, lo, hi)


def _buffer(key: str, v: Any) -> Optional[int]:
    """Socket buffer size; Kafka's -1 means the OS default (kafka-python: ``None``)."""
    out = _int(key, v, -1)
    return None if out == -1 else out


def _str(key: str, v: Any) -> str:
    if not isinstance(v, str) or not v:
        raise ConfigurationError(f"kafkaParams[{key!r}] must be a non-empty string, got {v!r}")
    return v


def _secret(key: str, v: Any) -> str:
    """Like :func:`_str`, but the message never shows the value, and the value is registered for
    redaction from every log record of this process."""
    if not isinstance(v, str) or not v:
        raise ConfigurationError(
            f"kafkaParams[{key!r}] must be a non-empty string, got a {type(v).__name__} (value hidden)")
    register_secret(v)
    return v


_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def _protocol(key: str, v: Any) -> str:
    """Kafka reads ``security.protocol`` case-insensitively."""
    if not isinstance(v, str) or v.strip().upper() not in _PROTOCOLS:
        raise ConfigurationError(f"kafkaParams[{key!r}] {v!r} is not one of {', '.join(_PROTOCOLS)}")
    return v.strip().upper()


def _sasl_mechanisms() -> list[str]:
    try:
        from kafka.net.sasl import SASL_MECHANISMS  # kafka-python 3

        return sorted(SASL_MECHANISMS)
    except ImportError:  # pragma: no cover - older kafka-python
        return ["GSSAPI", "OAUTHBEARER", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]


def _mechanism(key: str, v: Any) -> str:
    allowed = _sasl_mechanisms()
    if not isinstance(v, str) or v not in allowed:
        raise ConfigurationError(f"kafkaParams[{key!r}] must be one of {allowed}, got {v!r}")
    return v


def _ciphers(key: str, v: Any) -> str:
    """Kafka's comma-separated list, given to OpenSSL (which kafka-python uses) colon-separated."""
    import ssl

    text = _str(key, v)
    ciphers = ":".join(c.strip() for c in re.split(r"[,:]", text) if c.strip())
    try:
        ssl.create_default_context().set_ciphers(ciphers)
    except ssl.SSLError:
        raise ConfigurationError(
            f"kafkaParams[{key!r}] selects no cipher OpenSSL knows: {v!r}; use OpenSSL cipher names such as "
            "'ECDHE-RSA-AES128-GCM-SHA256' (Java's 'TLS_ECDHE_…' names do not work in kafka-python)") from None
    return ciphers


def _hostname_check(key: str, v: Any) -> bool:
    """Kafka: ``https`` checks the broker's host name against its certificate, ``''`` turns it off."""
    if isinstance(v, str) and v.strip().lower() in ("https", ""):
        return v.strip() != ""
    raise ConfigurationError(
        f"kafkaParams[{key!r}] must be 'https' (check the broker's host name) or '' (do not check), got {v!r}")


def _port_ok(item: str) -> bool:
    port = int(item.rpartition(":")[2])
    return 1 <= port <= 65535


def _servers(key: str, v: Any) -> list[str]:
    items = v.split(",") if isinstance(v, str) else v
    if not isinstance(items, (list, tuple)) or not items:
        raise ConfigurationError(f"kafkaParams[{key!r}] must be 'host:port[,host:port…]', got "
                                 f"{redact_url(v) if isinstance(v, str) else v!r}")
    out = []
    for item in items:
        item = str(item).strip()
        if not re.fullmatch(r"\[?[\w.\-:]+\]?:\d{1,5}", item):
            raise ConfigurationError(f"kafkaParams[{key!r}] has a bad broker address {redact_url(item)!r} "
                                     f"(want host:port)")
        if not _port_ok(item):
            raise ConfigurationError(
                f"kafkaParams[{key!r}] has a bad broker address {redact_url(item)!r}: the port must be 1..65535")
        out.append(item)
    return out


# kafka key -> (kafka-python key, converter); ranges as Kafka's ConsumerConfig defines them
_DIRECT: Dict[str, tuple[str, Callable[[str, Any], Any]]] = {
    "client.id": ("client_id", _str),
    "client.rack": ("client_rack", _str),
    "request.timeout.ms": ("request_timeout_ms", _int_range(1)),
    "fetch.max.bytes": ("fetch_max_bytes", _int_range(0)),
    "fetch.min.bytes": ("fetch_min_bytes", _int_range(0)),
    "fetch.max.wait.ms": ("fetch_max_wait_ms", _int_range(0)),
    "max.partition.fetch.bytes": ("max_partition_fetch_bytes", _int_range(0)),
    "max.poll.records": ("max_poll_records", _int_range(1)),
    "receive.buffer.bytes": ("receive_buffer_bytes", _buffer),
    "send.buffer.bytes": ("send_buffer_bytes", _buffer),
    "connections.max.idle.ms": ("connections_max_idle_ms", _int_range(0, _INT64_MAX)),
    "reconnect.backoff.ms": ("reconnect_backoff_ms", _int_range(0, _INT64_MAX)),
    "reconnect.backoff.max.ms": ("reconnect_backoff_max_ms", _int_range(0, _INT64_MAX)),
    "retry.backoff.ms": ("retry_backoff_ms", _int_range(0, _INT64_MAX)),
    "metadata.max.age.ms": ("metadata_max_age_ms", _int_range(0, _INT64_MAX)),
    "check.crcs": ("check_crcs", _bool),
    "security.protocol": ("security_protocol", _protocol),
    "sasl.mechanism": ("sasl_mechanism", _mechanism),
    "sasl.username": ("sasl_plain_username", _str),
    "sasl.password": ("sasl_plain_password", _secret),
    "sasl.plain.username": ("sasl_plain_username", _str),
    "sasl.plain.password": ("sasl_plain_password", _secret),
    "sasl.kerberos.service.name": ("sasl_kerberos_service_name", _str),
    "ssl.ca.location": ("ssl_cafile", _str),
    "ssl.cafile": ("ssl_cafile", _str),
    "ssl.certificate.location": ("ssl_certfile", _str),
    "ssl.certfile": ("ssl_certfile", _str),
    "ssl.key.location": ("ssl_keyfile", _str),
    "ssl.keyfile": ("ssl_keyfile", _str),
    "ssl.key.password": ("ssl_password", _secret),
    "ssl.crl.location": ("ssl_crlfile", _str),
    "ssl.cipher.suites": ("ssl_ciphers", _ciphers),
    "ssl.endpoint.identification.algorithm": ("ssl_check_hostname", _hostname_check),
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

def known_kafka_params() -> List[str]:
    """Every kafkaParams key the direct stream uses, sorted (the keys it accepts and ignores are
    ``_IGNORED``; refused ones, with the reason, ``_FORBIDDEN``)."""
    return sorted({"bootstrap.servers", "metadata.broker.list", "sasl.jaas.config", "group.id", "auto.offset.reset",
                   "enable.auto.commit", "isolation.level", *_DIRECT})


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

    def __post_init__(self) -> None:
        self.register_secrets()

    def __setstate__(self, state: Dict[str, Any]) -> None:
        """Unpickling (on an executor) registers the passwords for redaction in that process."""
        self.__dict__.update(state)
        self.register_secrets()

    def register_secrets(self) -> None:
        """Register this config's passwords for log redaction in *this* process (see
        :mod:`dstream_exactly_once._redaction`); an executor gets the config unpickled, not parsed."""
        for key in _SECRET_CLIENT_KEYS:
            value = self.client.get(key)
            if isinstance(value, str):
                register_secret(value)

    def consumer_kwargs(self, **overrides: Any) -> Dict[str, Any]:
        """kwargs for an assign-only ``KafkaConsumer``: no group commits, no auto reset."""
        self.register_secrets()
        kw = dict(self.client)
        kw.update(enable_auto_commit=False, group_id=None, isolation_level=self.isolation_level,
                  auto_offset_reset="none")
        kw.update(overrides)
        return kw

    def admin_kwargs(self) -> Dict[str, Any]:
        from kafka.admin import KafkaAdminClient

        self.register_secrets()
        allowed = set(KafkaAdminClient.DEFAULT_CONFIG)
        return {k: v for k, v in self.client.items() if k in allowed}


def _parse_jaas(key: str, value: Any) -> Dict[str, str]:
    if not isinstance(value, str) or not value:
        raise ConfigurationError(
            f"kafkaParams[{key!r}] must be a non-empty string, got a {type(value).__name__} (value hidden)")
    found = dict(re.findall(r'(\w+)\s*=\s*"([^"]*)"', value))
    if found.get("password"):
        register_secret(found["password"])
    if not found.get("username") or not found.get("password"):
        raise ConfigurationError(
            f"kafkaParams[{key!r}] must contain username=\"…\" and password=\"…\" (value hidden)")
    return {"sasl_plain_username": found["username"], "sasl_plain_password": found["password"]}


def _reset(key: str, value: Any) -> str:
    """``auto.offset.reset``: Kafka's names and Spark 2.4's ``smallest``/``largest``, any case."""
    if not isinstance(value, str) or value.strip().lower() not in _RESET:
        raise ConfigurationError(f"kafkaParams[{key!r}] must be one of {sorted(_RESET)}, got {value!r}")
    return _RESET[value.strip().lower()]


def _isolation(key: str, value: Any) -> str:
    if not isinstance(value, str) or value.strip().lower() not in ("read_committed", "read_uncommitted"):
        raise ConfigurationError(
            f"kafkaParams[{key!r}] must be 'read_committed' or 'read_uncommitted', got {value!r}")
    return value.strip().lower()


def _translate(key: str, value: Any) -> Dict[str, Any]:
    """kafka-python kwargs for one key that maps onto client settings."""
    if key in ("bootstrap.servers", "metadata.broker.list"):
        return {"bootstrap_servers": _servers(key, value)}
    if key == "sasl.jaas.config":
        return _parse_jaas(key, value)
    name, conv = _DIRECT[key]
    return {name: conv(key, value)}


def _set(client: Dict[str, Any], source: Dict[str, str], key: str, values: Dict[str, Any]) -> None:
    """Store ``values`` from ``key``; two keys giving one setting different values is an error."""
    for name, value in values.items():
        if name in client and client[name] != value:
            other = source[name]
            shown = "(values hidden)" if name in _SECRET_CLIENT_KEYS else f"({client[name]!r} and {value!r})"
            raise ConfigurationError(
                f"kafkaParams has both {other!r} and {key!r} with different values {shown}; give one of them")
        client[name] = value
        source[name] = key


# client settings that only mean something under a protocol that uses SASL / SSL
_SASL_SETTINGS = frozenset({"sasl_mechanism", "sasl_plain_username", "sasl_plain_password",
                            "sasl_kerberos_service_name"})
_SSL_SETTINGS = frozenset({"ssl_cafile", "ssl_certfile", "ssl_keyfile", "ssl_password", "ssl_crlfile",
                           "ssl_ciphers", "ssl_check_hostname"})
# kafka-python's consumer defaults, for its timeout ordering check
_CONSUMER_DEFAULTS = {"fetch_max_wait_ms": 500, "request_timeout_ms": 30000, "connections_max_idle_ms": 540000}


def _check_combination(client: Dict[str, Any], source: Dict[str, str]) -> None:
    """Settings that are each valid but do not work together (checked here, not on an executor)."""
    proto = client.get("security_protocol", "PLAINTEXT")
    unused = [(_SASL_SETTINGS, "SASL", ("SASL_PLAINTEXT", "SASL_SSL")),
              (_SSL_SETTINGS, "SSL", ("SSL", "SASL_SSL"))]
    for settings, what, protocols in unused:
        keys = sorted({source[n] for n in settings if n in client})
        if keys and proto not in protocols:
            raise ConfigurationError(
                f"kafkaParams {', '.join(repr(k) for k in keys)} would be ignored: 'security.protocol' is "
                f"{proto!r}; {what} settings need one of {', '.join(protocols)}")
    if proto.startswith("SASL"):
        mechanism = client.setdefault("sasl_mechanism", "PLAIN")
        if mechanism == "PLAIN" or mechanism.startswith("SCRAM-"):
            needed = (("sasl_plain_username", "sasl.username"), ("sasl_plain_password", "sasl.password"))
            missing = [k for n, k in needed if not client.get(n)]
            if missing:
                raise ConfigurationError(
                    f"kafkaParams: sasl.mechanism {mechanism!r} needs {' and '.join(repr(m) for m in missing)} "
                    "(or 'sasl.jaas.config' with username=\"…\" password=\"…\")")
        elif mechanism == "OAUTHBEARER":
            raise ConfigurationError(
                "kafkaParams['sasl.mechanism']='OAUTHBEARER' needs a token provider object, which kafkaParams "
                "cannot carry; allowed here: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, GSSAPI")
    timeouts = {n: client.get(n, d) for n, d in _CONSUMER_DEFAULTS.items()}
    if not timeouts["fetch_max_wait_ms"] < timeouts["request_timeout_ms"] < timeouts["connections_max_idle_ms"]:
        raise ConfigurationError(
            "kafkaParams need fetch.max.wait.ms < request.timeout.ms < connections.max.idle.ms, got "
            f"{timeouts['fetch_max_wait_ms']!r} < {timeouts['request_timeout_ms']!r} < "
            f"{timeouts['connections_max_idle_ms']!r} (defaults 500, 30000, 540000)")


def parse_kafka_params(kafka_params: Mapping[str, Any]) -> KafkaConfig:
    """Validate and translate ``kafkaParams``; raise before anything connects.

    Raises :class:`UnknownKafkaParamError` listing every unknown key, and
    :class:`ConfigurationError` for bad values (naming the key and the value, except a secret's).
    Passwords are registered with :func:`dstream_exactly_once._redaction.register_secret` first, so
    no log record of this process shows them afterwards.
    """
    if not isinstance(kafka_params, Mapping):
        raise ConfigurationError(f"kafkaParams must be a dict, got {type(kafka_params).__name__}")
    params = dict(kafka_params)
    for key in ("sasl.password", "sasl.plain.password", "ssl.key.password"):  # before any message
        if isinstance(params.get(key), str):
            register_secret(params[key])
    client: Dict[str, Any] = {}
    source: Dict[str, str] = {}  # client setting -> the kafkaParams key it came from
    unknown = []
    group_id = None
    reset = "latest"
    isolation = "read_uncommitted"
    for key, value in params.items():
        if not isinstance(key, str):
            raise ConfigurationError(f"kafkaParams keys must be str, got {key!r}")
        if key in ("bootstrap.servers", "metadata.broker.list", "sasl.jaas.config") or key in _DIRECT:
            _set(client, source, key, _translate(key, value))
        elif key == "group.id":
            group_id = _str(key, value)
        elif key == "auto.offset.reset":
            reset = _reset(key, value)
        elif key == "enable.auto.commit":
            if _bool(key, value):
                raise ConfigurationError(
                    "kafkaParams['enable.auto.commit']=true is not allowed: offsets are decided by the driver "
                    "and stored with the results (set it to false or leave it out)")
        elif key == "isolation.level":
            isolation = _isolation(key, value)
        elif key in _FORBIDDEN:
            raise ConfigurationError(f"kafkaParams[{key!r}] is not supported: {_FORBIDDEN[key]}")
        elif key in _IGNORED:
            log.info("kafkaParams[%r] has no effect on the direct stream and is ignored", key)
        else:
            unknown.append(key)
    if unknown:
        raise UnknownKafkaParamError(
            f"unknown kafkaParams key(s): {', '.join(repr(k) for k in sorted(unknown))}; allowed keys: "
            f"{', '.join(known_kafka_params())} (also accepted and ignored: {', '.join(sorted(_IGNORED))})")
    if "bootstrap_servers" not in client:
        raise ConfigurationError("kafkaParams needs 'bootstrap.servers' (or Spark 2.4's 'metadata.broker.list')")
    for name in ("receive_buffer_bytes", "send_buffer_bytes"):
        if name in client and client[name] is None:
            del client[name]  # -1: the OS default, which is kafka-python's default
    _check_combination(client, source)
    return KafkaConfig(client=client, group_id=group_id, auto_offset_reset=reset, isolation_level=isolation,
                       original_keys=tuple(sorted(params)))
