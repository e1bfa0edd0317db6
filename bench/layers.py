"""The driver's own work before and after a change of the package's structure:
``python3 -m bench.layers --before REV [--after REV] [--rounds 5]``.

Not a test: it prints a table. Two source trees — ``--before`` (a git revision) and ``--after`` (a revision, or the
working tree when left out), each copied into a temporary directory and compiled to bytecode the same
way — do the same work, each in fresh child processes (:mod:`bench.layers_child`) whose ``PYTHONPATH`` names that tree
first; each child prints the path of the package it imported, and the run stops if that is not the
tree's. The work is the driver's part of a stream, the part a change of module layout could slow:

- ``import``: ``import dstream_exactly_once`` in a fresh interpreter;
- ``commit sqlite`` / ``commit redis``: per batch, ``log_batch`` + ``commit`` of 100 ranges and 1,000
  key increments (public API; every child a fresh SQLite file or Redis application);
- ``plan``: the direct Kafka planner's ``plan()`` + ``advance()`` over a 100-partition topic holding
  1,000 records and no producer: the warm-up batches take the records, so the timed ones are the
  planner's own round (metadata, end offsets, the ranges' bookkeeping) with no new records to cut.

Services (a KRaft broker, redis-server) are started once and shared. Every round runs each
(case, tree) once; the order of the two trees alternates from round to round, and every child warms
up the same way. Per case and tree: the median of the per-round medians, their spread (min–max over
rounds) and the child's CPU seconds over its timed part (this process's CPU only; the broker's and
Redis' are not counted); the ratio after / before of the medians, per round too. A ratio outside 0.5–2
is flagged: the same code moved between modules cannot plausibly change by that much.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from .common import log, median

CHILD = Path(__file__).with_name("layers_child.py")
REPO = Path(__file__).resolve().parent.parent
PARTITIONS, KEYS = 100, 1_000


def _tree(rev: Optional[str], into: Path) -> Path:
    """The package of ``rev`` (``None``: the working tree) copied under ``into`` without any bytecode,
    then compiled there: both trees import from bytecode made the same way, as an installed package does."""
    into.mkdir(parents=True)
    if rev is None:
        shutil.copytree(REPO / "dstream_exactly_once", into / "dstream_exactly_once",
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    else:
        archive = subprocess.run(["git", "-C", str(REPO), "archive", rev, "dstream_exactly_once"],
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(into)], check=True)
    return into


def _child(tree: Path, args: List[str]) -> Dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    proc = subprocess.run([sys.executable, str(CHILD), *args], env=env, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"child {args[0]} on {tree} failed:\n{proc.stderr[-3000:]}")
    out: Dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    if not out["package"].startswith(str(tree)):
        raise RuntimeError(f"child imported {out['package']}, not the tree {tree}")
    return out


def main(argv: List[str]) -> int:
    p = argparse.ArgumentParser(prog="python3 -m bench.layers", description=__doc__.splitlines()[0])
    p.add_argument("--before", required=True, help="git revision of the earlier structure")
    p.add_argument("--after", default=None, help="git revision of the later one (default: the working tree)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--reps", type=int, default=40, help="timed batches per commit/plan child (after 5 warm-up)")
    a = p.parse_args(argv)
    if a.rounds < 2 or a.reps < 5:
        p.error("--rounds must be >= 2 and --reps >= 5")

    from dstream_exactly_once.testing import LocalKafka, LocalRedis

    with tempfile.TemporaryDirectory(prefix="deo-bench-layers-") as tmp:
        trees = {"before": _tree(a.before, Path(tmp) / "before"), "after": _tree(a.after, Path(tmp) / "after")}
        log(f"before = {a.before} ({trees['before']}), after = {a.after or 'working tree'} ({trees['after']})")
        kafka, redis = LocalKafka(heap="1g"), LocalRedis()
        try:
            kafka.start()
            redis.start()
            topic = kafka.create_topic(f"layers-{uuid.uuid4().hex[:6]}", PARTITIONS)
            kafka.produce(topic, range(10 * PARTITIONS))

            def args(case: str) -> List[str]:
                app = f"layers-{uuid.uuid4().hex[:8]}"
                if case == "commit sqlite":
                    return ["commit", f"sqlite:///{tmp}/{app}.db", app, str(PARTITIONS), str(KEYS), str(a.reps), "5"]
                if case == "commit redis":
                    return ["commit", redis.url, app, str(PARTITIONS), str(KEYS), str(a.reps), "5"]
                if case == "plan":
                    return ["plan", kafka.bootstrap, topic, str(a.reps), "5"]
                return ["import"]

            cases = ("import", "commit sqlite", "commit redis", "plan")
            got: Dict[Tuple[str, str], List[Dict[str, Any]]] = {(c, t): [] for c in cases for t in trees}
            for r in range(a.rounds):
                order = ("before", "after") if r % 2 == 0 else ("after", "before")
                for case in cases:
                    for t in order:
                        got[(case, t)].append(_child(trees[t], args(case)))
                log(f"round {r + 1}/{a.rounds} done")
        finally:
            redis.stop()
            kafka.stop()

    print(f"\n{'case':14s} {'before ms':>10s} {'spread':>15s} {'after ms':>10s} {'spread':>15s} "
          f"{'ratio':>6s} {'per round':>24s} {'CPU s b/a':>12s}")
    flagged = False
    for case in cases:
        meds = {t: [median(run["samples"]) for run in got[(case, t)]] for t in trees}
        cpu = {t: median([run["cpu_s"] for run in got[(case, t)]]) for t in trees}
        ratio = median(meds["after"]) / median(meds["before"])
        per_round = [x / y for x, y in zip(meds["after"], meds["before"], strict=True)]
        flag = "" if 0.5 <= ratio <= 2 else "  FLAGGED: not plausible for a move of code"
        flagged = flagged or bool(flag)
        print(f"{case:14s} {median(meds['before']):10.2f} {min(meds['before']):7.2f}–{max(meds['before']):<7.2f} "
              f"{median(meds['after']):10.2f} {min(meds['after']):7.2f}–{max(meds['after']):<7.2f} {ratio:6.2f} "
              f"{min(per_round):11.2f}–{max(per_round):<12.2f} {cpu['before']:5.2f}/{cpu['after']:<5.2f}{flag}")
    print(f"\n{a.rounds} rounds; commit/plan: {a.reps} timed batches per child after 5 warm-up; medians of per-round "
          f"medians; ratio = after / before (below 1: after is faster)")
    return 1 if flagged else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
