"""B3 output cost per batch: the exactly-once store's offset log + commit vs the plain write.

For each store, partitions (ranges per batch, all advanced by each commit) x result keys
(``Writes.incr`` of that many distinct keys), a fresh application; per batch, timed separately:
``store.log_batch(epoch, batch)`` (the offset log, its own durable transaction) and
``store.commit(epoch, batch, writes)`` (results + offsets + epoch check + commit log). ``Writes``
is built once per case and not timed; the commit's own encoding of it is.

Same-run baseline per store and key count, interleaved batch by batch with the commits (the
order alternating): the plain writer of B2 — the store's own set-based statement (SQLite /
PostgreSQL: the same JSON counter upsert into a table of the store's layout and fill factor;
Redis: a Lua script decoding the same payload and running one ``HINCRBY`` per key) without
fencing, offsets, offset log or commit log. The target is on the per-batch output cost
(offset log + commit) over that plain write, at 100 partitions x 1,000 keys.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Dict, List, Tuple

from .common import Context, log, percentile
from .pipeline import STORE_NAMES, STORES, PlainWriter, make_plain

TARGET_RATIO = 1.3
TARGET_CASE = (100, 1_000)


def measure_case(ctx: Context, kind: str, url: str, plain: PlainWriter, partitions: int, keys: int, reps: int,
                 warm: int) -> Dict[str, List[float]]:
    """Per batch (ms): ``log`` (log_batch), ``commit``, ``output`` (their sum) and ``plain``."""
    from dstream_exactly_once import OffsetRange
    from dstream_exactly_once.stores import CommitOutcome, PlannedBatch, Writes, open_store

    store = open_store(url, f"b3-{partitions}-{keys}-{uuid.uuid4().hex[:8]}")
    out: Dict[str, List[float]] = {"log": [], "commit": [], "output": [], "plain": []}
    try:
        epoch = store.start_epoch()
        writes = Writes()
        counts = {f"key{i:06d}": 1 for i in range(keys)}
        for k, v in counts.items():
            writes.incr("words", k, v)
        for b in range(warm + reps):
            batch = PlannedBatch(b, int(time.time() * 1000),
                                 tuple(OffsetRange("bench-b3", p, 10 * b, 10 * b + 10) for p in range(partitions)))
            if b % 2:
                lg, cm = _exactly_once(store, epoch, batch, writes, CommitOutcome.APPLIED)
                pl = _plain(plain, counts)
            else:
                pl = _plain(plain, counts)
                lg, cm = _exactly_once(store, epoch, batch, writes, CommitOutcome.APPLIED)
            if b >= warm:
                out["log"].append(lg * 1000)
                out["commit"].append(cm * 1000)
                out["output"].append((lg + cm) * 1000)
                out["plain"].append(pl * 1000)
        if store.get_value("words", "key000000") != warm + reps:
            raise RuntimeError("the committed increments are wrong")
        return out
    finally:
        store.close()


def _exactly_once(store: Any, epoch: int, batch: Any, writes: Any, applied: Any) -> Tuple[float, float]:
    """Seconds of ``log_batch`` and of ``commit`` for one batch."""
    t0 = time.perf_counter()
    store.log_batch(epoch, batch)
    t1 = time.perf_counter()
    outcome = store.commit(epoch, batch, writes)
    t2 = time.perf_counter()
    if outcome is not applied:
        raise RuntimeError(f"commit of batch {batch.batch_id} was {outcome}")
    return t1 - t0, t2 - t1


def _plain(plain: PlainWriter, counts: Dict[str, int]) -> float:
    t0 = time.perf_counter()
    plain.write(counts)
    return time.perf_counter() - t0


def run_b3(ctx: Context) -> None:
    res, s = ctx.results, ctx.settings
    res.note("B3", f"timed batches per case: {s.b3_reps_small} with 1k keys, {s.b3_reps_large} with "
                   f"{max(s.b3_keys):,} keys (after 3 / 1 warm-up batches); every batch logs its ranges "
                   f"(log_batch), then commits all partitions' offsets and increments every key; the plain write "
                   f"of the same keys runs in the same loop, order alternating; SQLite WAL synchronous=FULL, "
                   f"PostgreSQL fsync=on (store and plain tables fillfactor=50), Redis without AOF")
    for kind in STORES:
        for keys in s.b3_keys:
            small = keys <= 1_000
            reps, warm = (s.b3_reps_small, 3) if small else (s.b3_reps_large, 1)
            plain = make_plain(ctx, kind, ctx.store_url(kind))
            plain_all: List[float] = []
            try:
                for parts in s.b3_partitions:
                    m = measure_case(ctx, kind, ctx.store_url(kind), plain, parts, keys, reps, warm)
                    plain_all += m["plain"]
                    p50 = {k: percentile(v, 50) for k, v in m.items()}
                    ratio = p50["output"] / p50["plain"]
                    log(f"B3 {kind:10s} {parts:5d} partitions {keys:7,d} keys: log {p50['log']:.2f} + commit "
                        f"{p50['commit']:.2f} = {p50['output']:.2f} ms vs plain {p50['plain']:.2f} ms ({ratio:.2f}x)")
                    res.add("B3", f"{STORE_NAMES[kind]}, {parts} partitions, {keys:,} keys", p50["output"],
                            "ms p50 (log+commit)",
                            f"{ratio:.2f}x the plain write ({p50['plain']:.2f} ms p50, same loop); log_batch p50 "
                            f"{p50['log']:.2f} ms + commit p50 {p50['commit']:.2f} ms; output p25–p75 "
                            f"{percentile(m['output'], 25):.2f}–{percentile(m['output'], 75):.2f}, p99 "
                            f"{percentile(m['output'], 99):.2f}, max {max(m['output']):.2f} ms; {len(m['output'])} "
                            f"batches", store=kind, partitions=parts, keys=keys, p50=p50["output"],
                            p99=percentile(m["output"], 99), commit_p50=p50["commit"], log_p50=p50["log"],
                            plain_p50=p50["plain"], samples=m["output"], vs_plain=ratio)
                    if (parts, keys) == TARGET_CASE:
                        res.check("B3", f"{STORE_NAMES[kind]} output cost per batch (log_batch + commit) / plain "
                                        f"set-based write, {parts} partitions, {keys:,} keys", ratio, "<=",
                                  TARGET_RATIO, "x",
                                  f"{p50['output']:.2f} ms (log {p50['log']:.2f} + commit {p50['commit']:.2f}) vs "
                                  f"{p50['plain']:.2f} ms p50; commit alone {p50['commit'] / p50['plain']:.2f}x")
            finally:
                plain.close()
            base = percentile(plain_all, 50)
            res.add("B3", f"{STORE_NAMES[kind]}, plain set-based write of {keys:,} keys (same-run baseline)", base,
                    "ms p50", f"p25–p75 {percentile(plain_all, 25):.2f}–{percentile(plain_all, 75):.2f}, p99 "
                    f"{percentile(plain_all, 99):.2f} ms, {len(plain_all)} writes interleaved with the cases above",
                    store=kind, keys=keys, baseline=True, p50=base, samples=plain_all)
