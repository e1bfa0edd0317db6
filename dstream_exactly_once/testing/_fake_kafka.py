"""An in-memory Kafka cluster for unit tests of planning (the broker seam, no processes).

:class:`FakeKafkaCluster` implements :class:`~dstream_exactly_once.kafka._metadata.MetadataSource`
(what :class:`~dstream_exactly_once.kafka._planner.DirectPlanner` and the consumer strategies ask
of a cluster) over topics whose partitions are just ``[earliest, latest)`` offset pairs you move
between calls, as producers, retention and admins move them on a real cluster. It answers as
:class:`~dstream_exactly_once.kafka._metadata.KafkaMetadata` does: an unknown topic in
:meth:`~FakeKafkaCluster.partitions` raises :class:`ConfigurationError`; offsets of a deleted topic
or partition raise :class:`DataLossError`. It holds no records: reading still needs a real broker
(:class:`~dstream_exactly_once.testing.LocalKafka`).

Example::

    from dstream_exactly_once.kafka._planner import DirectPlanner
    from dstream_exactly_once.kafka._strategies import Subscribe
    from dstream_exactly_once.testing._fake_kafka import FakeKafkaCluster

    cluster = FakeKafkaCluster({"events": [(0, 10), (0, 4)]})   # two partitions
    planner = DirectPlanner(cluster, Subscribe(["events"]), auto_offset_reset="earliest")
    planner.start()
    planner.advance(planner.plan(1.0))      # events-0 [0, 10), events-1 [0, 4)
    cluster.produce("events", 1, 3)         # three more records in partition 1
    cluster.delete_records("events", 0, 8)  # retention: partition 0 now starts at 8
    planner.plan(1.0)                       # events-0 [10, 10), events-1 [4, 7)
    cluster.calls                           # ['partitions', 'earliest', 'latest', ...]
"""

from __future__ import annotations

import re
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

from ..errors import ConfigurationError, DataLossError
from ..kafka._offsets import TopicAndPartition

__all__ = ["FakeKafkaCluster"]


class FakeKafkaCluster:
    """Topics → partitions → ``[earliest, latest]`` offsets, changed by the methods below.

    ``logs`` is ``{topic: [[earliest, latest] per partition]}`` (mutable; the methods are the
    readable way to change it). ``calls`` lists the seam methods called, in order
    (``"topics"``, ``"partitions"``, ``"earliest"``, ``"latest"``), for asserting round trips.
    """

    def __init__(self, topics: Optional[Mapping[str, Sequence[Tuple[int, int]]]] = None) -> None:
        self.logs: Dict[str, List[List[int]]] = {}
        self.calls: List[str] = []
        for name, parts in (topics or {}).items():
            self.create_topic(name, parts)

    def __repr__(self) -> str:
        return f"FakeKafkaCluster({ {t: [tuple(p) for p in ps] for t, ps in self.logs.items()}!r})"

    # ------------------------------------------------------------------ the MetadataSource seam
    def topics(self) -> Set[str]:
        """Every topic's name."""
        self.calls.append("topics")
        return set(self.logs)

    def matching_topics(self, pattern: re.Pattern[str]) -> Set[str]:
        """Topics whose whole name matches ``pattern``, internal ``__`` topics excluded."""
        return {t for t in self.logs if pattern.fullmatch(t) and not t.startswith("__")}

    def partitions(self, topics: Iterable[str]) -> Dict[str, List[int]]:
        """``{topic: partition ids}``; an unknown topic raises :class:`ConfigurationError`."""
        self.calls.append("partitions")
        names = sorted(set(topics))
        missing = [t for t in names if t not in self.logs]
        if missing:
            raise ConfigurationError(f"unknown topic(s) {', '.join(repr(m) for m in missing)} on the fake cluster")
        return {t: list(range(len(self.logs[t]))) for t in names}

    def earliest(self, tps: Iterable[TopicAndPartition]) -> Dict[TopicAndPartition, int]:
        """The log start offset per partition."""
        self.calls.append("earliest")
        return self._offsets(tps, 0)

    def latest(self, tps: Iterable[TopicAndPartition]) -> Dict[TopicAndPartition, int]:
        """The next offset to be written per partition."""
        self.calls.append("latest")
        return self._offsets(tps, 1)

    def _offsets(self, tps: Iterable[TopicAndPartition], index: int) -> Dict[TopicAndPartition, int]:
        out = {}
        for tp in tps:
            if tp.topic not in self.logs or not 0 <= tp.partition < len(self.logs[tp.topic]):
                raise DataLossError(f"topic or partition no longer exists: {tp}")
            out[tp] = self.logs[tp.topic][tp.partition][index]
        return out

    # ------------------------------------------------------------------ what happens to a real cluster
    def create_topic(self, topic: str, partitions: Sequence[Tuple[int, int]] = ((0, 0),)) -> None:
        """Add ``topic`` with one ``(earliest, latest)`` pair per partition (replaces an existing one)."""
        if not isinstance(topic, str) or not topic:
            raise ValueError(f"topic must be a non-empty str, got {topic!r}")
        logs = [[int(lo), int(hi)] for lo, hi in partitions]
        bad = [p for p in logs if not 0 <= p[0] <= p[1]]
        if not logs or bad:
            raise ValueError(f"partitions of {topic!r} must be (earliest, latest) pairs with 0 <= earliest <= latest, "
                             f"got {list(partitions)!r}")
        self.logs[topic] = logs

    def delete_topic(self, topic: str) -> None:
        """Remove ``topic``; its offsets then raise :class:`DataLossError`."""
        self._log(topic, 0)
        del self.logs[topic]

    def produce(self, topic: str, partition: int, n: int) -> None:
        """Append ``n`` records to a partition (its latest offset moves by ``n``)."""
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n!r}")
        self._log(topic, partition)[1] += n

    def delete_records(self, topic: str, partition: int, before: int) -> None:
        """Retention / deleteRecords: the partition now starts at ``before`` (at most its latest offset)."""
        log = self._log(topic, partition)
        if not log[0] <= before <= log[1]:
            raise ValueError(f"before must lie in [{log[0]}, {log[1]}] for {topic}-{partition}, got {before!r}")
        log[0] = before

    def add_partition(self, topic: str, earliest: int = 0, latest: int = 0) -> int:
        """Add a partition to ``topic``; returns its id."""
        self._log(topic, 0)
        self.logs[topic].append([earliest, latest])
        return len(self.logs[topic]) - 1

    def _log(self, topic: str, partition: int) -> List[int]:
        if topic not in self.logs:
            raise KeyError(f"no topic {topic!r} on the fake cluster (topics: {sorted(self.logs)})")
        parts = self.logs[topic]
        if not 0 <= partition < len(parts):
            raise KeyError(f"{topic!r} has partitions 0..{len(parts) - 1}, got {partition!r}")
        return parts[partition]
