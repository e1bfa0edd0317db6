"""Driver-side broker access: topic metadata and offset look-ups, behind one small seam.

:class:`KafkaMetadata` is the only place the driver talks to Kafka; the planner and the consumer
strategies take anything with the methods of :class:`MetadataSource`, so planning logic
unit-tests without a broker (``dstream_exactly_once.testing._fake_kafka.FakeKafkaCluster``).
kafka-python errors are translated by :func:`translate_kafka_error` (``kafka/_errors_map.py``).
"""

from __future__ import annotations

import logging
import re
from typing import Any, Dict, Iterable, List, Optional, Protocol, Set, Tuple

from .._checks import is_int
from ..errors import ConfigurationError, DStreamExactlyOnceError, KafkaClosedError
from ._errors_map import translate_kafka_error
from ._offsets import TopicAndPartition
from ._params import KafkaConfig

__all__ = ["KafkaMetadata", "MetadataSource", "close_metadata", "translate_kafka_error"]

log = logging.getLogger(__name__)


_DEFAULT_TIMEOUT_MS = 10000


def close_metadata(source: object) -> None:
    """Close a planner's metadata source if it can be closed (:meth:`KafkaMetadata.close`);
    for the streaming layer's stop hook. Idempotent, never raises."""
    close = getattr(source, "close", None)
    if callable(close):
        try:
            close()
        except Exception as exc:  # noqa: BLE001 - stopping must go on
            log.warning("closing %r failed: %r", source, exc)


class MetadataSource(Protocol):
    """What planning asks of a cluster (the broker seam): :class:`KafkaMetadata` on a real one.

    Errors follow :class:`KafkaMetadata`: an unknown topic in :meth:`partitions` raises
    :class:`ConfigurationError`; offsets of a deleted topic or partition raise :class:`DataLossError`.
    """

    def topics(self) -> Set[str]:
        """Every topic's name."""
        ...

    def matching_topics(self, pattern: re.Pattern[str]) -> Set[str]:
        """Topics whose whole name matches ``pattern`` (internal ``__`` topics excluded)."""
        ...

    def partitions(self, topics: Iterable[str]) -> Dict[str, List[int]]:
        """``{topic: sorted partition ids}``."""
        ...

    def latest(self, tps: Iterable[TopicAndPartition]) -> Dict[TopicAndPartition, int]:
        """The next offset to be written per partition (the last stable offset under read_committed)."""
        ...

    def earliest(self, tps: Iterable[TopicAndPartition]) -> Dict[TopicAndPartition, int]:
        """The log start offset per partition."""
        ...


