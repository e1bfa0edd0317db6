"""One kafka-python admin client for a driver-side job that is not planning (group offsets,
timestamp look-ups), built from validated kafkaParams with errors translated at this boundary."""

from __future__ import annotations

import logging
from typing import Any, Optional

from ._errors_map import translate_kafka_error
from ._params import KafkaConfig

__all__ = ["broker_config", "open_admin"]

log = logging.getLogger(__name__)

_DEFAULT_TIMEOUT_MS = 10000


def open_admin(config: KafkaConfig, client_id: str, *, timeout_ms: Optional[int] = None) -> Any:
    """A connected ``KafkaAdminClient`` (raises :class:`KafkaUnavailableError`/:class:`KafkaAuthError`).

    ``timeout_ms`` bounds connecting and each request: kafkaParams' ``request.timeout.ms``, else 10 s.
    """
    from kafka.admin import KafkaAdminClient

    if timeout_ms is None:
        timeout_ms = int(config.client.get("request_timeout_ms", _DEFAULT_TIMEOUT_MS))
    kw = config.admin_kwargs()
    kw["request_timeout_ms"] = timeout_ms
    kw["bootstrap_timeout_ms"] = timeout_ms
    kw.setdefault("client_id", client_id)
    try:
        return KafkaAdminClient(**kw)
    except Exception as exc:  # noqa: BLE001 - translated at this boundary
        raise translate_kafka_error(exc, config.bootstrap, "connecting", config) from exc


def broker_config(admin: Any, key: str, config: KafkaConfig) -> Optional[str]:
    """The value of broker setting ``key`` (DescribeConfigs on one broker of the cluster; the
    library's transactional settings are cluster-wide in practice), or None when the broker does not
    report it or the client may not describe it (an authorization error: then nothing is checked).
    Other errors are translated at this boundary."""
    from kafka.admin import ConfigResource, ConfigResourceType

    try:
        brokers = admin.describe_cluster().get("brokers") or []
        if not brokers:
            return None
        first = brokers[0]
        broker = str(first.get("broker_id", first.get("node_id")))
        described = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, broker, {key: None})],
                                           config_filter="all")
    except Exception as exc:  # noqa: BLE001 - translated at this boundary
        if "Authorization" in type(exc).__name__:  # not allowed to describe the broker: nothing to compare with
            log.info("cannot read the broker setting %s at Kafka %s (%s); not checked", key, config.bootstrap,
                     type(exc).__name__)
            return None
        raise translate_kafka_error(exc, config.bootstrap, f"reading the broker setting {key}", config) from exc
    entry = described.get("broker", {}).get(broker, {}).get(key) if isinstance(described, dict) else None
    value = entry.get("value") if isinstance(entry, dict) else entry
    return None if value is None else str(value)
