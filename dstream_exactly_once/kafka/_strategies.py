"""Consumer strategies (spark-streaming-kafka-0-10's names): which partitions a stream reads.

The driver asks the strategy for the current partition set before planning; Subscribe and
SubscribePattern pick up partitions and (for patterns) topics added while the stream runs.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from typing import Any, Dict, FrozenSet, Iterable, List, Mapping, Optional, Set, Union

from .._checks import is_int
from ..errors import ConfigurationError
from ._metadata import MetadataSource
from ._offsets import TopicAndPartition

__all__ = ["Assign", "ConsumerStrategy", "Subscribe", "SubscribePattern"]


def _check_offsets(offsets: Optional[Mapping[Any, Any]],
                   what: str = "fromOffsets keys") -> Dict[TopicAndPartition, int]:
    if offsets is None:
        return {}
    if not isinstance(offsets, Mapping):
        raise ConfigurationError(f"fromOffsets must be a dict {{TopicAndPartition: int}}, got {type(offsets).__name__}")
    out = {}
    for tp, off in offsets.items():
        if not isinstance(tp, TopicAndPartition):
            hint = f"; write TopicAndPartition{tp!r}" if isinstance(tp, tuple) and len(tp) == 2 else ""
            raise ConfigurationError(
                f"{what} must be TopicAndPartition (as in Spark 2.4), got {tp!r} "
                f"({type(tp).__name__}){hint}")
        check_topic_name(tp.topic, f"{what}: {tp!r}")
        if not is_int(off) or off < 0:
            raise ConfigurationError(f"fromOffsets[{tp}] must be an int >= 0, got {off!r}")
        out[tp] = off
    return out


def check_topics(topics: Any) -> list[str]:
    """Topics as a list/tuple/set of non-empty str (a bare str is refused, as in Spark 2.4)."""
    if isinstance(topics, (str, bytes)) or not isinstance(topics, (list, tuple, set, frozenset)):
        raise ConfigurationError(f"topics must be a list or set of topic names, got {topics!r}")
    if not topics:
        raise ConfigurationError("topics must be a non-empty list or set of topic names, got an empty one")
    for t in topics:
        check_topic_name(t, "topics")
    return sorted(set(topics))


_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]{1,249}")


def check_topic_name(name: Any, where: str) -> str:
    """Kafka's rule: 1 to 249 characters of ASCII letters, digits, '.', '_' and '-', not '.' or '..'."""
    if not isinstance(name, str):
        raise ConfigurationError(f"{where}: a topic name must be a str, got {name!r} ({type(name).__name__})")
    if not _LEGAL_TOPIC.fullmatch(name) or name in (".", ".."):
        raise ConfigurationError(
            f"{where}: {name!r} is not a legal Kafka topic name ({len(name)} characters); allowed: 1 to 249 "
            "characters of ASCII letters, digits, '.', '_' and '-', other than '.' and '..'")
    return name


class ConsumerStrategy(ABC):
    """Which partitions to read, and explicit starting offsets for some of them."""

    def __init__(self, offsets: Optional[Mapping[Any, int]] = None) -> None:
        self.offsets = _check_offsets(offsets)
        self._described: Dict[str, List[int]] = {}
        self._described_set: FrozenSet[TopicAndPartition] = frozenset()

    def _partition_set(self, described: Dict[str, List[int]]) -> Set[TopicAndPartition]:
        """``{TopicAndPartition}`` of ``metadata.partitions()``'s answer, built again only when
        that answer changes (discovery asks for it every few seconds)."""
        if described != self._described:
            self._described_set = frozenset(TopicAndPartition(t, p) for t, ps in described.items() for p in ps)
            self._described = {t: list(ps) for t, ps in described.items()}
        return set(self._described_set)

    @abstractmethod
    def partitions(self, metadata: MetadataSource) -> Set[TopicAndPartition]:
        """The partitions to read now (queried from the brokers)."""

    #: whether partitions appearing later are picked up between batches
    dynamic: bool = True

    def validate(self, metadata: MetadataSource) -> Set[TopicAndPartition]:
        """Resolve partitions once before the stream starts; explicit offsets must be among them."""
        parts = self.partitions(metadata)
        stray = sorted(set(self.offsets) - parts)
        if stray:
            raise ConfigurationError(
                "fromOffsets name partitions that are not subscribed or do not exist: "
                + ", ".join(str(tp) for tp in stray))
        return parts


class Subscribe(ConsumerStrategy):
    """A fixed list of topics; partitions added to them are read from their earliest offset."""

    def __init__(self, topics: Iterable[str], offsets: Optional[Mapping[Any, int]] = None) -> None:
        super().__init__(offsets)
        self.topics = check_topics(topics if not isinstance(topics, (str, bytes)) else topics)

    def partitions(self, metadata: MetadataSource) -> Set[TopicAndPartition]:
        return self._partition_set(metadata.partitions(self.topics))

    def __repr__(self) -> str:
        return f"Subscribe({self.topics!r})"


class SubscribePattern(ConsumerStrategy):
    """Every topic whose whole name matches ``pattern``; new matching topics are picked up."""

    def __init__(self, pattern: Union[str, re.Pattern[str]], offsets: Optional[Mapping[Any, int]] = None) -> None:
        super().__init__(offsets)
        try:
            self.pattern = re.compile(pattern) if isinstance(pattern, str) else pattern
        except re.error as exc:
            raise ConfigurationError(f"bad topic pattern {pattern!r}: {exc}") from exc
        if not isinstance(self.pattern, re.Pattern):
            raise ConfigurationError(f"pattern must be a str or re.Pattern, got {pattern!r}")

    def partitions(self, metadata: MetadataSource) -> Set[TopicAndPartition]:
        # KafkaMetadata answers both questions with one Metadata request; other sources are asked twice
        both = getattr(metadata, "matching_partitions", None)
        if callable(both):
            return self._partition_set(both(self.pattern))
        return self._partition_set(metadata.partitions(metadata.matching_topics(self.pattern)))

    def __repr__(self) -> str:
        return f"SubscribePattern({self.pattern.pattern!r})"


class Assign(ConsumerStrategy):
    """Exactly these partitions (a list of TopicAndPartition, or a ``{tp: offset}`` dict)."""

    dynamic = False

    def __init__(self, partitions: Union[Iterable[TopicAndPartition], Mapping[TopicAndPartition, int]]) -> None:
        if isinstance(partitions, Mapping):
            super().__init__(partitions)
            self.assigned = set(self.offsets)
        else:
            super().__init__(None)
            if isinstance(partitions, (str, bytes)):
                raise ConfigurationError(f"Assign needs TopicAndPartition values, got {partitions!r}")
            self.assigned = set(_check_offsets({tp: 0 for tp in partitions}, "Assign's partitions"))
        if not self.assigned:
            raise ConfigurationError("Assign needs at least one partition")

    def partitions(self, metadata: MetadataSource) -> Set[TopicAndPartition]:
        existing = metadata.partitions({tp.topic for tp in self.assigned})
        missing = sorted(tp for tp in self.assigned if tp.partition not in existing.get(tp.topic, []))
        if missing:
            raise ConfigurationError("assigned partitions do not exist: " + ", ".join(str(tp) for tp in missing))
        return set(self.assigned)

    def __repr__(self) -> str:
        return f"Assign({sorted(self.assigned)!r})"
