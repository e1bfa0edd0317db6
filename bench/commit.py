"""B3 output cost per batch: the exactly-once store's offset log + commit vs the plain write.

For each store, partitions (ranges per batch, all advanced by each commit) x result keys
(``Writes.incr`` of that many distinct keys); per batch, timed separately, in two applications of
the store (the two ``commit_each_batch`` modes):

- ``offset_log="ahead"`` (default): ``store.log_batch(epoch, batch)`` (the offset log, its own
  durable transaction) and ``store.commit(epoch, batch, writes)`` (results + offsets + epoch check
  + commit log);
- ``offset_log="in_commit"``: one ``store.commit(epoch, batch, writes, log_entry=True)``.

``Writes`` is built once per case and not timed; the commit's own encoding of it is.

Same-run baseline per store and key count, interleaved batch by batch with the commits (the three
peers in an order rotated each batch): the plain writer of B2 — the store's own set-based
statement (SQLite / PostgreSQL: the same JSON counter upsert into a table of the store's layout
and fill factor; Redis: a Lua script decoding the same payload and running one ``HINCRBY`` per
key) without fencing, offsets, offset log or commit log. The target is on the per-batch output
cost over that plain write, at 100 partitions x 1,000 keys, checked for each mode.
"""

from __future__ import annotations

import time
import uuid
from functools import partial
from typing import Any, Callable, Dict, List, Tuple

from .common import Context, log, percentile
from .pipeline import STORE_NAMES, STORES, PlainWriter, make_plain

TARGET_RATIO = 1.3
TARGET_CASE = (100, 1_000)


MODES = ("ahead", "in_commit")
APP_SUFFIX = {"ahead": "ahead", "in_commit": "1txn"}


def measure_case(ctx: Context, kind: str, partitions: int, keys: int, reps: int, warm: int) -> Dict[str, List[float]]:
    """Per batch (ms): ``log`` (log_batch) and ``commit`` of the default mode, ``output`` (their sum),
    ``one_tx`` (``commit(..., log_entry=True)``: ``offset_log="in_commit"``) and ``plain``.

    The two modes are two applications, each in a store location of its own; the three peers run in
    every batch, in an order rotated by one each batch.
    """
    from dstream_exactly_once import OffsetRange
    from dstream_exactly_once.stores import CommitOutcome, PlannedBatch, Writes, open_store

    tag = f"b3-{uuid.uuid4().hex[:8]}"  # app ids b3-<8 hex>-ahead / -1txn / -plain: rows of one size
    # each mode in a store location of its own (SQLite: its own file, as the plain writer has; its WAL
    # checkpoints are then its own), like two applications deployed apart
    stores = {mode: open_store(ctx.store_url(kind), f"{tag}-{APP_SUFFIX[mode]}") for mode in MODES}
    # fresh too: no peer starts with a grown WAL or table
    plain = make_plain(ctx, kind, ctx.store_url(kind), app=f"{tag}-plain")
    out: Dict[str, List[float]] = {"log": [], "commit": [], "output": [], "one_tx": [], "plain": []}
    try:
        epochs = {mode: st.start_epoch() for mode, st in stores.items()}
        writes = Writes()
        counts = {f"key{i:06d}": 1 for i in range(keys)}
        for k, v in counts.items():
            writes.incr("words", k, v)
        for b in range(warm + reps):
            batch = PlannedBatch(b, int(time.time() * 1000),
                                 tuple(OffsetRange("bench-b3", p, 10 * b, 10 * b + 10) for p in range(partitions)))
            timed: Dict[str, Any] = {}
            peers: List[Tuple[str, Callable[[], Any]]] = [
                ("ahead", partial(_exactly_once, stores["ahead"], epochs["ahead"], batch, writes,
                                  CommitOutcome.APPLIED)),
                ("one_tx", partial(_one_transaction, stores["in_commit"], epochs["in_commit"], batch, writes,
                                   CommitOutcome.APPLIED)),
                ("plain", partial(_plain, plain, counts)),
            ]
            for name, run in peers[b % 3:] + peers[:b % 3]:
                timed[name] = run()
            if b >= warm:
                lg, cm = timed["ahead"]
                out["log"].append(lg * 1000)
                out["commit"].append(cm * 1000)
                out["output"].append((lg + cm) * 1000)
                out["one_tx"].append(timed["one_tx"] * 1000)
                out["plain"].append(timed["plain"] * 1000)
        for mode, st in stores.items():
            if st.get_value("words", "key000000") != warm + reps:
                raise RuntimeError(f"the committed increments of mode {mode} are wrong")
        return out
    finally:
        plain.close()
        for st in stores.values():
            st.close()


