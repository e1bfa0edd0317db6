"""Crash points, the demo's kill schedule and its trace file (no Spark, no Kafka).

In one batch of the demo driver the output operations run in this order (one Spark Streaming job
after the other, ``spark.streaming.concurrentJobs`` = 1):

1. at-least-once: add the batch's sum to the running total (a plain write);
2. exactly-once: plan the batch, write it to the offset log, compute the output, commit results +
   offsets in one transaction;
3. at-least-once: store the batch's offsets (a second, separate write).

Every crash point of the exactly-once pipeline therefore lies *between* the at-least-once
pipeline's output and its offset write: each kill makes the at-least-once side read its last batch
again and add it a second time, deterministically, while the exactly-once side stays exact.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, Dict, List, Mapping

from .._checks import is_int
from ..errors import ConfigurationError

#: The exactly-once pipeline's crash points, in the order of one batch (docs/walkthrough.md).
CRASH_POINTS = ("before-planning", "after-offset-log", "mid-output", "after-output-before-commit", "after-commit")

#: What the exactly-once pipeline has done for the killed batch at each point.
EXPLAINED: Mapping[str, str] = {
    "before-planning": "batch not planned yet: the restarted driver plans it from the committed offsets",
    "after-offset-log": "batch in the offset log, no output yet: the restarted driver replays it (same ranges)",
    "mid-output": "an executor task died mid-output, nothing committed: the batch is replayed",
    "after-output-before-commit": "output computed but not committed: discarded, the batch is replayed",
    "after-commit": "results and offsets committed together: the restarted driver starts after them",
}

#: The kill happens in this batch of each killed driver run (counted from 1 per run).
KILL_TICK = 2


def kill_schedule(crashes: int, seed: int = 0) -> List[str]:
    """The crash point of each killed driver run: ``crashes`` points cycling through
    :data:`CRASH_POINTS` (in their order for ``seed == 0``, shuffled by ``seed`` otherwise)."""
    if not is_int(crashes) or crashes < 0:
        raise ConfigurationError(f"crashes must be an int >= 0, got {crashes!r}")
    order = list(CRASH_POINTS)
    if seed:
        random.Random(seed).shuffle(order)
    return [order[i % len(order)] for i in range(crashes)]


def batches_with_data(n: int, partitions: int, rate: int, batch_seconds: int = 1) -> int:
    """How many batches read 1..``n`` spread round-robin over ``partitions`` partitions at ``rate``
    records per partition per second and ``batch_seconds`` a batch (the fullest partition decides)."""
    per_partition = -(-n // partitions)
    per_batch = rate * batch_seconds
    return -(-per_partition // per_batch)


def kills_that_fit(n: int, partitions: int, rate: int, batch_seconds: int = 1) -> int:
    """How many driver runs can be killed in a demo over 1..``n``: each killed run dies in its batch
    :data:`KILL_TICK` having stored the offsets of the batches before it only, so kill ``k`` needs
    ``(k - 1) * (KILL_TICK - 1) + KILL_TICK`` batches with data."""
    batches = batches_with_data(n, partitions, rate, batch_seconds)
    if batches < KILL_TICK:
        return 0
    return 1 + (batches - KILL_TICK) // (KILL_TICK - 1)


def batches_needed(crashes: int) -> int:
    """Batches with data a demo with ``crashes`` kills needs (see :func:`kills_that_fit`)."""
    return 0 if crashes <= 0 else (crashes - 1) * (KILL_TICK - 1) + KILL_TICK


def check_kills_fit(crashes: int, n: int, partitions: int, rate: int, batch_seconds: int = 1) -> None:
    """Refuse (:class:`ConfigurationError`) a demo whose ``crashes`` kills cannot all happen: the data
    would be read before the last killed run reaches its batch :data:`KILL_TICK`. The message says how
    many kills fit and which ``--n`` or ``--rate`` makes room for all of them."""
    fit = kills_that_fit(n, partitions, rate, batch_seconds)
    if crashes <= fit:
        return
    need = batches_needed(crashes)
    have = batches_with_data(n, partitions, rate, batch_seconds)
    min_n = partitions * (need - 1) * rate * batch_seconds + 1
    max_rate = (-(-n // partitions) - 1) // ((need - 1) * batch_seconds)
    ways = [f"--n {min_n} or more"] + ([f"--rate {max_rate} or less"] if max_rate >= 1 else [])
    raise ConfigurationError(
        f"--crashes {crashes} cannot fit: --n {n} at --rate {rate} is read in {have} batch(es) of {batch_seconds} s "
        f"over {partitions} partitions, and each killed driver run dies in its batch {KILL_TICK}, so {crashes} "
        f"kill(s) need {need} batches; {fit} kill(s) fit. Use {' or '.join(ways)}, or --crashes {fit}")


def check_point(point: str) -> str:
    """``point`` if it is a crash point or ``"none"``; otherwise a :class:`ConfigurationError`."""
    if point != "none" and point not in CRASH_POINTS:
        raise ConfigurationError(f"kill point must be one of {', '.join(CRASH_POINTS)} or 'none', got {point!r}")
    return point


class Trace:
    """The demo's trace: one JSON object per line, appended by the driver after each batch
    (``event: "batch"``) and right before each SIGKILL (``event: "kill"``) with both running totals.

    Each line is written with one ``write`` call and flushed, so a SIGKILL right after it loses nothing.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def append(self, entry: Dict[str, Any]) -> None:
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(entry, sort_keys=True) + "\n")

    def read(self) -> List[Dict[str, Any]]:
        if not self.path.exists():
            return []
        out = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                out.append(json.loads(line))
        return out
