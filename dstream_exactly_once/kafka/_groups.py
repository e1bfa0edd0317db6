"""A Kafka consumer group's committed offsets, read and written by the driver only.

``KafkaUtils.createStream`` starts from them and commits after each completed batch;
``commitAsync`` on a direct stream commits through them. Executors never join or commit a group:
they read assigned offset ranges. The group never has members, so its offsets are written with
the admin API (OffsetCommit for an empty group), as Kafka's ``kafka-consumer-groups --reset-offsets``
does. A stored offset is the next offset to read, as everywhere in this library.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Dict, Iterable, Mapping, Optional

from .._checks import is_int
from ..errors import ConfigurationError, DStreamExactlyOnceError
from ._admin import open_admin
from ._errors_map import translate_kafka_error
from ._offsets import TopicAndPartition
from ._params import KafkaConfig

log = logging.getLogger(__name__)

__all__ = ["GroupOffsets", "check_group_id"]

_ATTEMPTS = 3  # a new group's coordinator may not be ready at the first try


def check_group_id(group_id: Any, where: str) -> str:
    """A consumer group id: a non-empty str."""
    if not isinstance(group_id, str) or not group_id.strip():
        raise ConfigurationError(f"{where} must be a non-empty consumer group id (str), got {group_id!r}")
    return group_id


def _alter(admin: Any, group_id: str, request: Dict[Any, Any]) -> None:
    """``alter_group_offsets``, raising the first partition error it answers (kafka-python's class)."""
    import kafka.errors as ke

    for tp, err in sorted(admin.alter_group_offsets(group_id, request).items()):
        if err is not ke.NoError and err is not None:
            raise err(f"OffsetCommit for {tp.topic}-{tp.partition} in group {group_id!r}: {err.__name__}")


class GroupOffsets:
    """Committed offsets of consumer group ``group_id`` (driver only; thread-safe; one admin client).

    Every call connects on first use; :meth:`close` releases the client for good.
    """

    def __init__(self, config: KafkaConfig, group_id: str) -> None:
        self.config = config
        self.group_id = check_group_id(group_id, "group.id")
        self._admin: Any = None
        self._closed = False
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"GroupOffsets(group_id={self.group_id!r}, bootstrap={self.config.bootstrap!r})"

    def _client(self) -> Any:
        if self._closed:
            raise ConfigurationError(f"{self!r} is closed (its streaming context was stopped)")
        if self._admin is None:
            self._admin = open_admin(self.config, "dstream-exactly-once-group")
        return self._admin

    def _run(self, what: str, fn: Any) -> Any:
        last: Optional[BaseException] = None
        for attempt in range(_ATTEMPTS):
            with self._lock:
                try:
                    return fn(self._client())
                except DStreamExactlyOnceError:
                    raise
                except Exception as exc:  # noqa: BLE001 - translated below, after the retries
                    last = exc
            if not getattr(last, "retriable", False) or attempt == _ATTEMPTS - 1:
                break
            time.sleep(0.5)
        assert last is not None
        raise translate_kafka_error(last, self.config.bootstrap, what, self.config) from last

    def committed(self, topics: Iterable[str]) -> Dict[TopicAndPartition, int]:
        """The group's committed offsets for partitions of ``topics`` (partitions without one are absent)."""
        wanted = set(topics)
        answer = self._run(f"reading the committed offsets of group {self.group_id!r}",
                           lambda a: a.list_group_offsets({self.group_id: None}))
        out: Dict[TopicAndPartition, int] = {}
        for tp, meta in (answer.get(self.group_id) or {}).items():
            if tp.topic in wanted and meta is not None and meta.offset is not None and meta.offset >= 0:
                out[TopicAndPartition(tp.topic, tp.partition)] = int(meta.offset)
        return out

    def commit(self, offsets: Mapping[TopicAndPartition, int]) -> None:
        """Commit ``offsets`` (next offset to read per partition) to the group; raises on failure."""
        if not offsets:
            return
        for tp, off in offsets.items():
            if not isinstance(tp, TopicAndPartition) or not is_int(off) or off < 0:
                raise ConfigurationError(
                    f"offsets to commit must be {{TopicAndPartition: int >= 0}}, got {tp!r}: {off!r}")
        from kafka import TopicPartition
        from kafka.structs import OffsetAndMetadata

        request = {TopicPartition(tp.topic, tp.partition): OffsetAndMetadata(off, "", -1)
                   for tp, off in offsets.items()}
        self._run(f"committing offsets to group {self.group_id!r}", lambda a: _alter(a, self.group_id, request))
        log.debug("committed %s to group %r", {str(k): v for k, v in offsets.items()}, self.group_id)

    def close(self) -> None:
        """Close the admin client; idempotent, never raises."""
        with self._lock:
            self._closed = True
            client, self._admin = self._admin, None
        if client is not None:
            try:
                client.close()
            except Exception as exc:  # noqa: BLE001 - closing is best effort
                log.warning("closing the admin client of %r failed: %r", self, exc)
