"""The read topic shared by B1, B2 and B5: N 100-byte records over 4 partitions, produced fast.

Each value is 20 words ``w000``..``w999`` separated by spaces (plus a trailing space): exactly
100 bytes, and a word count over it has at most 1,000 result keys. Values are drawn from a
fixed pool, so the expected word counts of any range can be computed without reading Kafka.
Keys are null. One producer process per pair of partitions (``acks=1``, 1 MiB batches,
``linger_ms=20``), each partition written by exactly one producer so offset ``i`` of partition
``p`` holds ``value_of(p, i)``.
"""

from __future__ import annotations

import multiprocessing as mp
import random
import time
from collections import Counter
from typing import Any, Dict, Iterable, List, Sequence

from .common import READ_TOPIC_PARTITIONS, RECORD_BYTES, ReadTopic, log

VOCABULARY = 1000
WORDS_PER_RECORD = 20
POOL_SIZE = 4096
_SEED = 20240606


def value_pool() -> List[bytes]:
    rng = random.Random(_SEED)
    pool = []
    for _ in range(POOL_SIZE):
        words = [f"w{rng.randrange(VOCABULARY):03d}" for _ in range(WORDS_PER_RECORD)]
        value = (" ".join(words) + " ").encode()
        assert len(value) == RECORD_BYTES
        pool.append(value)
    return pool


def pool_index(partition: int, offset: int) -> int:
    return (partition * 1_000_003 + offset) % POOL_SIZE


def expected_word_counts(ranges: Iterable[Any]) -> Dict[str, int]:
    """Word counts of the records in ``ranges`` (OffsetRanges of the read topic)."""
    pool = value_pool()
    uses: Counter[int] = Counter()
    for r in ranges:
        full, rest = divmod(r.untilOffset - r.fromOffset, POOL_SIZE)
        if full:
            for i in range(POOL_SIZE):
                uses[i] += full
        start = r.fromOffset + full * POOL_SIZE
        for off in range(start, start + rest):
            uses[pool_index(r.partition, off)] += 1
    total: Counter[str] = Counter()
    for i, n in uses.items():
        for w in pool[i].split():
            total[w.decode()] += n
    return dict(total)


def _produce(bootstrap: str, topic: str, partitions: Sequence[int], per_partition: int) -> float:
    from kafka import KafkaProducer

    pool = value_pool()
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, enable_idempotence=False, linger_ms=20,
                             batch_size=1024 * 1024,
                             max_request_size=8 * 1024 * 1024,
                             client_id="deo-bench-producer")
    t0 = time.perf_counter()
    try:
        send = producer.send
        for p in partitions:
            for i in range(per_partition):
                send(topic, value=pool[pool_index(p, i)], partition=p)
        producer.flush()
    finally:
        producer.close()
    return time.perf_counter() - t0


def produce_read_topic(kafka: Any, records: int, name: str = "bench-read",
                       partitions: int = READ_TOPIC_PARTITIONS, processes: int = 2) -> ReadTopic:
    per = max(1, records // partitions)
    kafka.create_topic(name, partitions, config={"segment.bytes": 256 * 1024 * 1024})
    groups = [list(range(partitions))[i::processes] for i in range(processes)]
    log(f"producing {per * partitions:,} x {RECORD_BYTES}-byte records to {name!r} ({partitions} partitions, "
        f"{processes} producer processes)")
    t0 = time.perf_counter()
    ctx = mp.get_context("spawn")
    with ctx.Pool(processes) as pool:
        pool.starmap(_produce, [(kafka.bootstrap, name, g, per) for g in groups if g])
    seconds = time.perf_counter() - t0
    offsets = kafka.offsets(name)
    ends = {p: late for p, (_early, late) in offsets.items()}
    if any(end != per for end in ends.values()):
        raise RuntimeError(f"the read topic has end offsets {ends}, expected {per} per partition")
    log(f"produced {per * partitions:,} records in {seconds:.1f}s ({per * partitions / seconds:,.0f} records/s)")
    return ReadTopic(name, partitions, ends, seconds)
