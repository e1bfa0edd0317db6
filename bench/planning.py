"""B4 driver planning latency per batch: ``DirectPlanner.plan()`` against the real broker.

A topic with 10 / 100 / 1000 partitions (10 records each), a ``Subscribe`` strategy and
``KafkaMetadata`` exactly as ``createDirectStream`` builds them; after ``start()`` and a few
warm-up batches, each timed batch is ``plan(1.0)`` + ``advance()``. Two modes: the default
partition-discovery interval (5 s: most batches do one ListOffsets round trip) and discovery on
every batch (``discovery_interval_s=0``: plus a DescribeTopics), the worst case.

A producer process writes to every partition of the topic, round-robin, throughout the timed
batches (``PRODUCE_RATE`` records/s, achieved rate reported), so partitions' end offsets move
between batches and planning cannot take the "unchanged range" shortcut of an idle topic.
"""

from __future__ import annotations

import multiprocessing as mp
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from .common import Context, log, percentile

TARGET_MS = 50.0
TARGET_PARTITIONS = 1000
PRODUCE_RATE = 2000  # records/s asked for, over all partitions, while planning (achieved rate reported)


_VALUE = b"x" * 100  #: every benchmark producer's record value


def _paced(send: Callable[[str, int], Any], targets: List[Tuple[str, int]], rate: int, stop: Any, sent: Any,
           hot: float = 0.0, each_round: Optional[Callable[[], Any]] = None) -> None:
    """The pacing both producers share: ``rate`` records/s round-robin over every partition of
    ``targets`` (``send(topic, partition)`` each) until ``stop`` is set, ``sent`` counting them; a
    fraction ``hot`` to partition 0 of the first topic instead; ``each_round`` after each 1/100 s worth."""
    flat = [(topic, p) for topic, partitions in targets for p in range(partitions)]
    n, t0, i = 0, time.monotonic(), 0
    try:
        while not stop.is_set():
            for _ in range(max(1, rate // 100)):
                if hot and (n % 100) < hot * 100:
                    send(flat[0][0], 0)
                else:
                    topic, p = flat[i]
                    send(topic, p)
                    i = (i + 1) % len(flat)
                n += 1
            sent.value = n
            if each_round is not None:
                each_round()
            ahead = n / rate - (time.monotonic() - t0)
            if ahead > 0:
                time.sleep(ahead)
    finally:
        sent.value = n


def _produce_until(bootstrap: str, targets: List[Tuple[str, int]], rate: int, stop: Any, sent: Any,
                   hot: float = 0.0, settings: Optional[Dict[str, Any]] = None) -> None:
    """Producer process (kafka-python): 100-byte records paced by :func:`_paced` over ``targets``
    (``(topic, partitions)``). ``settings``: producer settings instead of ``acks=1`` (e.g. an
    idempotent ``acks="all"`` producer)."""
    import logging

    from kafka import KafkaProducer

    logging.getLogger("kafka").setLevel(logging.ERROR)  # event-loop timing warnings on a busy machine
    producer = KafkaProducer(bootstrap_servers=bootstrap, client_id="deo-bench-producer",
                             **{"acks": 1, "linger_ms": 20, **(settings or {})})
    try:
        _paced(lambda topic, p: producer.send(topic, value=_VALUE, partition=p), targets, rate, stop, sent, hot)
        producer.flush()
    finally:
        producer.close()


#: kafka-python producer settings -> librdkafka's names (for :func:`_produce_until_confluent`)
_LIBRDKAFKA_NAMES = {"enable_idempotence": "enable.idempotence", "acks": "acks", "linger_ms": "linger.ms"}


def _produce_until_confluent(bootstrap: str, targets: List[Tuple[str, int]], rate: int, stop: Any, sent: Any,
                             hot: float = 0.0, settings: Optional[Dict[str, Any]] = None) -> None:
    """:func:`_produce_until` with a confluent-kafka (librdkafka) producer: the same records, partitions,
    pacing and settings (names translated), a fraction of the CPU of kafka-python's producer."""
    from confluent_kafka import Producer

    merged = {"acks": 1, "linger_ms": 20, **(settings or {})}
    conf: Dict[str, Any] = {"bootstrap.servers": bootstrap, "client.id": "deo-bench-producer"}
    for key, value in merged.items():
        if key not in _LIBRDKAFKA_NAMES:
            raise ValueError(f"producer setting {key!r} has no librdkafka name here "
                             f"(known: {sorted(_LIBRDKAFKA_NAMES)})")
        conf[_LIBRDKAFKA_NAMES[key]] = value
    producer = Producer(conf)

    def send(topic: str, partition: int) -> None:
        while True:
            try:
                producer.produce(topic, value=_VALUE, partition=partition)
                return
            except BufferError:  # the local queue is full: serve deliveries, then try again
                producer.poll(0.05)

    try:
        _paced(send, targets, rate, stop, sent, hot, each_round=lambda: producer.poll(0))
    finally:
        left = producer.flush(30)
        if left:
            raise RuntimeError(f"{left} records were not delivered within 30 s of the producer's stop")


class Producing:
    """Context manager: a producer process writing to every partition of ``targets`` (``[(topic,
    partitions)]``) while the block runs, started ``lead`` seconds before it."""

    def __init__(self, bootstrap: str, targets: List[Tuple[str, int]], rate: int = PRODUCE_RATE,
                 lead: float = 2.0) -> None:
        ctx = mp.get_context("spawn")
        self.stop, self.sent = ctx.Event(), ctx.Value("q", 0)
        self.proc = ctx.Process(target=_produce_until, args=(bootstrap, targets, rate, self.stop, self.sent),
                                daemon=True)
        self.lead = lead
        self.t0 = 0.0
        self.seconds = 0.0

    def __enter__(self) -> Producing:
        self.proc.start()
        time.sleep(self.lead)  # connected and producing before the first timed batch
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.seconds = time.perf_counter() - self.t0
        self.stop.set()
        self.proc.join(30)
        if self.proc.is_alive():
            self.proc.terminate()
            self.proc.join(5)

    @property
    def rate(self) -> float:
        return int(self.sent.value) / max(self.seconds + self.lead, 1e-9)


def plan_latencies(ctx: Context, topic: str, interval: float, reps: int, warm: int = 5) -> List[float]:
    from dstream_exactly_once.kafka._metadata import KafkaMetadata
    from dstream_exactly_once.kafka._params import parse_kafka_params
    from dstream_exactly_once.kafka._planner import DirectPlanner
    from dstream_exactly_once.kafka._strategies import Subscribe

    md = KafkaMetadata(parse_kafka_params(ctx.kafka_params()))
    try:
        planner = DirectPlanner(md, Subscribe([topic]), auto_offset_reset="earliest", discovery_interval_s=interval)
        planner.start()
        out = []
        for i in range(warm + reps):
            t0 = time.perf_counter()
            ranges = planner.plan(1.0)
            planner.advance(ranges)
            dt = time.perf_counter() - t0
            if i >= warm:
                out.append(dt * 1000)
        return out
    finally:
        md.close()


def run_b4(ctx: Context) -> None:
    res, s = ctx.results, ctx.settings
    kafka = ctx.kafka()
    res.note("B4", f"{s.b4_reps} timed plan()+advance() per case after 5 warm-up batches, back to back, while a "
                   f"producer process writes {PRODUCE_RATE:,} records/s round-robin over all partitions of the "
                   "topic (end offsets move every batch); single KRaft broker on the same 2 cores")
    created = []
    try:
        for parts in s.b4_partitions:
            name = f"bench-plan-{parts}"
            log(f"B4 creating {name} ({parts} partitions)")
            kafka.create_topic(name, parts)
            created.append(name)
            kafka.produce(name, range(10 * parts), partitions=parts)
            for mode, interval in (("default discovery interval (5 s)", 5.0), ("discovery every batch", 0.0)):
                with Producing(kafka.bootstrap, [(name, parts)]) as producing:
                    lat = plan_latencies(ctx, name, interval, s.b4_reps)
                p50, p99 = percentile(lat, 50), percentile(lat, 99)
                log(f"B4 {parts:5d} partitions, {mode}: p50 {p50:.2f} ms, p99 {p99:.2f} ms "
                    f"(producing {producing.rate:,.0f} records/s)")
                res.add("B4", f"{parts} partitions, {mode}, while producing", p50, "ms p50",
                        f"p25–p75 {percentile(lat, 25):.2f}–{percentile(lat, 75):.2f}, p99 {p99:.2f} ms, max "
                        f"{max(lat):.2f} ms, {len(lat)} batches; producer {producing.rate:,.0f} records/s",
                        partitions=parts, mode="default" if interval else "discovery",
                        p50=p50, p99=p99, samples=lat, produce_rate=producing.rate)
                if parts == TARGET_PARTITIONS and interval:
                    res.check("B4", f"plan() p50, {parts} partitions, {mode}, while producing", p50, "<=", TARGET_MS,
                              "ms", f"p99 {p99:.2f} ms; producer {producing.rate:,.0f} records/s")
    finally:
        for name in created:
            try:
                kafka.delete_topic(name)
            except Exception:  # noqa: BLE001 - best effort clean-up of the broker
                pass
