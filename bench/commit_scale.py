"""B7 commit scale: the exactly-once commit with its offset log vs a plain set-based write, by partitions.

``python3 -m bench.commit_scale [--partitions 100,1000,10000] [--keys 1000] [--reps N] [--warm N]
[--stores sqlite,postgresql,redis] [--results FILE]``

For P partitions x K result keys per batch, on each store, three peers run in the same rounds (the
order rotated by one each batch, the same warm-up batches for each, each in a store location or
application of its own):

- ``ahead`` — ``offset_log="ahead"`` (the default of ``commit_each_batch``): ``store.log_batch`` then
  ``store.commit`` (results + positions + epoch check + commit-log entry);
- ``in_commit`` — ``offset_log="in_commit"``: one ``store.commit(..., log_entry=True)``;
- ``plain`` — the plain writer of B2/B3: the store's own set-based counter statement (SQLite /
  PostgreSQL: the same JSON upsert into a table of the store's layout; Redis: a Lua script with one
  ``HINCRBY`` per key) of the same K keys, without fencing, positions or logs.

Two workloads: ``dense`` — every batch advances every one of the P partitions (P positions change,
the offset log holds P ranges); ``sparse`` — 100 of the P partitions have data in each batch (a
window moved by 100 each batch), the others an empty range. Batches are built before each round, as
``BatchCommitter.next_batch`` plans them (untimed: the planner's work, O(P) on the driver): the
stored form of the batch (the ranges with data, and the empty ranges of partitions without a
position); ``log_batch`` and ``commit`` of it are timed. The first commit of the epoch compares
every range (the per-range rule); the timed batches after the warm-up are flat commits (see
``docs/guarantees.md``).

A breakdown, timed after the peers in each round on an equal batch of its own (not a peer): the
per-range Python work inside ``ahead``'s calls — encoding the batch's ranges once
(``PlannedBatch.ranges_json``, shared by the offset-log and position-log entries) and the commit's
preamble (``plan_commit``: splitting the ranges into those with data and empty ones, the key set of
the flat rule's checks). What is left of ``ahead`` beyond it and the plain write is the store's
own work on the larger transaction.

Wall time per batch (p50 and p25–p75, p99) and CPU time per batch beside it: this process's CPU
(SQLite runs in it) plus the store server's — the Redis server process, or the PostgreSQL backend
process of each peer's own connection — read from ``/proc`` around each call (10 ms ticks, so CPU is
reported as the total over the timed batches divided by their number). Ratios are p50 / p50 of the
same rounds. The machine is shared: the 1-minute load average at start and end is printed.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from .common import Context, Results, Settings, log, percentile

#: targets on ahead / plain (p50): (partitions, store kind or None for every store) -> ratio
TARGETS: Dict[Tuple[int, Optional[str]], float] = {(1_000, None): 1.3, (10_000, None): 1.5, (100, "redis"): 1.3}
PEERS = ("ahead", "in_commit", "plain")
#: partitions with data per batch in the sparse workload (a window moved by this many each batch)
SPARSE = 100
NAMES = {"sqlite": "SQLite", "postgresql": "PostgreSQL", "redis": "Redis"}


def _proc_cpu(pid: Optional[int]) -> float:
    """User + system CPU seconds of ``pid`` (0 when unknown or gone)."""
    if pid is None:
        return 0.0
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            rest = f.read().decode("ascii", "replace")
    except OSError:
        return 0.0
    fields = rest[rest.rfind(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / float(os.sysconf("SC_CLK_TCK"))


def _pg_backend(conn: Any) -> Optional[int]:
    cur = conn.cursor()
    cur.execute("SELECT pg_backend_pid()")
    pid = int(cur.fetchone()[0])
    cur.close()
    return pid


class Peer:
    """One peer: its timed call and the server process whose CPU it uses."""

    def __init__(self, name: str, run: Callable[[int], None], server_pid: Optional[int]) -> None:
        self.name, self.run, self.server_pid = name, run, server_pid
        self.wall: List[float] = []
        self.cpu = 0.0

    def once(self, b: int, timed: bool) -> None:
        c0, s0, t0 = time.process_time(), _proc_cpu(self.server_pid), time.perf_counter()
        self.run(b)
        t1 = time.perf_counter()
        if timed:
            self.wall.append((t1 - t0) * 1000)
            self.cpu += (time.process_time() - c0) + (_proc_cpu(self.server_pid) - s0)


def measure(ctx: Context, kind: str, partitions: int, keys: int, reps: int, warm: int,
            dense: bool = True) -> Dict[str, Peer]:
    from dstream_exactly_once import OffsetRange
    from dstream_exactly_once.stores import CommitOutcome, PlannedBatch, Writes, open_store
    from dstream_exactly_once.stores._commit_rules import plan_commit

    from .pipeline import make_plain

    tag = f"b7-{uuid.uuid4().hex[:8]}"
    stores = {name: open_store(ctx.store_url(kind), f"{tag}-{name[:5]}") for name in ("ahead", "in_commit")}
    plain = make_plain(ctx, kind, ctx.store_url(kind), app=f"{tag}-plain")
    try:
        epochs = {name: st.start_epoch() for name, st in stores.items()}
        counts = {f"key{i:06d}": 1 for i in range(keys)}
        writes = Writes()
        for k, v in counts.items():
            writes.incr("words", k, v)
        positions = [0] * partitions
        known: set = set()  # position keys stored or planned before: BatchCommitter's own set
        batches: Dict[int, Any] = {}
        copies: Dict[int, Any] = {}

        def plan(b: int) -> Any:  # before the round, untimed: the planner's work (BatchCommitter.next_batch)
            busy = range(partitions) if dense else {(b * SPARSE + i) % partitions for i in range(SPARSE)}
            ranges = []
            for p in range(partitions):
                end = positions[p] + (10 if p in busy else 0)
                ranges.append(OffsetRange("bench-b7", p, positions[p], end))
                positions[p] = end
            batches.clear()
            batches[b] = PlannedBatch(b, 1_000 * (b + 1), tuple(ranges)).stored_form(known)
            copies.clear()
            copies[b] = PlannedBatch(b, batches[b].batch_time_ms, batches[b].ranges)
            known.update(r.position_key for r in ranges)

        def batch(b: int) -> Any:
            return batches[b]

        def ahead(b: int) -> None:
            st, e = stores["ahead"], epochs["ahead"]
            stored = batch(b)
            st.log_batch(e, stored)
            if st.commit(e, stored, writes) is not CommitOutcome.APPLIED:
                raise RuntimeError(f"batch {b} was not applied")

        def in_commit(b: int) -> None:
            st = stores["in_commit"]
            stored = batch(b)
            if st.commit(epochs["in_commit"], stored, writes, log_entry=True) is not CommitOutcome.APPLIED:
                raise RuntimeError(f"batch {b} was not applied")

        def write_plain(b: int) -> None:
            plain.write(counts)

        def python_work(b: int) -> None:  # a breakdown, not a peer: the per-range Python work of ahead's calls
            fresh = copies[b]  # an equal batch made in plan(), whose ranges text is not made yet
            fresh.ranges_json()
            plan_commit(epochs["ahead"], fresh, writes, None, True)

        plan(0)
        ahead(0)  # connections open; their server processes are known from here on
        in_commit(0)
        write_plain(0)
        pids: Dict[str, Optional[int]] = {name: None for name in PEERS}
        if kind == "redis":
            proc = getattr(getattr(ctx.redis(), "_proc", None), "proc", None)
            pids = {name: None if proc is None else int(proc.pid) for name in PEERS}
        elif kind == "postgresql":
            pids = {name: _pg_backend(st._connection(True)) for name, st in stores.items()}
            pids["plain"] = _pg_backend(plain.conn)  # type: ignore[attr-defined]
        peers = [Peer("ahead", ahead, pids["ahead"]), Peer("in_commit", in_commit, pids["in_commit"]),
                 Peer("plain", write_plain, pids["plain"])]
        work = Peer("python", python_work, None)
        for b in range(1, 1 + warm + reps):
            plan(b)
            shift = b % len(peers)
            for peer in peers[shift:] + peers[:shift]:
                peer.once(b, b > warm)
            work.once(b, b > warm)
        for name, st in stores.items():
            if st.get_value("words", "key000000") != 1 + warm + reps:
                raise RuntimeError(f"the committed increments of peer {name} are wrong")
        return {p.name: p for p in [*peers, work]}
    finally:
        plain.close()
        for st in stores.values():
            st.close()


def _spread(w: Sequence[float]) -> str:
    return f"{percentile(w, 25):.2f}–{percentile(w, 75):.2f}, p99 {percentile(w, 99):.2f}"


def _load() -> str:
    try:
        return f"{os.getloadavg()[0]:.2f}"
    except OSError:
        return "?"


def run(ctx: Context, kinds: Sequence[str], partitions: Sequence[int], keys: int, reps: int, warm: int,
        workloads: Sequence[str]) -> Tuple[List[str], List[str]]:
    """The markdown lines of the section (table rows, checks); progress goes to stderr."""
    res = ctx.results
    rows: List[str] = []
    checks: List[str] = []
    for kind, workload, parts in ((k, w, n) for k in kinds for w in workloads for n in partitions):
        m = measure(ctx, kind, parts, keys, reps, warm, workload == "dense")
        p50 = {n: percentile(p.wall, 50) for n, p in m.items()}
        cpu = {n: p.cpu * 1000 / max(1, len(p.wall)) for n, p in m.items()}
        ratio, one = p50["ahead"] / p50["plain"], p50["in_commit"] / p50["plain"]
        cpu_ratio = cpu["ahead"] / cpu["plain"] if cpu["plain"] else float("nan")
        log(f"B7 {kind:10s} {workload:6s} {parts:6d} partitions {keys:,} keys: ahead {p50['ahead']:.2f} ms "
            f"({ratio:.2f}x), in_commit {p50['in_commit']:.2f} ms ({one:.2f}x), plain {p50['plain']:.2f} ms; "
            f"CPU ms/batch {cpu['ahead']:.2f} / {cpu['in_commit']:.2f} / {cpu['plain']:.2f}; load {_load()}")

        rows.append(f"| {NAMES[kind]} | {workload} | {parts:,} | {p50['ahead']:.2f} ({_spread(m['ahead'].wall)}) "
                    f"| {p50['in_commit']:.2f} ({_spread(m['in_commit'].wall)}) | {p50['plain']:.2f} "
                    f"({_spread(m['plain'].wall)}) | "
                    f"**{ratio:.2f}x** / {one:.2f}x | {cpu['ahead']:.2f} / {cpu['in_commit']:.2f} / "
                    f"{cpu['plain']:.2f} ({cpu_ratio:.2f}x) | {p50['python']:.2f} "
                    f"({p50['python'] / p50['ahead']:.0%} of ahead) | {len(m['ahead'].wall)} |")
        res.add("B7", f"{NAMES[kind]}, {workload}, {parts} partitions, {keys:,} keys", p50["ahead"],
                "ms p50 (log+commit)", f"{ratio:.2f}x plain", store=kind, partitions=parts, keys=keys,
                workload=workload, vs_plain=ratio,
                in_commit_vs_plain=one, cpu_ms=cpu)
        target = TARGETS.get((parts, None), TARGETS.get((parts, kind)))
        if target is not None:
            for mode, value in (("offset_log='ahead'", ratio), ("offset_log='in_commit'", one)):
                ok = "PASS" if value <= target else "**FAIL**"
                checks.append(f"| {NAMES[kind]}, {workload}, {parts:,} partitions, {mode} / plain | {value:.2f}x | "
                              f"<= {target:.1f}x | {ok} |")
    return rows, checks


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m bench.commit_scale", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--partitions", default="100,1000,10000")
    p.add_argument("--keys", type=int, default=1_000)
    p.add_argument("--reps", type=int, default=30, help="timed batches per case")
    p.add_argument("--warm", type=int, default=3, help="warm-up batches per case (each peer)")
    p.add_argument("--stores", default="sqlite,postgresql,redis")
    p.add_argument("--workloads", default="dense,sparse",
                   help=f"dense: every partition has data each batch; sparse: {SPARSE} of them do")
    p.add_argument("--results", type=Path, default=None, help="markdown file to append the section to")
    args = p.parse_args(argv)
    kinds = [k.strip() for k in args.stores.split(",") if k.strip()]
    parts = [int(x) for x in args.partitions.split(",") if x.strip()]
    load_start = _load()
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="deo-bench-b7-") as work, ExitStack():
        ctx = Context(Settings.make(True, None), Results(), work)
        try:
            rows, checks = run(ctx, kinds, parts, args.keys, args.reps, args.warm,
                               [w.strip() for w in args.workloads.split(",") if w.strip()])
        finally:
            ctx.close()
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    lines = [f"## {when} — B7 commit scale ({args.keys:,} keys, partitions {', '.join(f'{x:,}' for x in parts)})",
             "", f"`python3 -m bench.commit_scale --partitions {args.partitions} --keys {args.keys} --reps "
                 f"{args.reps} --warm {args.warm} --stores {args.stores} --workloads {args.workloads}` "
                 f"({time.time() - started:.0f} s; "
                 f"1-min load average {load_start} at start, {_load()} at end, on 2 CPUs shared with other "
                 f"test runs)", "",
             "| check | measured | goal | status |", "|---|---:|---:|---|", *checks, "",
             "| store | workload | partitions | ahead: log_batch + commit, ms p50 (p25–p75, p99) | in_commit: one "
             "commit, ms p50 | plain write, ms p50 | ahead / in_commit vs plain (p50) | CPU ms/batch ahead / "
             "in_commit / plain (ahead vs plain) | of ahead: per-range Python work (encode the ranges, split "
             "them, key set), ms p50 | timed batches |",
             "|---|---|---:|---|---|---|---|---|---|---:|", *rows, ""]
    text = "\n".join(lines)
    print(text)
    if args.results is not None:
        with open(args.results, "a", encoding="utf-8") as f:
            f.write("\n" + text + "\n")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    sys.exit(main())
