"""Driver-side broker access: topic metadata and offset look-ups, behind one small seam.

:class:`KafkaMetadata` is the only place the driver talks to Kafka; planners take anything with
the same methods (see :class:`MetadataSource`), so planning logic unit-tests without a broker.
kafka-python errors are translated here, once, into this library's error tree.
"""

from __future__ import annotations

import re
from typing import Any, Dict, Iterable, List, Optional, Protocol, Set

from ..errors import (
    ConfigurationError,
    DataLossError,
    DStreamExactlyOnceError,
    KafkaAuthError,
    KafkaUnavailableError,
)
from ..offsets import TopicAndPartition
from .params import KafkaConfig

__all__ = ["KafkaMetadata", "MetadataSource", "translate_kafka_error"]


class MetadataSource(Protocol):
    def topics(self) -> Set[str]: ...
    def partitions(self, topics: Iterable[str]) -> Dict[str, List[int]]: ...
    def latest(self, tps: Iterable[TopicAndPartition]) -> Dict[TopicAndPartition, int]: ...
    def earliest(self, tps: Iterable[TopicAndPartition]) -> Dict[TopicAndPartition, int]: ...


def translate_kafka_error(exc: BaseException, bootstrap: str, what: str,
                          config: Optional[KafkaConfig] = None) -> DStreamExactlyOnceError:
    """Map a kafka-python exception to this library's tree (the caller raises it ``from exc``).

    kafka-python does not reliably report refused SASL credentials: the broker closes the socket
    right after its error response, and the client usually sees only a disconnect and retries until
    its bootstrap timeout. So when a connection fails and ``config`` uses SASL PLAIN, the broker is
    asked once more directly (:func:`_sasl_plain_refused`) whether it refuses these credentials.
    """
    import kafka.errors as ke

    name = type(exc).__name__
    if isinstance(exc, (ke.SaslAuthenticationFailedError,)) or "Authentication" in name:
        return KafkaAuthError(f"Kafka at {bootstrap} refused the credentials while {what}: {name}")
    if isinstance(exc, (ke.KafkaTimeoutError, ke.KafkaConnectionError)) or "NoBrokers" in name \
            or "Timeout" in name:
        refused = _sasl_plain_refused(config) if config is not None else None
        if refused is not None:
            return KafkaAuthError(f"Kafka at {bootstrap} refused the credentials while {what}: {refused}")
        return KafkaUnavailableError(f"cannot reach Kafka at {bootstrap} while {what}: {name}: {exc}")
    if isinstance(exc, ke.UnknownTopicOrPartitionError):
        return DataLossError(f"topic or partition no longer exists while {what}: {exc}")
    if isinstance(exc, ke.KafkaError):
        return KafkaUnavailableError(f"Kafka at {bootstrap} failed while {what}: {name}: {exc}")
    return KafkaUnavailableError(f"Kafka at {bootstrap}: unexpected {name} while {what}: {exc}")


def _sasl_plain_refused(config: KafkaConfig, timeout_s: float = 5.0) -> Optional[str]:
    """Ask the bootstrap brokers whether they refuse ``config``'s SASL PLAIN credentials.

    One SaslHandshake + SaslAuthenticate exchange per broker on a plain socket (SASL_PLAINTEXT
    only). Returns the broker's refusal message (it never contains the password), or ``None`` when
    the answer is not a refusal (accepted, unreachable, other protocol or mechanism).
    """
    client = config.client
    if client.get("security_protocol") != "SASL_PLAINTEXT" or client.get("sasl_mechanism") != "PLAIN":
        return None
    user = str(client.get("sasl_plain_username") or "")
    token = "\0".join([user, user, str(client.get("sasl_plain_password") or "")]).encode("utf-8")
    for server in client.get("bootstrap_servers", ()):
        host, _, port = server.rpartition(":")
        try:
            refused = _sasl_plain_exchange(host.strip("[]"), int(port), token, timeout_s)
        except Exception:  # noqa: BLE001 - only a diagnosis; the caller reports the original error
            continue
        return None if refused is None else f"{refused} (SASL PLAIN user {user!r})"
    return None


def _sasl_plain_exchange(host: str, port: int, token: bytes, timeout_s: float) -> Optional[str]:
    import socket
    import time

    import kafka.errors as ke
    from kafka.protocol.parser import KafkaProtocol
    from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

    deadline = time.monotonic() + timeout_s
    proto = KafkaProtocol(client_id="dstream-exactly-once-auth-probe")
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        def call(request: Any) -> Any:
            proto.send_request(request)
            sock.sendall(proto.send_bytes())
            while True:
                sock.settimeout(max(0.01, deadline - time.monotonic()))
                data = sock.recv(65536)
                if not data:
                    raise ConnectionError("closed by the broker")
                responses = proto.receive_bytes(data)
                if responses:
                    return responses[0][1]

        handshake = call(SaslHandshakeRequest(mechanism="PLAIN", version=1))
        if handshake.error_code:
            return f"SASL mechanism PLAIN is not enabled (the broker offers {list(handshake.mechanisms)})"
        answer = call(SaslAuthenticateRequest(auth_bytes=token, version=1))
        if answer.error_code:
            return f"{ke.for_code(answer.error_code).__name__}: {answer.error_message}"
        return None

