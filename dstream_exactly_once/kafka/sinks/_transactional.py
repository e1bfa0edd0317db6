"""Exactly-once output to a Kafka topic with kafka-python transactions.

Protocol, per Spark partition of a batch (input range ``r`` of input partition ``tp``):

1. a producer with the deterministic ``transactional.id`` ``{prefix}.{app}.{topic}.{partition}`` calls
   ``init_transactions()`` — this fences any older producer with the same id (a zombie task or
   driver) and completes or aborts its open transaction;
2. the sink's *marker* is read: the committed offset of ``tp`` in the consumer group
   ``{prefix}.{app}`` (used only as a marker, never for consuming). ``== r.untilOffset`` → the
   output of this range is already in Kafka (a replay): nothing is produced. ``r.fromOffset``
   (or no offset yet) → go on. Anything else → :class:`OffsetConflictError`;
3. ``begin_transaction()``, the output records, ``send_offsets_to_transaction({tp: until})``,
   ``commit_transaction()`` — records and marker become visible atomically;
4. ONE store transaction records the range's offsets and the label (``complete_batch=False``),
   retried on retriable store errors with the sink's ``store_retry`` policy (the same
   :class:`~dstream_exactly_once.RetryPolicy` the other output patterns use; a retried commit
   that had been applied answers ``REPLAYED``); the driver writes the batch's commit-log entry
   once every partition is in.

Errors: broker access goes through the Kafka seam (:func:`~dstream_exactly_once.kafka._admin.open_admin`
for the marker and the topic check, bounded by ``request.timeout.ms``) and every kafka-python
exception is translated by the one error table (:mod:`dstream_exactly_once.kafka._errors_map`),
keeping its class and ``retriable`` flag: refused credentials or ACLs → :class:`KafkaAuthError`,
a refused configuration (e.g. a ``transaction_timeout_ms`` above the broker's
``transaction.max.timeout.ms``) → :class:`ConfigurationError`, both not retriable; a broker that
is down → a retriable :class:`KafkaUnavailableError`. The output topic must exist (the sink does
not rely on the broker's auto-creation): a missing one is a :class:`ConfigurationError`.

Why offsets go into the Kafka transaction and not a store two-phase commit: a Kafka transaction
cannot be prepared by one producer and committed by another after a crash (kafka-python has no
"resume transaction"; Flink needs reflection on the Java client for it), so the only atomic unit
Kafka offers is "records + consumer-group offsets". The group offset is therefore the sink's label
set; the store stays the source of truth for planning (batches found uncommitted are replayed with
identical ranges, and step 2 recognises the ones Kafka already has).

Unit of parallelism: one Kafka transaction per Spark partition (input topic partition) per batch.
Delivery guarantee: exactly-once for consumers with ``isolation.level=read_committed``;
``read_uncommitted`` consumers may also see records of aborted attempts (at-least-once).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Optional, Tuple

from ..._checks import is_int
from ...core._retry import RetryPolicy, check_retry_policy
from ...errors import ConfigurationError, DataLossError, DStreamExactlyOnceError, OffsetConflictError, SinkError
from ...stores._base import CommitOutcome, PlannedBatch, TransactionalStore, Writes
from .._admin import broker_config, open_admin
from .._errors_map import translate_kafka_error
from .._offsets import OffsetRange, to_bytes
from .._params import KafkaConfig, parse_kafka_params

log = logging.getLogger(__name__)

__all__ = ["KafkaTransactionalSink", "KafkaWrite"]

Record = Tuple[Optional[bytes], Optional[bytes]]


@dataclass(frozen=True)
class KafkaWrite:
    """What :meth:`KafkaTransactionalSink.write_partition` did for one partition."""

    label: str
    outcome: CommitOutcome
    produced: int


def broker_error(exc: BaseException) -> BaseException:
    """The broker's own error class for a bare ``KafkaError`` that only names it: kafka-python's
    transaction manager reports an unexpected response code as ``KafkaError("Unexpected error in
    InitProducerIdResponse: [Error 50] InvalidTransactionTimeoutError")``, which would otherwise be
    translated as an unknown broker failure instead of by the error table."""
    import kafka.errors as ke

    found = re.search(r"\[Error (-?\d+)\] (\w+)", str(exc))
    if type(exc) is not ke.KafkaError or found is None:
        return exc
    cls = ke.for_code(int(found.group(1)))
    if cls is ke.UnknownError or cls.__name__ != found.group(2):
        return exc
    return cls(str(exc))


def _to_bytes(v: Any) -> Optional[bytes]:
    try:
        return to_bytes(v)
    except TypeError as exc:
        raise SinkError(f"Kafka output {exc}") from exc


#: Kafka's ``transaction.timeout.ms`` is a 32-bit int; the broker further caps it at its
#: ``transaction.max.timeout.ms`` (900000 ms by default)
MAX_TRANSACTION_TIMEOUT_MS = 2**31 - 1


def check_transaction_timeout(value: object, option: str = "transaction_timeout_ms") -> int:
    """``value`` if it is an int from 1 to :data:`MAX_TRANSACTION_TIMEOUT_MS`, else a
    :class:`ConfigurationError` naming ``option``, the value and the range."""
    if not is_int(value) or not 0 < value <= MAX_TRANSACTION_TIMEOUT_MS:
        raise ConfigurationError(f"{option} must be an int from 1 to {MAX_TRANSACTION_TIMEOUT_MS} (milliseconds; the "
                                 f"broker also caps it at its transaction.max.timeout.ms, 900000 by default), "
                                 f"got {value!r}")
    return value


class KafkaTransactionalSink:
    """Write each partition's ``(key, value)`` records to ``topic`` in one Kafka transaction.

    ``kafkaParams`` use the same keys as the stream's (``bootstrap.servers``, security settings);
    ``prefix`` namespaces the transactional ids and the marker group; ``store_retry`` is how long
    the store commit after each Kafka transaction rides out a store outage (default
    :data:`~dstream_exactly_once.core._retry.DEFAULT_RETRY`; pass the stream's ``store_retry`` to
    give both one budget).
    """

    def __init__(self, kafkaParams: Mapping[str, Any], topic: str, *, prefix: str = "deo",  # noqa: N803
                 transaction_timeout_ms: int = 60000, partitioner: Optional[Callable[[Any], int]] = None,
                 store_retry: Optional[RetryPolicy] = None) -> None:
        self.config: KafkaConfig = parse_kafka_params(kafkaParams)
        if not isinstance(topic, str) or not topic:
            raise ConfigurationError(f"topic must be a non-empty str, got {topic!r}")
        if not isinstance(prefix, str) or not prefix or any(c.isspace() for c in prefix):
            raise ConfigurationError(f"prefix must be a non-empty str without spaces, got {prefix!r}")
        check_transaction_timeout(transaction_timeout_ms)
        self.topic = topic
        self.prefix = prefix
        self.transaction_timeout_ms = transaction_timeout_ms
        if partitioner is not None and not callable(partitioner):
            raise ConfigurationError(f"partitioner must be a function (key) -> partition, or None, got {partitioner!r}")
        self.partitioner = partitioner
        self.retry = check_retry_policy(store_retry)

    def __repr__(self) -> str:
        return f"KafkaTransactionalSink(topic={self.topic!r}, bootstrap={self.config.bootstrap!r})"

    def check(self) -> None:
        """Reach the broker before the stream takes its epoch (``write_each_partition`` calls it): the
        output topic exists and ``transaction_timeout_ms`` is within the broker's
        ``transaction.max.timeout.ms``."""
        admin = open_admin(self.config, f"{self.prefix}-kafka-sink")
        try:
            try:
                topics = set(admin.list_topics())
            except Exception as exc:  # noqa: BLE001 - translated at this boundary
                raise translate_kafka_error(exc, self.config.bootstrap, "listing topics", self.config) from exc
            if self.topic not in topics:
                raise ConfigurationError(f"the Kafka sink's output topic {self.topic!r} does not exist at Kafka "
                                         f"{self.config.bootstrap}; create it (the sink does not rely on the broker "
                                         f"creating topics)")
            self.check_broker_limits(admin)
        finally:
            try:
                admin.close()
            except Exception:  # noqa: BLE001 - closing must not mask the outcome
                log.debug("error closing the Kafka sink's admin client", exc_info=True)

    def check_broker_limits(self, admin: Any, option: str = "transaction_timeout_ms") -> None:
        """Refuse a ``transaction_timeout_ms`` above the broker's ``transaction.max.timeout.ms`` (read
        with ``admin``), naming ``option``, both values and the way out; the broker would otherwise
        refuse every transaction of the sink."""
        cap = broker_config(admin, "transaction.max.timeout.ms", self.config)
        if cap is not None and cap.isdigit() and self.transaction_timeout_ms > int(cap):
            raise ConfigurationError(
                f"{option}={self.transaction_timeout_ms} is above the broker's transaction.max.timeout.ms={cap} "
                f"at Kafka {self.config.bootstrap}: set {option} to at most {cap} (or raise the broker's "
                f"transaction.max.timeout.ms)")

    def group_id(self, app_id: str) -> str:
        return f"{self.prefix}.{app_id}"

    def transactional_id(self, app_id: str, topic: str, partition: int) -> str:
        return f"{self.prefix}.{app_id}.{topic}.{partition}"

    def producer(self, transactional_id: str) -> Any:
        from kafka import KafkaProducer

        self.config.register_secrets()  # kafka-python logs the SASL token it sends at DEBUG
        kw = {k: v for k, v in self.config.client.items() if k in KafkaProducer.DEFAULT_CONFIG}
        return KafkaProducer(transactional_id=transactional_id, enable_idempotence=True, acks="all",
                             transaction_timeout_ms=self.transaction_timeout_ms, **kw)

    def _marker(self, store: TransactionalStore, batch: PlannedBatch, r: OffsetRange, tp: Any) -> Optional[int]:
        """The sink's marker for input partition ``tp``; also checks that the output topic and the input
        topic exist (the broker refuses a marker for a missing input topic, and kafka-python waits for
        it without a time limit)."""
        app_id = store.app_id
        admin = open_admin(self.config, f"{self.prefix}-kafka-sink")
        try:
            topics = set(admin.list_topics())
            if self.topic not in topics:
                raise ConfigurationError(f"the Kafka sink's output topic {self.topic!r} does not exist at Kafka "
                                         f"{self.config.bootstrap}; create it (the sink does not rely on the broker "
                                         f"creating topics)")
            if r.topic not in topics:
                raise DataLossError(f"input topic {r.topic!r} of batch {batch.batch_id} (range {r}) no longer exists "
                                    f"at Kafka {self.config.bootstrap}, so the Kafka sink cannot record its marker; "
                                    f"nothing was written. To go on without this batch: dstream-eo batches skip "
                                    f"--store {store.display_url} --app {app_id} --batch {batch.batch_id}")
            got = admin.list_group_offsets({self.group_id(app_id): [tp]}).get(self.group_id(app_id), {})
        finally:
            try:
                admin.close()
            except Exception:  # noqa: BLE001 - closing must not mask the outcome
                log.debug("error closing the Kafka sink's admin client", exc_info=True)
        meta = got.get(tp)
        return None if meta is None or meta.offset is None or meta.offset < 0 else int(meta.offset)

    def _partition_of(self, key: Any) -> Optional[int]:
        if self.partitioner is None:
            return None
        try:
            return self.partitioner(key)
        except Exception as exc:  # noqa: BLE001 - the user's function: reported as such
            raise SinkError(f"the Kafka sink's partitioner raised {type(exc).__name__} for key {key!r:.100}: "
                            f"{exc}") from exc

    def write_partition(self, store: TransactionalStore, epoch: int, batch: PlannedBatch, partition_id: int,
                        rows: Iterable[Any], *, writes: Optional[Writes] = None) -> KafkaWrite:
        """Produce ``rows`` (``(key, value)`` pairs or bare values) for range ``partition_id`` of
        ``batch`` exactly once, then commit the range's offsets in ``store``."""
        from kafka import TopicPartition

        r = batch.ranges[partition_id]
        if not isinstance(r, OffsetRange):
            raise ConfigurationError(f"KafkaTransactionalSink keeps its marker per input topic partition and needs a "
                                     f"Kafka stream; batch {batch.batch_id} reads {r.kind} range {r}")
        # imported here: dstream_exactly_once.sinks exports this module, so a top-level import of its
        # labels would make a package-import cycle when this module is imported first
        from ...sinks._labels import make_label

        label = make_label(self.group_id(store.app_id), batch.batch_id, partition_id)

        def record_writes() -> Writes:  # taken at the commit: ``writes`` may grow while the rows are read
            out = writes.copy() if writes else Writes()
            return out.add_label(label)

        def commit() -> CommitOutcome:
            return self.retry.call(lambda: store.commit(epoch, batch, record_writes(), ranges=[r],
                                                        complete_batch=False),
                                   f"store commit of batch {batch.batch_id} range {r} (Kafka sink)")

        if r.count() == 0:
            return KafkaWrite(label, commit(), 0)
        tp = TopicPartition(r.topic, r.partition)
        produced = 0
        producer = None
        try:
            producer = self.producer(self.transactional_id(store.app_id, r.topic, r.partition))
            producer.init_transactions()
            marker = self._marker(store, batch, r, tp)
            if marker == r.untilOffset:
                log.info("%s already in Kafka (marker %d): replay, nothing produced", r, marker)
            elif marker is None or marker == r.fromOffset:
                from kafka.structs import OffsetAndMetadata

                producer.begin_transaction()
                for row in rows:
                    key, value = row if isinstance(row, tuple) and len(row) == 2 else (None, row)
                    producer.send(self.topic, key=_to_bytes(key), value=_to_bytes(value),
                                  partition=self._partition_of(key))
                    produced += 1
                producer.send_offsets_to_transaction(
                    {tp: OffsetAndMetadata(r.untilOffset, f"batch {batch.batch_id}", -1)}, self.group_id(store.app_id))
                producer.commit_transaction()
            else:
                raise OffsetConflictError(
                    f"Kafka sink marker for {r.topic}-{r.partition} is at {marker}, neither the range start "
                    f"{r.fromOffset} nor its end {r.untilOffset} (group {self.group_id(store.app_id)!r})")
        except DStreamExactlyOnceError:
            raise
        except Exception as exc:  # noqa: BLE001 - translated at this boundary, keeping its class and flag
            raise translate_kafka_error(broker_error(exc), self.config.bootstrap,
                                        f"writing {r} of batch {batch.batch_id} to {self.topic!r} in a Kafka "
                                        f"transaction", self.config) from exc
        finally:
            if producer is not None:
                try:
                    producer.close(timeout=5)
                except Exception:  # noqa: BLE001 - closing must not mask the outcome
                    log.debug("error closing the transactional producer", exc_info=True)
        return KafkaWrite(label, commit(), produced)

    def recover(self, store: TransactionalStore, batch: PlannedBatch) -> None:
        """Nothing to resolve: ``init_transactions`` in each replayed partition aborts or
        completes whatever a dead producer left open."""
        return None
