"""What ``wait_replicas=1`` costs per commit on a Redis Cluster.

``python3 -m bench.redis_wait [--batches N] [--keys K] [--rounds R]`` starts a local Redis Cluster
(three masters, a replica each), then commits ``N`` batches per round into two applications on the
same master — one store without ``wait_replicas``, one with ``wait_replicas=1`` — interleaved
batch by batch (the order alternates each batch), each commit ``K`` counter increments and one
range, with the offset-log entry in the commit (``log_entry=True``: one script per batch). It
prints the per-commit latency of each (median, min/max, IQR) and the ratio of the medians per
round, then their spread over the rounds.
"""

from __future__ import annotations

import argparse
import time
import uuid
from typing import Dict, List, Optional

from .common import percentile, spread


def same_master_apps(cluster: object, n: int = 2) -> List[str]:
    """``n`` app ids whose hash slots the same master serves (so both sides pay the same hop)."""
    by_master: Dict[int, List[str]] = {}
    while True:
        app = f"bw-{uuid.uuid4().hex[:8]}"
        apps = by_master.setdefault(cluster.master_of_key("{deo:" + app + "}:epoch"), [])  # type: ignore[attr-defined]
        apps.append(app)
        if len(apps) == n:
            return apps


def run_round(url: str, apps: List[str], batches: int, keys: int) -> Dict[str, List[float]]:
    from dstream_exactly_once.kafka._offsets import OffsetRange
    from dstream_exactly_once.stores import PlannedBatch, Writes, open_store

    stores = {"plain": open_store(url, apps[0]), "wait1": open_store(url, apps[1], wait_replicas=1)}
    out: Dict[str, List[float]] = {name: [] for name in stores}
    try:
        epochs = {name: s.start_epoch() for name, s in stores.items()}
        writes = Writes()
        for k in range(keys):
            writes.incr("n", f"k{k:05d}", 1)
        for i in range(batches):
            batch = PlannedBatch(i, 1000 * (i + 1), (OffsetRange("t", 0, 10 * i, 10 * i + 10),))
            for name in (("plain", "wait1") if i % 2 == 0 else ("wait1", "plain")):
                t0 = time.perf_counter()
                stores[name].commit(epochs[name], batch, writes, log_entry=True)
                out[name].append((time.perf_counter() - t0) * 1000)
    finally:
        for s in stores.values():
            s.close()
    return out


def main(argv: Optional[List[str]] = None) -> int:
    from dstream_exactly_once.testing._redis_cluster import LocalRedisCluster

    parser = argparse.ArgumentParser(prog="python3 -m bench.redis_wait", description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=300)
    parser.add_argument("--keys", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    with LocalRedisCluster() as cluster:
        ratios = []
        for r in range(args.rounds):
            apps = same_master_apps(cluster)
            res = run_round(cluster.url, apps, args.batches, args.keys)
            plain, wait1 = percentile(res["plain"], 50), percentile(res["wait1"], 50)
            ratios.append(wait1 / plain)
            print(f"round {r + 1}: commit ms without wait {spread(res['plain'], '{:.2f}')}")
            print(f"round {r + 1}: commit ms wait_replicas=1 {spread(res['wait1'], '{:.2f}')}")
            print(f"round {r + 1}: ratio of medians (wait_replicas=1 / none) {ratios[-1]:.2f}")
        print(f"ratio over {args.rounds} rounds: {spread(ratios, '{:.2f}')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
