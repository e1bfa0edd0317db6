"""``KafkaUtils.createStream``: Spark 2.4's receiver API, given the receiver's meaning on the
direct machinery.

The stream consumes as consumer group ``groupId``: it starts from the group's offsets committed in
Kafka (else ``auto.offset.reset``: ``smallest``/``earliest`` or ``largest``/``latest``, the
default), plans each batch's offset ranges on the driver like the direct stream, and after each
batch has completed — every output operation of it succeeded — commits that batch's offsets to the
group in Kafka (a StreamingListener on the driver). A failed batch is not committed, and no later
batch is either, so a restart re-reads from the first batch that did not complete.

Delivery guarantee: at-least-once, as the receiver without a write-ahead log was at best: a crash
after a batch's output and before its commit re-reads that batch. For exactly-once output use
``KafkaUtils.createExactlyOnceStream`` (offsets committed with the results in one transaction).
Unit of parallelism: one Spark task per topic partition per batch (the receiver's thread counts
in ``topics`` have no effect).
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Dict, Mapping, Optional

from pyspark import StorageLevel
from pyspark.streaming import StreamingContext
from pyspark.streaming.listener import StreamingListener

from ..._checks import is_int
from ...errors import ConfigurationError
from ...streaming._lifecycle import close_on_stop
from .._groups import GroupOffsets, check_group_id
from .._offsets import Decoder, TopicAndPartition
from .._strategies import check_topic_name
from ._commit_async import DirectKafkaDStream
from ._direct import build_direct_batches

log = logging.getLogger(__name__)

__all__ = ["GroupCommitListener", "create_stream"]

_ZOOKEEPER_KEYS = ("zookeeper.connect", "zookeeper.connection.timeout.ms", "zookeeper.session.timeout.ms",
                   "zookeeper.sync.time.ms")


def _check_topics(topics: Any) -> list[str]:
    if not isinstance(topics, Mapping):
        raise ConfigurationError(
            f"topics must be a dict {{topic: numThreads}} as in Spark 2.4's createStream, got {topics!r}")
    if not topics:
        raise ConfigurationError("topics must not be empty")
    for name, threads in topics.items():
        check_topic_name(name, "topics")
        if not is_int(threads) or threads < 1:
            raise ConfigurationError(f"topics[{name!r}] must be a thread count (int >= 1), got {threads!r}")
    return sorted(topics)


def _params(zk_quorum: Any, group_id: str, kafka_params: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    if kafka_params is not None and not isinstance(kafka_params, Mapping):
        raise ConfigurationError(f"kafkaParams must be a dict or None, got {type(kafka_params).__name__}")
    params = dict(kafka_params or {})  # the caller's dict is not changed (Spark 2.4's was)
    if "bootstrap.servers" not in params and "metadata.broker.list" not in params:
        raise ConfigurationError(
            f"KafkaUtils.createStream reads from the Kafka brokers, not ZooKeeper ({zk_quorum!r}): add "
            "kafkaParams={'bootstrap.servers': 'broker:9092'} (or Spark 2.4's 'metadata.broker.list')")
    other = params.get("group.id")
    if other is not None and other != group_id:
        raise ConfigurationError(
            f"kafkaParams['group.id'] = {other!r} differs from groupId = {group_id!r}; give the group once")
    for key in _ZOOKEEPER_KEYS:
        params.pop(key, None)
    params["group.id"] = group_id
    return params


def create_stream(ssc: StreamingContext, zkQuorum: Any, groupId: Any, topics: Any,  # noqa: N803
                  kafkaParams: Optional[Mapping[str, Any]], storageLevel: Any,  # noqa: N803
                  keyDecoder: Decoder, valueDecoder: Decoder) -> DirectKafkaDStream:  # noqa: N803
    """Build the group-committing stream (see the module docstring); everything is checked first."""
    if not isinstance(ssc, StreamingContext):
        raise ConfigurationError(f"ssc must be a StreamingContext, got {type(ssc).__name__}")
    group_id = check_group_id(groupId, "groupId")
    names = _check_topics(topics)
    if storageLevel is not None and not isinstance(storageLevel, StorageLevel):
        raise ConfigurationError(
            f"storageLevel must be a pyspark StorageLevel (it has no effect), got {storageLevel!r}")
    params = _params(zkQuorum, group_id, kafkaParams)
    log.warning("KafkaUtils.createStream: the ZooKeeper address %r is ignored; consumer group %r reads from and "
                "commits to the Kafka brokers %s", zkQuorum, group_id,
                params.get("bootstrap.servers", params.get("metadata.broker.list")))
    batches = build_direct_batches(ssc, names, params, None, keyDecoder, valueDecoder, None, None, None, None, 5.0)
    group = GroupOffsets(batches.config, group_id)
    try:
        committed = group.committed(names)
        batches.planner.start(_usable(batches.planner, committed, group_id))
        stream = DirectKafkaDStream(ssc, batches)
        listener = GroupCommitListener(stream, group, committed)
        ssc.addStreamingListener(listener)
    except BaseException:
        group.close()
        batches.close()
        raise
    close_on_stop(ssc, batches.close)
    close_on_stop(ssc, group.close)
    stream.group_listener = listener  # type: ignore[attr-defined]
    return stream


def _usable(planner: Any, committed: Dict[TopicAndPartition, int], group_id: str) -> Dict[TopicAndPartition, int]:
    """Committed offsets still inside their partition's log; the others fall back to
    ``auto.offset.reset``, as a Kafka consumer does (logged)."""
    parts = planner.strategy.partitions(planner.metadata)
    mine = {tp: off for tp, off in committed.items() if tp in parts}
    if not mine:
        return {}
    earliest, latest = planner.metadata.earliest(mine), planner.metadata.latest(mine)
    usable = {}
    for tp, off in sorted(mine.items()):
        if earliest[tp] <= off <= latest[tp]:
            usable[tp] = off
        else:
            log.warning("group %r: committed offset %d of %s is outside the log [%d, %d]; auto.offset.reset (%s) "
                        "applies", group_id, off, tp, earliest[tp], latest[tp], planner.auto_offset_reset)
    return usable


class GroupCommitListener(StreamingListener):
    """Commits each completed batch's offsets to the group (the ``createStream`` contract).

    Registered as a PySpark ``StreamingListener``; runs on the driver's listener thread.
    ``commits``/``failed_batch`` are for tests and monitoring.
    """

    def __init__(self, stream: DirectKafkaDStream, group: GroupOffsets,
                 committed: Mapping[TopicAndPartition, int]) -> None:
        super().__init__()
        self.stream = stream
        self.group = group
        self.last: Dict[TopicAndPartition, int] = dict(committed)
        self.commits = 0
        self.failed_batch: Optional[int] = None
        self._lock = threading.Lock()

    def onBatchCompleted(self, batchCompleted: Any) -> None:  # noqa: N802, N803 - PySpark API
        try:
            info = batchCompleted.batchInfo()
            failure = _failure(info)
            self.batch_completed(int(info.batchTime().milliseconds()), failure)
        except Exception:  # noqa: BLE001 - a listener error must never stop the stream
            log.warning("createStream: committing a completed batch failed", exc_info=True)

    def batch_completed(self, time_ms: int, failure: Optional[str] = None) -> None:
        ranges = self.stream.planned_ranges(time_ms)
        with self._lock:
            if self.failed_batch is not None or ranges is None:
                return
            if failure is not None:
                self.failed_batch = time_ms
                log.error("createStream: batch %d ms failed (%s); group %r keeps its offsets from before it, so a "
                          "restart reads it again", time_ms, failure, self.group.group_id)
                return
            changed = {r.topicPartition(): r.untilOffset for r in ranges
                       if self.last.get(r.topicPartition()) != r.untilOffset}
            if not changed:
                return
            self.group.commit(changed)
            self.last.update(changed)
            self.commits += 1


def _failure(info: Any) -> Optional[str]:
    """The first output operation's failure reason of a completed batch (``None``: all succeeded)."""
    ops = info.outputOperationInfos()
    for key in list(ops.keySet()):
        reason = ops.get(key).failureReason()
        if reason:
            return str(reason).splitlines()[0]
    return None
