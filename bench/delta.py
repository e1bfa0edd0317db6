"""B9 Delta append: the exactly-once Delta sink's batch vs a plain ``deltalake.write_deltalake`` append.

``python3 -m bench.delta [--rows 100000] [--rounds 7] [--warm 2]``

Two peers append the same Arrow batch of ``--rows`` rows (an int64 id, a string key, a float64
value) to a local Delta table of their own, in interleaved rounds (the order alternates), after the
same warm-up appends:

- ``exactly-once`` — ``DeltaSink.write_batch`` (the table's transaction read, the Parquet file
  written by one task, the store's ``pending`` record, ONE Delta commit with the application
  transaction and the positions, the commit's version read back) and the store's commit of the
  batch's positions (SQLite), as ``commit_each_batch`` runs them. The task runs in this process (a
  stand-in for Spark's one-partition RDD), so the numbers are the sink's own cost, not Spark's;
- ``plain`` — ``write_deltalake(table, batch, mode="append")``: at-least-once.

Per peer: wall time per batch (median, min–max) and CPU time per batch (this process's user + sys,
``deltalake``'s Rust threads included); the ratio is median / median of the same rounds. Target:
exactly-once wall time at most 1.2x the plain append.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from typing import Any, Callable, Dict, Iterable, List, Tuple

from .common import median


class _OnePartition:
    """The part of a Spark RDD the sink uses: one partition, run in this process."""

    def __init__(self, rows: List[Any]) -> None:
        self.rows = rows

    def mapPartitionsWithIndex(self, f: Callable[[int, Iterable[Any]], Iterable[Any]]) -> _OnePartition:  # noqa: N802
        return _OnePartition(list(f(0, iter(self.rows))))

    def collect(self) -> List[Any]:
        return self.rows


def _batch(n: int) -> Any:
    import pyarrow as pa

    return pa.record_batch({"id": pa.array(range(n), pa.int64()),
                            "key": pa.array([f"k{i % 1000}" for i in range(n)], pa.string()),
                            "value": pa.array([i * 0.5 for i in range(n)], pa.float64())})


def _timed(fn: Callable[[], Any]) -> Tuple[float, float]:
    w0, c0 = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - w0, time.process_time() - c0


def run(rows: int, rounds: int, warm: int) -> Dict[str, Dict[str, List[float]]]:
    from deltalake import write_deltalake

    from dstream_exactly_once.kafka._offsets import OffsetRange
    from dstream_exactly_once.sinks.delta import DeltaSink
    from dstream_exactly_once.stores import PlannedBatch, open_store

    root = tempfile.mkdtemp(prefix="bench-delta-")
    batch = _batch(rows)
    sink = DeltaSink(os.path.join(root, "eo"), schema=batch.schema)
    plain_uri = os.path.join(root, "plain")
    store = open_store(f"sqlite:///{root}/state.db", "bench-delta")
    epoch = store.start_epoch()
    state = {"next": 0}

    def exactly_once() -> None:
        i = state["next"]
        state["next"] += 1
        planned = PlannedBatch(i, 1_700_000_000_000 + i, (OffsetRange("bench", 0, i * rows, (i + 1) * rows),))
        store.log_batch(epoch, planned)
        store.commit(epoch, planned, sink.write_batch(store, epoch, planned, _OnePartition([batch])))

    def plain() -> None:
        write_deltalake(plain_uri, batch, mode="append")

    peers = {"exactly-once": exactly_once, "plain": plain}
    out: Dict[str, Dict[str, List[float]]] = {name: {"wall": [], "cpu": []} for name in peers}
    try:
        for _ in range(warm):
            for fn in peers.values():
                fn()
        for r in range(rounds):
            order = list(peers) if r % 2 == 0 else list(reversed(peers))
            for name in order:
                wall, cpu = _timed(peers[name])
                out[name]["wall"].append(wall)
                out[name]["cpu"].append(cpu)
    finally:
        store.close()
        shutil.rmtree(root, ignore_errors=True)
    return out


def main(argv: List[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m bench.delta", description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=100_000)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--warm", type=int, default=2)
    args = p.parse_args(argv)
    print(f"B9 Delta append: {args.rows:,} rows a batch, {args.rounds} interleaved rounds after {args.warm} warm-up "
          f"appends each; 1-min load average {os.getloadavg()[0]:.2f}", flush=True)
    res = run(args.rows, args.rounds, args.warm)
    for name, m in res.items():
        print(f"  {name:13s} wall {median(m['wall']) * 1000:8.1f} ms (min {min(m['wall']) * 1000:.1f}, max "
              f"{max(m['wall']) * 1000:.1f})   cpu {median(m['cpu']) * 1000:8.1f} ms (min {min(m['cpu']) * 1000:.1f}, "
              f"max {max(m['cpu']) * 1000:.1f})")
    ratio = median(res["exactly-once"]["wall"]) / median(res["plain"]["wall"])
    cpu_ratio = median(res["exactly-once"]["cpu"]) / median(res["plain"]["cpu"])
    print(f"  ratio exactly-once / plain: wall {ratio:.2f}x, cpu {cpu_ratio:.2f}x (target wall <= 1.2x: "
          f"{'PASS' if ratio <= 1.2 else 'FAIL'}); 1-min load average {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
