"""Driver-side broker access: topic metadata and offset look-ups, behind one small seam.

:class:`KafkaMetadata` is the only place the driver talks to Kafka; planners take anything with
the same methods (see :class:`MetadataSource`), so planning logic unit-tests without a broker.
kafka-python errors are translated here, once, into this library's error tree.
"""

from __future__ import annotations

import re
from typing import Any, Dict, Iterable, List, Mapping, Optional, Protocol, Set

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


def translate_kafka_error(exc: BaseException, bootstrap: str, what: str) -> DStreamExactlyOnceError:
    """Map a kafka-python exception to this library's tree (the caller raises it ``from exc``)."""
    import kafka.errors as ke

    name = type(exc).__name__
    if isinstance(exc, (ke.SaslAuthenticationFailedError,)) or "Authentication" in name:
        return KafkaAuthError(f"Kafka at {bootstrap} refused the credentials while {what}: {name}")
    if isinstance(exc, (ke.KafkaTimeoutError, ke.KafkaConnectionError)) or "NoBrokers" in name \
            or "Timeout" in name:
        return KafkaUnavailableError(f"cannot reach Kafka at {bootstrap} while {what}: {name}: {exc}")
    if isinstance(exc, ke.UnknownTopicOrPartitionError):
        return DataLossError(f"topic or partition no longer exists while {what}: {exc}")
    if isinstance(exc, ke.KafkaError):
        return KafkaUnavailableError(f"Kafka at {bootstrap} failed while {what}: {name}: {exc}")
    return KafkaUnavailableError(f"Kafka at {bootstrap}: unexpected {name} while {what}: {exc}")


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
                raise translate_kafka_error(exc, self.config.bootstrap, "connecting") from exc
        return self._client

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        admin = self._admin()
        try:
            return fn(admin, *args, **kwargs)
        except DStreamExactlyOnceError:
            raise
        except Exception as exc:  # noqa: BLE001 - translated at this boundary
            raise translate_kafka_error(exc, self.config.bootstrap, what) from exc

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

    def matching_topics(self, pattern: "re.Pattern[str]") -> Set[str]:
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


def check_within_log(
    wanted: Mapping[TopicAndPartition, int],
    earliest: Mapping[TopicAndPartition, int],
    latest: Mapping[TopicAndPartition, int],
    what: str,
    exc_type: type = ConfigurationError,
) -> None:
    """Raise ``exc_type`` naming each offset outside ``[earliest, latest]``."""
    bad = [f"{tp} offset {off} not in [{earliest[tp]}, {latest[tp]}]"
           for tp, off in sorted(wanted.items()) if not earliest[tp] <= off <= latest[tp]]
    if bad:
        raise exc_type(f"{what}: " + "; ".join(bad))

