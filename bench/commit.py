"""B3 commit latency: ``TransactionalStore.commit(epoch, batch, writes)`` per store.

For each store, partitions (ranges per batch, all advanced by each commit) x result keys
(``Writes.incr`` of that many distinct keys), a fresh application: a few warm-up commits (the
first one inserts every key; later ones take the steady-state increment path), then timed
commits of consecutive batches. ``Writes`` is built once per case and not timed; the commit's
own encoding of it is. The offset log (``log_batch``) is not part of this number.

Same-run baseline per store and key count: B2's plain writer (what a hand-written job does: one
upsert/HINCRBY per key, no offsets, no fencing, no commit log) timed on the same keys, so each
case also prints its ratio to a bare write of the same results on the same machine at that moment.
"""

from __future__ import annotations

import time
import uuid
from typing import List

from .common import Context, log, percentile
from .pipeline import STORE_NAMES, STORES, make_plain

TARGETS_MS = {"redis": 2.0, "sqlite": 5.0, "postgresql": 10.0}
TARGET_CASE = (100, 1_000)


def commit_latencies(url: str, partitions: int, keys: int, reps: int, warm: int) -> List[float]:
    from dstream_exactly_once import OffsetRange
    from dstream_exactly_once.stores import CommitOutcome, PlannedBatch, Writes, open_store

    store = open_store(url, f"b3-{partitions}-{keys}-{uuid.uuid4().hex[:8]}")
    try:
        epoch = store.start_epoch()
        writes = Writes()
        for i in range(keys):
            writes.incr("words", f"key{i:06d}", 1)
        out = []
        for b in range(warm + reps):
            batch = PlannedBatch(b, int(time.time() * 1000),
                                 tuple(OffsetRange("bench-b3", p, 10 * b, 10 * b + 10) for p in range(partitions)))
            t0 = time.perf_counter()
            outcome = store.commit(epoch, batch, writes)
            dt = time.perf_counter() - t0
            if outcome is not CommitOutcome.APPLIED:
                raise RuntimeError(f"commit of batch {b} was {outcome}")
            if b >= warm:
                out.append(dt * 1000)
        if store.get_value("words", "key000000") != warm + reps:
            raise RuntimeError("the committed increments are wrong")
        return out
    finally:
        store.close()


def plain_latencies(ctx: Context, kind: str, url: str, keys: int, reps: int, warm: int) -> List[float]:
    """The same increments written by B2's plain writer, one write per batch, timed like a commit."""
    writer = make_plain(ctx, kind, url)
    try:
        counts = {f"key{i:06d}": 1 for i in range(keys)}
        out = []
        for b in range(warm + reps):
            t0 = time.perf_counter()
            writer.write(counts)
            dt = time.perf_counter() - t0
            if b >= warm:
                out.append(dt * 1000)
        if writer.values().get("key000000") != warm + reps:
            raise RuntimeError("the plain writer's increments are wrong")
        return out
    finally:
        writer.close()


def run_b3(ctx: Context) -> None:
    res, s = ctx.results, ctx.settings
    res.note("B3", f"timed commits per case: {s.b3_reps_small} with 1k keys, {s.b3_reps_large} with "
                   f"{max(s.b3_keys):,} keys (after 3 / 1 warm-up commits); every commit advances all partitions' "
                   f"offsets and increments every key; SQLite WAL synchronous=FULL, PostgreSQL fsync=on, "
                   f"Redis without AOF")
    for kind in STORES:
        url = ctx.store_url(kind)
        for keys in s.b3_keys:
            small = keys <= 1_000
            reps, warm = (s.b3_reps_small, 3) if small else (s.b3_reps_large, 1)
            plain = plain_latencies(ctx, kind, ctx.store_url(kind), keys, reps, warm)
            base = percentile(plain, 50)
            log(f"B3 {kind:10s} plain write of {keys:7,d} keys: p50 {base:.2f} ms")
            res.add("B3", f"{STORE_NAMES[kind]}, plain write of {keys:,} keys (same-run baseline)", base, "ms p50",
                    f"p99 {percentile(plain, 99):.2f} ms, {len(plain)} writes; B2's plain writer",
                    store=kind, keys=keys, baseline=True, p50=base, samples=plain)
            for parts in s.b3_partitions:
                lat = commit_latencies(url, parts, keys, reps, warm)
                p50, p99 = percentile(lat, 50), percentile(lat, 99)
                log(f"B3 {kind:10s} {parts:5d} partitions {keys:7,d} keys: p50 {p50:.2f} ms, p99 {p99:.2f} ms "
                    f"({len(lat)} commits, {p50 / base:.2f}x the plain write)")
                res.add("B3", f"{STORE_NAMES[kind]}, {parts} partitions, {keys:,} keys", p50, "ms p50",
                        f"{p50 / base:.2f}x the plain write; p99 {p99:.2f} ms, mean {sum(lat) / len(lat):.2f} ms, "
                        f"max {max(lat):.2f} ms, {len(lat)} commits", store=kind, partitions=parts, keys=keys,
                        p50=p50, p99=p99, samples=lat, vs_plain=p50 / base)
                if (parts, keys) == TARGET_CASE:
                    res.check("B3", f"{STORE_NAMES[kind]} commit p50, {parts} partitions, {keys:,} keys", p50, "<=",
                              TARGETS_MS[kind], "ms", f"p99 {p99:.2f} ms; {p50 / base:.2f}x the plain write of the "
                              f"same keys ({base:.2f} ms)")