def _exactly_once(store: Any, epoch: int, batch: Any, writes: Any, applied: Any) -> Tuple[float, float]:
    """Seconds of ``log_batch`` and of ``commit`` for one batch (``offset_log="ahead"``)."""
    t0 = time.perf_counter()
    store.log_batch(epoch, batch)
    t1 = time.perf_counter()
    outcome = store.commit(epoch, batch, writes)
    t2 = time.perf_counter()
    if outcome is not applied:
        raise RuntimeError(f"commit of batch {batch.batch_id} was {outcome}")
    return t1 - t0, t2 - t1


def _one_transaction(store: Any, epoch: int, batch: Any, writes: Any, applied: Any) -> float:
    """Seconds of the one commit that also logs the batch (``offset_log="in_commit"``)."""
    t0 = time.perf_counter()
    outcome = store.commit(epoch, batch, writes, log_entry=True)
    t1 = time.perf_counter()
    if outcome is not applied:
        raise RuntimeError(f"one-transaction commit of batch {batch.batch_id} was {outcome}")
    return t1 - t0


def _plain(plain: PlainWriter, counts: Dict[str, int]) -> float:
    t0 = time.perf_counter()
    plain.write(counts)
    return time.perf_counter() - t0


def run_b3(ctx: Context) -> None:
    res, s = ctx.results, ctx.settings
    res.note("B3", f"timed batches per case: {s.b3_reps_small} with 1k keys, {s.b3_reps_large} with "
                   f"{max(s.b3_keys):,} keys (after 3 / 1 warm-up batches); every batch commits all partitions' "
                   f"offsets and increments every key, in two applications of the store: offset_log='ahead' (the "
                   f"default: log_batch, then commit) and offset_log='in_commit' (one commit with log_entry=True); "
                   f"the plain write of the same keys runs in the same loop, the three in an order rotated each "
                   f"batch; SQLite WAL synchronous=FULL, "
                   f"PostgreSQL fsync=on (store and plain tables fillfactor=50), Redis without AOF")
    for kind in STORES:
        for keys in s.b3_keys:
            small = keys <= 1_000
            reps, warm = (s.b3_reps_small, 3) if small else (s.b3_reps_large, 1)
            plain_all: List[float] = []
            for parts in s.b3_partitions:
                m = measure_case(ctx, kind, parts, keys, reps, warm)
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
                one = p50["one_tx"] / p50["plain"]
                log(f"B3 {kind:10s} {parts:5d} partitions {keys:7,d} keys: offset_log='in_commit' "
                    f"{p50['one_tx']:.2f} ms ({one:.2f}x)")
                res.add("B3", f"{STORE_NAMES[kind]}, {parts} partitions, {keys:,} keys, offset_log='in_commit'",
                        p50["one_tx"], "ms p50 (commit)",
                        f"{one:.2f}x the plain write ({p50['plain']:.2f} ms p50, same loop); one transaction "
                        f"(commit with log_entry=True); p25–p75 {percentile(m['one_tx'], 25):.2f}–"
                        f"{percentile(m['one_tx'], 75):.2f}, p99 {percentile(m['one_tx'], 99):.2f}, max "
                        f"{max(m['one_tx']):.2f} ms; {len(m['one_tx'])} batches", store=kind, partitions=parts,
                        keys=keys, mode="in_commit", p50=p50["one_tx"], p99=percentile(m["one_tx"], 99),
                        plain_p50=p50["plain"], samples=m["one_tx"], vs_plain=one)
                if (parts, keys) == TARGET_CASE:
                    res.check("B3", f"{STORE_NAMES[kind]} output cost per batch, offset_log='ahead' (default: "
                                    f"log_batch + commit) / plain set-based write, {parts} partitions, "
                                    f"{keys:,} keys", ratio, "<=", TARGET_RATIO, "x",
                              f"{p50['output']:.2f} ms (log {p50['log']:.2f} + commit {p50['commit']:.2f}) vs "
                              f"{p50['plain']:.2f} ms p50; commit alone {p50['commit'] / p50['plain']:.2f}x")
                    res.check("B3", f"{STORE_NAMES[kind]} output cost per batch, offset_log='in_commit' (one "
                                    f"transaction) / plain set-based write, {parts} partitions, {keys:,} keys",
                              one, "<=", TARGET_RATIO, "x",
                              f"{p50['one_tx']:.2f} ms vs {p50['plain']:.2f} ms p50")
            base = percentile(plain_all, 50)
            res.add("B3", f"{STORE_NAMES[kind]}, plain set-based write of {keys:,} keys (same-run baseline)", base,
                    "ms p50", f"p25–p75 {percentile(plain_all, 25):.2f}–{percentile(plain_all, 75):.2f}, p99 "
                    f"{percentile(plain_all, 99):.2f} ms, {len(plain_all)} writes interleaved with the cases above",
                    store=kind, keys=keys, baseline=True, p50=base, samples=plain_all)
