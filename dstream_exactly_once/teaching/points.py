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
