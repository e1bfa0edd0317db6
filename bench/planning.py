"""B4 driver planning latency per batch: ``DirectPlanner.plan()`` against the real broker.

A topic with 10 / 100 / 1000 partitions (10 records each), a ``Subscribe`` strategy and
``KafkaMetadata`` exactly as ``createDirectStream`` builds them; after ``start()`` and a few
warm-up batches, each timed batch is ``plan(1.0)`` + ``advance()``. Two modes: the default
partition-discovery interval (5 s: most batches do one ListOffsets round trip) and discovery on
every batch (``discovery_interval_s=0``: plus a DescribeTopics), the worst case.
"""

from __future__ import annotations

import time
from typing import List

from .common import Context, log, percentile

TARGET_MS = 50.0
TARGET_PARTITIONS = 1000


def plan_latencies(ctx: Context, topic: str, interval: float, reps: int, warm: int = 5) -> List[float]:
    from dstream_exactly_once.kafka.metadata import KafkaMetadata
    from dstream_exactly_once.kafka.params import parse_kafka_params
    from dstream_exactly_once.kafka.planner import DirectPlanner
    from dstream_exactly_once.kafka.strategies import Subscribe

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
    res.note("B4", f"{s.b4_reps} timed plan()+advance() per case after 5 warm-up batches, back to back; "
                   "single KRaft broker on the same 2 cores")
    created = []
    try:
        for parts in s.b4_partitions:
            name = f"bench-plan-{parts}"
            log(f"B4 creating {name} ({parts} partitions)")
            kafka.create_topic(name, parts)
            created.append(name)
            kafka.produce(name, range(10 * parts), partitions=parts)
            for mode, interval in (("default discovery interval (5 s)", 5.0), ("discovery every batch", 0.0)):
                lat = plan_latencies(ctx, name, interval, s.b4_reps)
                p50, p99 = percentile(lat, 50), percentile(lat, 99)
                log(f"B4 {parts:5d} partitions, {mode}: p50 {p50:.2f} ms, p99 {p99:.2f} ms")
                res.add("B4", f"{parts} partitions, {mode}", p50, "ms p50",
                        f"p99 {p99:.2f} ms, mean {sum(lat) / len(lat):.2f} ms, max {max(lat):.2f} ms, "
                        f"{len(lat)} batches", partitions=parts, mode="default" if interval else "discovery",
                        p50=p50, p99=p99, samples=lat)
                if parts == TARGET_PARTITIONS and interval:
                    res.check("B4", f"plan() p50, {parts} partitions, {mode}", p50, "<=", TARGET_MS, "ms",
                              f"p99 {p99:.2f} ms")
    finally:
        for name in created:
            try:
                kafka.delete_topic(name)
            except Exception:  # noqa: BLE001 - best effort clean-up of the broker
                pass
