"""The ``deo-kafka`` Structured Streaming sink: each micro-batch into Kafka in transactions.

Unit of parallelism: one Kafka transaction per Spark partition per micro-batch, written by the
task on its executor with the deterministic ``transactional.id`` ``{prefix}.{app}.{topic}.{partition}``
(the scheme of the DStream :class:`~dstream_exactly_once.sinks.KafkaTransactionalSink`, with the
sink's topic and the Spark partition id). kafka-python cannot hand an open transaction from an
executor to the driver (there is no "resume transaction"), so each task commits its own.

Protocol, for Spark partition ``p`` of micro-batch ``b`` of application ``app``:

1. executor: the store is read and judged under the rules of
   :mod:`dstream_exactly_once.structured._sink_runs`: a run replaced by a later start of the query, or
   whose epoch a later one took → :class:`~dstream_exactly_once.errors.FencedError`;
   a batch of another checkpoint than the one that committed the application's batches (one or
   many) → :class:`~dstream_exactly_once.errors.OffsetConflictError` (unless option
   ``new_checkpoint=continue``); the batch committed before → nothing is produced. Nothing is
   written on any of these paths. From here on ``b`` is the application's batch id (the Spark batch
   id, plus the stored batches a continued application had before the checkpoint);
2. executor: ``init_transactions()`` with the partition's transactional id fences an older producer
   with that id and completes or aborts what it left open; then the partition's *marker* is read:
   the offset of the marker group ``{prefix}.{app}.{p}`` (a consumer group used only as a marker)
   on partition 0 of the sink's topic (:mod:`._marker`). It records ``b`` → this partition's
   output of ``b`` is in Kafka: nothing is produced, but the replayed rows must match the marker's
   count and digest (otherwise the query's partitioning is not deterministic: the task fails with
   :class:`~dstream_exactly_once.errors.OffsetConflictError`, or, with option
   ``on_replay_mismatch=keep``, keeps Kafka's output and logs a warning). It records a later batch →
   :class:`~dstream_exactly_once.errors.OffsetConflictError`. Otherwise:
3. executor: ``begin_transaction()``, the rows, the marker ``b + 1`` with the rows' count and digest
   (``send_offsets_to_transaction``), ``commit_transaction()``: records and marker become visible
   atomically. A failure aborts the transaction;
4. driver, ``commit(messages, batchId)``: ONE store transaction records ``b`` as the query's last
   batch (compare-and-set on the next batch id, epoch check), as the ``deo-store`` sink does.
   ``abort`` has nothing to undo: the partitions that committed are recognised by their markers
   when Spark runs the batch again.

Delivery guarantee: exactly-once for consumers with ``isolation.level=read_committed`` while the
query restarts from its checkpoint and every run of a micro-batch puts the same records into the
same Spark partitions — a deterministic source (Spark's Kafka source, ``aof``, the rate source)
followed by deterministic transformations; a shuffle's partitions hold the same records on each run,
in any order. A replay that puts other records into a partition that committed is detected by the
digest and stops the query rather than double or lose records; not detected are a replay with fewer
Spark partitions than the attempt that wrote (the partitions it lacks are never compared) and a
source whose replay reads other records altogether. ``read_uncommitted`` consumers may
also see the records of aborted attempts (at-least-once). A transaction left open by a task that
died is aborted by the next ``init_transactions()`` of its id (the replay of the batch) or by the
broker after ``transaction_timeout_ms``; until then ``read_committed`` consumers of its partitions
wait. The marker is an ordinary group offset, subject to the broker's offset retention
(``offsets.retention.minutes``, 7 days by default): a query stopped longer than that replays its
last batch without the marker's protection.

Output modes: ``append``, and ``complete`` as Spark's own Kafka sink applies it: every micro-batch
writes the whole result table to the topic once (a consumer sees one full snapshot per batch).
Spark refuses ``update`` for this sink.

Rows (the shape of Spark's Kafka sink): ``value`` (string or binary, required), and optionally
``key`` (string or binary), ``topic`` (string; null or absent → option ``topic``), ``partition``
(int; null or absent → the producer's partitioner) and ``headers`` (array of struct
``key`` string, ``value`` binary). Other columns are ignored. Options: ``topic``, ``store``,
``store.password``, ``app_id`` (alias ``app``), ``new_checkpoint``, ``prefix``,
``transaction_timeout_ms``, ``on_replay_mismatch`` and the client settings as
``kafka.``-prefixed kafkaParams (``kafka.bootstrap.servers`` is required). Passwords never appear
in reprs, logs or errors.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Collection, Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

from ...errors import ConfigurationError, DStreamExactlyOnceError, FencedError, OffsetConflictError, SinkError
from ...stores._writes import CommitOutcome, Writes
from ...structured._sink_runs import BatchDecision, QueryRun, decide_batch, read_state, run_of_messages
from ...structured._store_sink import SINK_POSITION_KEY, StoreSinkOptions, commit_batch
from ..sinks._transactional import MAX_TRANSACTION_TIMEOUT_MS, KafkaTransactionalSink, broker_error
from ._marker import Decision, Header, Marker, RecordDigest, check_replay, decide

__all__ = ["KAFKA_SINK_NAME", "KafkaPartitionCommit", "KafkaSinkOptions", "check_kafka_schema",
           "check_output_topic", "commit_kafka_batch", "kafka_sink_options", "write_partition"]

log = logging.getLogger(__name__)

#: The name to pass to ``writeStream.format``.
KAFKA_SINK_NAME = "deo-kafka"

_STORE_OPTIONS = ("store", "store.password", "app_id", "app", "new_checkpoint")
_OWN_OPTIONS = ("topic", "prefix", "transaction_timeout_ms", "on_replay_mismatch")
_IGNORED_OPTIONS = ("path", "checkpointlocation", "epoch")  # epoch: refused by StoreSinkOptions, saying why
_MISMATCH = ("fail", "keep")

#: column → the Spark types it may have (``DataType.simpleString()``)
COLUMN_TYPES: Dict[str, Tuple[str, ...]] = {
    "value": ("string", "binary"),
    "key": ("string", "binary"),
    "topic": ("string",),
    "partition": ("int",),
    "headers": ("array<struct<key:string,value:binary>>", "array<struct<key:string,value:string>>"),
}


@dataclass(frozen=True)
class KafkaPartitionCommit:
    """One task's commit message: what its partition did (``replayed``: its output was in Kafka before)
    and the query run of the task."""

    partition_id: int
    produced: int
    replayed: bool
    run: Optional[QueryRun] = None


@dataclass(frozen=True)
class KafkaSinkOptions:
    """The checked options of a ``deo-kafka`` query: the store part and the Kafka part.

    ``repr`` shows neither password."""

    store: StoreSinkOptions
    kafka: KafkaTransactionalSink
    on_replay_mismatch: str = "fail"

    def __repr__(self) -> str:
        return f"KafkaSinkOptions(store={self.store!r}, kafka={self.kafka!r}, " \
               f"on_replay_mismatch={self.on_replay_mismatch!r})"

    @property
    def app(self) -> str:
        return self.store.app

    @property
    def topic(self) -> str:
        return self.kafka.topic

    def transactional_id(self, partition_id: int) -> str:
        """The ``transactional.id`` of Spark partition ``partition_id`` (the same on every run)."""
        return self.kafka.transactional_id(self.app, self.topic, partition_id)

    def marker_group(self, partition_id: int) -> str:
        """The consumer group holding the marker of Spark partition ``partition_id``."""
        return f"{self.kafka.group_id(self.app)}.{partition_id}"

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> KafkaSinkOptions:
        """Check ``options`` (Spark's writer options); raises one :class:`ConfigurationError` naming the
        key, the bad value and what is allowed. Opens nothing, writes nothing."""
        lowered = {str(k).lower(): v for k, v in options.items()}
        kafka_params = {k[len("kafka."):]: v for k, v in options.items() if str(k).lower().startswith("kafka.")}
        unknown = sorted(k for k in lowered if not k.startswith("kafka.")
                         and k not in _STORE_OPTIONS + _OWN_OPTIONS + _IGNORED_OPTIONS)
        if unknown:
            raise ConfigurationError(f"unknown deo-kafka option(s) {unknown}; allowed: "
                                     f"{list(_STORE_OPTIONS + _OWN_OPTIONS)} and kafka.<Kafka client setting>")
        topic = lowered.get("topic")
        if not isinstance(topic, str) or not topic.strip():
            raise ConfigurationError(f"deo-kafka option 'topic' is required: the output topic (it must exist; it "
                                     f"also holds the sink's markers), got {topic!r}")
        if not kafka_params:
            raise ConfigurationError("deo-kafka option 'kafka.bootstrap.servers' is required (host:port[,host:port])")
        mismatch = str(lowered.get("on_replay_mismatch", "fail")).lower()
        if mismatch not in _MISMATCH:
            raise ConfigurationError(f"deo-kafka option 'on_replay_mismatch' must be one of {list(_MISMATCH)}, "
                                     f"got {lowered['on_replay_mismatch']!r}")
        raw_timeout = lowered.get("transaction_timeout_ms", "60000")
        try:
            timeout = int(str(raw_timeout).strip())
        except ValueError:
            timeout = 0
        if not 0 < timeout <= MAX_TRANSACTION_TIMEOUT_MS:
            raise ConfigurationError(f"deo-kafka option 'transaction_timeout_ms' must be an int from 1 to "
                                     f"{MAX_TRANSACTION_TIMEOUT_MS} (milliseconds; the broker also caps it at its "
                                     f"transaction.max.timeout.ms, 900000 by default), got {raw_timeout!r}")
        store = StoreSinkOptions.parse({k: v for k, v in lowered.items() if k in _STORE_OPTIONS + ("epoch",)},
                                       sink=KAFKA_SINK_NAME)
        try:
            kafka = KafkaTransactionalSink(kafka_params, topic, prefix=str(lowered.get("prefix", "deo")),
                                           transaction_timeout_ms=timeout)
        except ConfigurationError as exc:
            raise type(exc)(f"deo-kafka options (kafka.* are Kafka client settings): {exc}") from None
        return cls(store, kafka, mismatch)


def _option_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def kafka_sink_options(store: str, app_id: str, topic: str, kafka_params: Mapping[str, Any], *, prefix: str = "deo",
                       transaction_timeout_ms: int = 60000, on_replay_mismatch: str = "fail",
                       new_checkpoint: str = "refuse") -> Dict[str, str]:
    """Check the sink's options and the broker's output topic, and return the writer options; nothing
    is written to the store.

    ``df.writeStream.format("deo-kafka").options(**kafka_sink_options(url, "app", "out",
    {"bootstrap.servers": "broker:9092"})).option("checkpointLocation", …).start()``. ``kafka_params``
    are Kafka client settings (as for the DStream API's ``kafkaParams``). The store is first reached,
    and the epoch of the query's start taken, by the query's first commit; ``new_checkpoint`` as for
    :func:`~dstream_exactly_once.structured.store_sink_options`.
    """
    from ...option_registry import keyword_checks

    keyword_checks("kafka_sink_options", store=store, prefix=prefix, transaction_timeout_ms=transaction_timeout_ms,
                   on_replay_mismatch=on_replay_mismatch)
    options = {"store": store, "app_id": app_id, "topic": topic, "prefix": prefix,
               "transaction_timeout_ms": str(transaction_timeout_ms), "on_replay_mismatch": on_replay_mismatch,
               "new_checkpoint": new_checkpoint}
    if not isinstance(kafka_params, Mapping):
        raise ConfigurationError(f"kafka_params must be a dict of Kafka client settings, got "
                                 f"{type(kafka_params).__name__}")
    options.update({f"kafka.{k}": _option_text(v) for k, v in kafka_params.items()})
    check_output_topic(KafkaSinkOptions.parse(options))
    return options


def _admin(opts: KafkaSinkOptions) -> Any:
    from .._admin import open_admin

    return open_admin(opts.kafka.config, f"{opts.kafka.prefix}-kafka-sink")


def _close(client: Any, what: str) -> None:
    try:
        client.close()
    except Exception:  # noqa: BLE001 - closing must not mask the outcome
        log.debug("error closing the deo-kafka %s", what, exc_info=True)


def _topics(opts: KafkaSinkOptions, admin: Any) -> Set[str]:
    from .._errors_map import translate_kafka_error

    try:
        topics = set(admin.list_topics())
    except Exception as exc:  # noqa: BLE001 - translated at this boundary
        raise translate_kafka_error(exc, opts.kafka.config.bootstrap, "listing topics", opts.kafka.config) from exc
    if opts.topic not in topics:
        raise ConfigurationError(f"the deo-kafka output topic {opts.topic!r} does not exist at Kafka "
                                 f"{opts.kafka.config.bootstrap}; create it (the sink does not rely on the broker "
                                 f"creating topics)")
    return topics


def check_output_topic(opts: KafkaSinkOptions) -> None:
    """Reach the broker and check that the sink's topic exists and that ``transaction_timeout_ms`` is
    within the broker's ``transaction.max.timeout.ms`` (before a query writes anything)."""
    admin = _admin(opts)
    try:
        _topics(opts, admin)
        opts.kafka.check_broker_limits(admin, "deo-kafka option 'transaction_timeout_ms'")
    finally:
        _close(admin, "admin client")


def check_kafka_schema(fields: Sequence[Tuple[str, str]]) -> Tuple[str, ...]:
    """The row-shape columns among ``fields`` (``(name, Spark type as simpleString())`` pairs);
    refuses a schema without ``value`` or with a column of a type the sink cannot send."""
    types = {name.lower(): kind for name, kind in fields}
    if "value" not in types:
        raise ConfigurationError(f"the deo-kafka sink needs a 'value' column (string or binary); the query's "
                                 f"columns are {[name for name, _ in fields]}")
    for name, allowed in COLUMN_TYPES.items():
        if name in types and types[name] not in allowed:
            raise ConfigurationError(f"deo-kafka column {name!r} must be of type {' or '.join(allowed)}, got "
                                     f"{types[name]}")
    return tuple(name for name in COLUMN_TYPES if name in types)


def _bytes(value: Any, column: str) -> Optional[bytes]:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    raise SinkError(f"deo-kafka column {column!r} must hold strings or bytes, got {type(value).__name__}")


def _headers(value: Any) -> List[Header]:
    out = []
    for h in value or ():
        name, data = (h["key"], h["value"]) if not isinstance(h, tuple) else h
        if not isinstance(name, str):
            raise SinkError(f"deo-kafka header keys must be strings, got {type(name).__name__}")
        out.append((name, _bytes(data, "headers.value") or b""))
    return out


Record = Tuple[str, Optional[int], Optional[bytes], Optional[bytes], List[Header]]


def to_record(row: Any, columns: Collection[str], default_topic: str) -> Record:
    """``(topic, partition, key, value, headers)`` of one row (``columns``: those of the row shape present)."""
    value = _bytes(row["value"], "value")
    key = _bytes(row["key"], "key") if "key" in columns else None
    if key is None and value is None:
        raise SinkError("a deo-kafka row has both 'key' and 'value' null; Kafka needs one of them")
    topic = (row["topic"] if "topic" in columns else None) or default_topic
    partition = row["partition"] if "partition" in columns else None
    headers = _headers(row["headers"]) if "headers" in columns else []
    return topic, partition, key, value, headers


class _Targets:
    """The topics and partitions a task may send to, checked before a record goes out."""

    def __init__(self, topics: Set[str], producer: Any, bootstrap: str) -> None:
        self.topics = topics
        self.producer = producer
        self.bootstrap = bootstrap
        self.partitions: Dict[str, Set[int]] = {}

    def check(self, topic: str, partition: Optional[int]) -> None:
        if topic not in self.topics:
            raise ConfigurationError(f"a deo-kafka row names topic {topic!r}, which does not exist at Kafka "
                                     f"{self.bootstrap}; nothing of this partition was committed")
        if partition is None:
            return
        if topic not in self.partitions:
            self.partitions[topic] = set(self.producer.partitions_for(topic) or ())
        if partition not in self.partitions[topic]:
            raise ConfigurationError(f"a deo-kafka row names partition {partition} of topic {topic!r}, which has "
                                     f"partitions {sorted(self.partitions[topic])}; nothing of this partition was "
                                     f"committed")


def _check_store(opts: KafkaSinkOptions, batch_id: int, run: QueryRun) -> BatchDecision:
    """Step 1: what the store says of Spark batch ``batch_id`` of ``run``; raises when this run may not write."""
    from ...stores import open_store

    where = f"deo-kafka app {opts.app} batch {batch_id}"
    with open_store(opts.store.store, opts.app) as store:
        current = store.current_epoch()
        decision = decide_batch(where, read_state(store, SINK_POSITION_KEY), run, batch_id, opts.store.new_checkpoint)
    if decision.epoch is not None and current > decision.epoch:
        raise FencedError(f"{where}: a newer query (epoch {current}) took over from this one (epoch "
                          f"{decision.epoch}); nothing was produced")
    return decision


def _read_marker(opts: KafkaSinkOptions, admin: Any, group: str) -> Optional[Marker]:
    from kafka import TopicPartition

    tp = TopicPartition(opts.topic, 0)
    got = admin.list_group_offsets({group: [tp]}).get(group, {}).get(tp)
    return None if got is None else Marker.parse(got.offset, got.metadata)


def _close_producer(producer: Any) -> None:
    try:
        producer.close(timeout=5)
    except Exception:  # noqa: BLE001 - closing must not mask the outcome
        log.debug("error closing the deo-kafka producer", exc_info=True)


def _translated(opts: KafkaSinkOptions, exc: Exception, what: str) -> Exception:
    from .._errors_map import translate_kafka_error

    if isinstance(exc, DStreamExactlyOnceError) or not (
            type(exc).__module__.split(".")[0] == "kafka" or isinstance(exc, (ConnectionError, TimeoutError))):
        return exc  # ours, or not the client's (a row the user's query built badly, …): as it is
    return translate_kafka_error(broker_error(exc), opts.kafka.config.bootstrap, what, opts.kafka.config)


def _prepare(opts: KafkaSinkOptions, partition_id: int, where: str) -> Tuple[Any, _Targets, Optional[Marker]]:
    """Step 2 up to the marker: the fenced producer, the topics, the marker (one attempt)."""
    producer = admin = None
    try:
        producer = opts.kafka.producer(opts.transactional_id(partition_id))
        producer.init_transactions()
        admin = _admin(opts)
        targets = _Targets(_topics(opts, admin), producer, opts.kafka.config.bootstrap)
        return producer, targets, _read_marker(opts, admin, opts.marker_group(partition_id))
    except Exception as exc:  # noqa: BLE001 - translated at this boundary, keeping its class and flag
        if producer is not None:
            _close_producer(producer)
        raise _translated(opts, exc, f"preparing {where}'s Kafka transaction") from exc
    finally:
        if admin is not None:
            _close(admin, "admin client")


def _replay(opts: KafkaSinkOptions, marker: Marker, rows: Iterable[Any], columns: Collection[str],
            where: str) -> None:
    """Step 2, a partition whose output is in Kafka: its rows must be those the marker recorded."""
    digest = RecordDigest()
    for row in rows:
        digest.add(*to_record(row, columns, opts.topic))
    mismatch = check_replay(marker, digest, where)
    if mismatch is None:
        log.info("%s: its output is in Kafka (marker); nothing produced", where)
    elif opts.on_replay_mismatch == "fail":
        raise OffsetConflictError(f"{mismatch}; nothing was produced. To keep Kafka's output and go on, restart "
                                  f"with option on_replay_mismatch=keep")
    else:
        log.warning("%s; keeping Kafka's output (on_replay_mismatch=keep)", mismatch)


def write_partition(opts: KafkaSinkOptions, batch_id: int, partition_id: int, rows: Iterable[Any],
                    columns: Collection[str], run: QueryRun) -> KafkaPartitionCommit:
    """Steps 1–3 of the protocol for one task (on an executor) of Spark batch ``batch_id`` of ``run``;
    see the module docstring.

    Broker errors Kafka marks retriable (e.g. a group coordinator still being elected) are retried
    before the first row is read, within the sink's retry policy; after it, they fail the task
    (its transaction aborted) and Spark's task retry or the query's restart runs it again."""
    from kafka import TopicPartition
    from kafka.structs import OffsetAndMetadata

    decision = _check_store(opts, batch_id, run)
    where = f"deo-kafka app {opts.app} batch {batch_id} partition {partition_id}"
    if decision.replay:
        log.info("%s: the store committed the batch before; nothing produced", where)
        return KafkaPartitionCommit(partition_id, 0, True, run)
    batch_id = decision.app_batch  # the marker counts the application's batches
    group = opts.marker_group(partition_id)
    producer, targets, marker = opts.kafka.retry.call(lambda: _prepare(opts, partition_id, where), where)
    in_transaction = False
    try:
        if decide(marker, batch_id, f"{where} (marker group {group!r})") is Decision.DONE:
            assert marker is not None
            _replay(opts, marker, rows, columns, where)
            return KafkaPartitionCommit(partition_id, 0, True, run)
        digest = RecordDigest()
        producer.begin_transaction()
        in_transaction = True
        for row in rows:
            topic, partition, key, value, headers = to_record(row, columns, opts.topic)
            targets.check(topic, partition)
            digest.add(topic, partition, key, value, headers)
            producer.send(topic, key=key, value=value, partition=partition, headers=headers or None)
        done = Marker.of(batch_id, digest)
        producer.send_offsets_to_transaction(
            {TopicPartition(opts.topic, 0): OffsetAndMetadata(done.next_batch, done.metadata(), -1)}, group)
        producer.commit_transaction()
        in_transaction = False
        return KafkaPartitionCommit(partition_id, digest.records, False, run)
    except Exception as exc:  # noqa: BLE001 - translated at this boundary, keeping its class and flag
        err = _translated(opts, exc, f"writing {where} to {opts.topic!r} in a Kafka transaction")
        if err is exc:
            raise
        raise err from exc
    finally:
        if in_transaction:
            try:
                producer.abort_transaction()
            except Exception:  # noqa: BLE001 - the next init_transactions of this id aborts it anyway
                log.debug("%s: aborting the open Kafka transaction failed", where, exc_info=True)
        _close_producer(producer)


def commit_kafka_batch(opts: KafkaSinkOptions, messages: Sequence[Optional[KafkaPartitionCommit]],
                       batch_id: int) -> CommitOutcome:
    """Step 4 on the driver: record ``batch_id`` in the store (compare-and-set, epoch check)."""
    parts = sorted((m for m in messages if m is not None), key=lambda m: m.partition_id)
    if len(parts) != len(messages):
        raise ConfigurationError(f"deo-kafka app {opts.app} batch {batch_id}: {len(messages) - len(parts)} "
                                 f"task(s) sent no commit message; the batch is not recorded")
    run = run_of_messages([m.run for m in parts if m.run is not None],  # type: ignore[misc]
                          f"deo-kafka app {opts.app} batch {batch_id}")
    outcome = commit_batch(opts.store, [Writes()], batch_id, run, sink_name=KAFKA_SINK_NAME)
    log.info("deo-kafka app %s batch %d: %d record(s) produced by %d partition(s), %d found in Kafka before; "
             "store: %s", opts.app, batch_id, sum(m.produced for m in parts), len(parts),
             sum(m.replayed for m in parts), outcome.value)
    return outcome