class KafkaMetadata:
    """Topic metadata and earliest/latest offsets from the brokers.

    ``latest`` honours ``isolation.level``: under ``read_committed`` it is the last stable offset,
    so a batch never waits for an open transaction.

    An offset look-up is one ListOffsets request per partition leader, sent at once. Leaders are
    remembered from the last metadata answer (``partitions``, or a Metadata request when a
    partition's leader is not known yet); when that shortcut fails for any reason (leader moved,
    partition gone, broker unreachable) the leaders are forgotten and kafka-python's
    ``list_partition_offsets`` answers instead, with its own metadata look-up and its errors.
    """

    def __init__(self, config: KafkaConfig, *, timeout_ms: Optional[int] = None) -> None:
        """``timeout_ms`` bounds connecting (bootstrap) and each request; by default it is
        kafkaParams' ``request.timeout.ms``, else 10 s."""
        if timeout_ms is None:
            timeout_ms = int(config.client.get("request_timeout_ms", _DEFAULT_TIMEOUT_MS))
        if not is_int(timeout_ms) or timeout_ms <= 0:
            raise ConfigurationError(f"timeout_ms must be a positive int of milliseconds, got {timeout_ms!r}")
        self.config = config
        self.timeout_ms = timeout_ms
        self._closed = False
        self._client: Any = None
        self._leaders: Dict[str, Dict[int, int]] = {}  # topic -> partition -> leader node id
        self._requests: Optional[_OffsetRequests] = None  # for the partitions last looked up

    def __repr__(self) -> str:
        return f"KafkaMetadata(bootstrap={self.config.bootstrap!r})"

    def _admin(self) -> Any:
        if self._closed:
            raise KafkaClosedError(f"{self!r} is closed (its streaming context was stopped); it does not connect again")
        if self._client is None:
            from kafka.admin import KafkaAdminClient

            kw = self.config.admin_kwargs()
            kw["request_timeout_ms"] = self.timeout_ms
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

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Close the admin client and its connections for good; later calls do nothing.

        Never raises (a failure to close is logged). After it, every look-up raises
        :class:`~dstream_exactly_once.errors.KafkaClosedError` (not retriable) instead of connecting again.
        """
        self._closed = True
        self._forget_leaders()
        client, self._client = self._client, None
        if client is not None:
            try:
                client.close()
            except Exception as exc:  # noqa: BLE001 - closing is best effort; nothing depends on it
                log.warning("closing the Kafka admin client of %r failed: %r", self, exc)

    def _metadata(self, what: str, topics: Optional[List[str]]) -> Any:
        """One Metadata request (``None``: every topic), read without kafka-python's ``to_dict``."""
        from kafka.protocol.metadata import MetadataRequest

        topic = MetadataRequest.MetadataRequestTopic
        request = MetadataRequest(topics=None if topics is None else [topic(name=t) for t in topics],
                                  allow_auto_topic_creation=False)
        return self._call(what, lambda a: _exchange(a, [(None, request)])[0])

    def topics(self) -> Set[str]:
        return {t.name for t in self._metadata("listing topics", None).topics}

    def partitions(self, topics: Iterable[str]) -> Dict[str, List[int]]:
        """``{topic: sorted partition ids}``; an unknown topic raises :class:`ConfigurationError`."""
        return self._describe(topics, "describing topics")

    def _describe(self, topics: Iterable[str], what: str) -> Dict[str, List[int]]:
        """:meth:`partitions`, remembering each partition's leader for the offset look-ups."""
        names = sorted(set(topics))
        if not names:
            return {}
        out, missing = self._read_topics(self._metadata(what, names).topics, set(names).__contains__)
        missing += [n for n in names if n not in out and n not in missing]
        self._refuse_missing(missing)
        return out

    def _read_topics(self, topics: Iterable[Any], wanted: Any) -> Tuple[Dict[str, List[int]], List[str]]:
        """``({topic: sorted partition ids}, [topics answered with an error])`` of a Metadata answer's
        topics for which ``wanted(name)`` holds, remembering each partition's leader."""
        out: Dict[str, List[int]] = {}
        missing = []
        for t in topics:
            if not wanted(t.name):
                continue
            if t.error_code:
                missing.append(t.name)
                continue
            leaders = {p.partition_index: p.leader_id for p in t.partitions}
            self._remember_leaders(t.name, leaders)
            out[t.name] = sorted(leaders)
        return out, missing

    def _refuse_missing(self, missing: List[str]) -> None:
        if missing:
            raise ConfigurationError(
                f"unknown topic(s) {', '.join(repr(m) for m in sorted(missing))} on {self.config.bootstrap}")

    def matching_topics(self, pattern: re.Pattern[str]) -> Set[str]:
        return {t for t in self.topics() if pattern.fullmatch(t) and not t.startswith("__")}

    def matching_partitions(self, pattern: re.Pattern[str]) -> Dict[str, List[int]]:
        """``partitions(matching_topics(pattern))`` from ONE Metadata request (every topic's partitions are
        in the answer that lists the topics): a matched topic answered with an error raises
        :class:`ConfigurationError` as :meth:`partitions` does."""
        answer = self._metadata("describing topics", None).topics
        out, missing = self._read_topics(answer, lambda name: pattern.fullmatch(name) and not name.startswith("__"))
        self._refuse_missing(missing)
        return out

    def _remember_leaders(self, topic: str, leaders: Dict[int, int]) -> None:
        if self._leaders.get(topic) != leaders:
            self._leaders[topic] = leaders
            self._requests = None

    def _forget_leaders(self) -> None:
        self._leaders.clear()
        self._requests = None

    def _offsets(self, tps: Iterable[TopicAndPartition], spec_name: str) -> Dict[TopicAndPartition, int]:
        from kafka.admin import OffsetSpec
        from kafka.protocol.consumer.offsets import IsolationLevel

        wanted = list(dict.fromkeys(tps))
        if not wanted:
            return {}
        what = f"looking up {spec_name.lower()} offsets"
        spec = getattr(OffsetSpec, spec_name)
        iso = IsolationLevel.READ_COMMITTED if self.config.isolation_level == "read_committed" \
            else IsolationLevel.READ_UNCOMMITTED
        requests = self._requests
        if requests is None or requests.wanted != wanted:
            requests = _OffsetRequests.group(wanted, self._leaders)
            if requests is None:  # a leader not known yet: ask for the topics' metadata
                try:
                    self._describe({tp.topic for tp in wanted}, what)
                except ConfigurationError:
                    pass  # a topic is gone: the full look-up below reports it
                requests = _OffsetRequests.group(wanted, self._leaders)
            self._requests = requests
        if requests is not None:
            admin = self._admin()
            try:
                return requests.read(_exchange(admin, requests.build(int(spec), int(iso))))
            except Exception as exc:  # noqa: BLE001 - the full look-up below decides, or translated
                import kafka.errors as ke

                if isinstance(exc, ke.KafkaTimeoutError):
                    raise translate_kafka_error(exc, self.config.bootstrap, what, self.config) from exc
                log.debug("offset look-up via remembered leaders failed (%r); asking the cluster again", exc)
                self._forget_leaders()
        return self._list_partition_offsets(wanted, spec, iso, what)

    def _list_partition_offsets(self, wanted: List[TopicAndPartition], spec: Any, iso: Any,
                                what: str) -> Dict[TopicAndPartition, int]:
        """kafka-python's own look-up: a Metadata request, then ListOffsets per leader."""
        from kafka import TopicPartition

        result = self._call(
            what,
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


_NO_LEADERS: Dict[int, int] = {}


def _exchange(admin: Any, requests: List[Tuple[Optional[int], Any]]) -> List[Any]:
    """Send every ``(node id, request)`` at once (``None``: any broker) and wait for all answers.

    Goes through the admin client's connection manager (kafka-python 3's ``_manager``), so the
    client's connections, security settings and API version negotiation are the ones used.
    """
    manager = admin._manager

    async def exchange() -> List[Any]:
        sent = [manager.send(request, node_id=node) for node, request in requests]
        return [await future for future in sent]

    return manager.run(exchange)  # type: ignore[no-any-return]


class _OffsetRequests:
    """ListOffsets requests for one list of partitions grouped by leader, built once per offset
    spec and sent again as long as the partitions and their leaders stay the same."""

    def __init__(self, wanted: List[TopicAndPartition], groups: Dict[int, Dict[str, List[TopicAndPartition]]]) -> None:
        self.wanted = wanted
        self.groups = groups
        self.index: Dict[str, Dict[int, TopicAndPartition]] = {}
        for tp in wanted:
            self.index.setdefault(tp.topic, {})[tp.partition] = tp
        self.built: Dict[Tuple[int, int], List[Tuple[Optional[int], Any]]] = {}

    @classmethod
    def group(cls, wanted: List[TopicAndPartition], leaders: Dict[str, Dict[int, int]]) -> Optional[_OffsetRequests]:
        """Group ``wanted`` by leader; ``None`` if a partition's leader is not known."""
        groups: Dict[int, Dict[str, List[TopicAndPartition]]] = {}
        for tp in wanted:
            node = leaders.get(tp.topic, _NO_LEADERS).get(tp.partition, -1)
            if node < 0:
                return None
            by_topic = groups.get(node)
            if by_topic is None:
                by_topic = groups[node] = {}
            tps = by_topic.get(tp.topic)
            if tps is None:
                tps = by_topic[tp.topic] = []
            tps.append(tp)
        return cls(wanted, groups)

    def build(self, spec: int, iso: int) -> List[Tuple[Optional[int], Any]]:
        """``[(leader, request)]`` (kafka-python replaces a request's header on each send, so a
        request object can be sent again)."""
        requests = self.built.get((spec, iso))
        if requests is None:
            from kafka.protocol.consumer.offsets import ListOffsetsRequest

            topic_cls = ListOffsetsRequest.ListOffsetsTopic
            partition_cls = topic_cls.ListOffsetsPartition
            min_version = max(ListOffsetsRequest.min_version_for_isolation_level(iso),
                              ListOffsetsRequest.min_version_for_timestamp(spec))
            # current_leader_epoch is set although -1 is its default: encoding is much slower for
            # fields left unset.
            requests = self.built[(spec, iso)] = [
                (node, ListOffsetsRequest(
                    isolation_level=iso, min_version=min_version,
                    topics=[topic_cls(name=topic, partitions=[
                        partition_cls(partition_index=tp.partition, current_leader_epoch=-1, timestamp=spec)
                        for tp in tps]) for topic, tps in by_topic.items()]))
                for node, by_topic in self.groups.items()
            ]
        return requests

    def read(self, responses: List[Any]) -> Dict[TopicAndPartition, int]:
        """The offsets answered; a partition error raises kafka-python's exception."""
        import kafka.errors as ke

        out: Dict[TopicAndPartition, int] = {}
        for response in responses:
            for topic in response.topics:
                tps = self.index[topic.name]
                for p in topic.partitions:
                    if p.error_code:
                        err = ke.for_code(p.error_code)
                        raise err(f"ListOffsetsRequest failed for {topic.name}-{p.partition_index}: {err.__name__}")
                    out[tps[p.partition_index]] = p.offset
        if len(out) != len(self.wanted):
            raise ke.KafkaError(f"ListOffsets answered {len(out)} of {len(self.wanted)} partitions")
        return out