class KafkaMetadata:
    """Topic metadata and earliest/latest offsets from the brokers (one request per call).

    ``latest`` honours ``isolation.level``: under ``read_committed`` it is the last stable offset,
    so a batch never waits for an open transaction.
    """

    def __init__(self, config: KafkaConfig, *, timeout_ms: int = 10000) -> None:
        self.config = config
        self.timeout_ms = timeout_ms
        self._client: Any = None

    def __repr__(self) -> str:
        return f"KafkaMetadata(bootstrap={self.config.bootstrap!r})"

    def _admin(self) -> Any:
        if self._client is None:
            from kafka.admin import KafkaAdminClient

            kw = self.config.admin_kwargs()
            kw.setdefault("request_timeout_ms", self.timeout_ms)
            kw.setdefault("client_id", "dstream-exactly-once-driver")
            kw["bootstrap_timeout_ms"] = self.timeout_ms
            try:
                self._client = KafkaAdminClient(**kw)
            except Exception as exc:  # noqa: BLE001 - translated at this boundary
                raise translate_kafka_error(exc, self.config.bootstrap, "connecting", self.config) from exc
        return self._client

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        admin = self._admin()
        try:
            return fn(admin, *args, **kwargs)
        except DStreamExactlyOnceError:
            raise
        except Exception as exc:  # noqa: BLE001 - translated at this boundary
            raise translate_kafka_error(exc, self.config.bootstrap, what, self.config) from exc

    def close(self) -> None:
        if self._client is not None:
            try:
                self._client.close()
            finally:
                self._client = None

    def topics(self) -> Set[str]:
        return set(self._call("listing topics", lambda a: a.list_topics()))

    def partitions(self, topics: Iterable[str]) -> Dict[str, List[int]]:
        """``{topic: sorted partition ids}``; an unknown topic raises :class:`ConfigurationError`."""
        names = sorted(set(topics))
        if not names:
            return {}
        described = self._call("describing topics", lambda a: a.describe_topics(names))
        out: Dict[str, List[int]] = {}
        missing = []
        for t in described:
            if t.get("error_code"):
                missing.append(t["name"])
                continue
            out[t["name"]] = sorted(p["partition_index"] for p in t["partitions"])
        missing += [n for n in names if n not in out and n not in missing]
        if missing:
            raise ConfigurationError(
                f"unknown topic(s) {', '.join(repr(m) for m in sorted(missing))} on {self.config.bootstrap}")
        return out

    def matching_topics(self, pattern: re.Pattern[str]) -> Set[str]:
        return {t for t in self.topics() if pattern.fullmatch(t) and not t.startswith("__")}

    def _offsets(self, tps: Iterable[TopicAndPartition], spec_name: str) -> Dict[TopicAndPartition, int]:
        from kafka import TopicPartition
        from kafka.admin import OffsetSpec
        from kafka.protocol.consumer.offsets import IsolationLevel

        wanted = list(dict.fromkeys(tps))
        if not wanted:
            return {}
        spec = getattr(OffsetSpec, spec_name)
        iso = IsolationLevel.READ_COMMITTED if self.config.isolation_level == "read_committed" \
            else IsolationLevel.READ_UNCOMMITTED
        result = self._call(
            f"looking up {spec_name.lower()} offsets",
            lambda a: a.list_partition_offsets({TopicPartition(tp.topic, tp.partition): spec for tp in wanted},
                                               isolation_level=iso, timeout_ms=self.timeout_ms),
        )
        return {TopicAndPartition(k.topic, k.partition): int(v.offset) for k, v in result.items()}

    def latest(self, tps: Iterable[TopicAndPartition]) -> Dict[TopicAndPartition, int]:
        """The next offset to be written (or the last stable offset under read_committed)."""
        return self._offsets(tps, "LATEST")

    def earliest(self, tps: Iterable[TopicAndPartition]) -> Dict[TopicAndPartition, int]:
        """The log start offset: the oldest offset still readable."""
        return self._offsets(tps, "EARLIEST")

    def mirror_group_offsets(self, group_id: str, offsets: Dict[TopicAndPartition, int]) -> None:
        """Best-effort commit of ``offsets`` to consumer group ``group_id`` for lag monitoring.

        Monitoring only: the store stays the source of truth and this group is never read back.
        """
        from kafka import TopicPartition
        from kafka.structs import OffsetAndMetadata

        self._call(f"mirroring offsets to group {group_id!r}", lambda a: a.alter_group_offsets(
            group_id, {TopicPartition(tp.topic, tp.partition): OffsetAndMetadata(off, "", -1)
                       for tp, off in offsets.items()}))
