"""Fault-injection harness: run the demo pipeline as a child process and SIGKILL it repeatedly."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Callable, List, Optional, Sequence

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclass
class FaultRun:
    kills: int = 0
    self_crashes: int = 0
    failures: List[str] = field(default_factory=list)
    runs: int = 0
    outputs: List[str] = field(default_factory=list)


def start_pipeline(bootstrap: str, topic: str, store: str, app_id: str, pattern: str, *, crash_prob: float = 0.0,
                   rate: int = 2000, seed: Optional[int] = None, extra: Sequence[str] = ()) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "dstream_exactly_once.teaching.pipeline", "pipeline", "--bootstrap", bootstrap,
           "--topic", topic,
           "--store", store, "--app-id", app_id, "--pattern", pattern, "--rate", str(rate),
           "--crash-prob", str(crash_prob)]
    if seed is not None:
        cmd += ["--seed", str(seed)]
    cmd += list(extra)
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT, env=env,
                            start_new_session=True)


def kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(30)


def run_with_kills(bootstrap: str, topic: str, store: str, app_id: str, pattern: str, *, min_kills: int = 10,
                   seed: int = 1, kill_window: tuple = (2.0, 9.0), crash_prob: float = 0.15,
                   between_runs: Optional[Callable[[int], None]] = None, max_runs: int = 60,
                   run_timeout: float = 240.0, extra: Sequence[str] = (), rate: int = 2000) -> FaultRun:
    """Restart the pipeline until it reports DONE; the first ``min_kills`` runs are SIGKILLed
    (by the parent at a random moment, or by the child at a random crash point)."""
    rng = random.Random(seed)
    stats = FaultRun()
    while stats.runs < max_runs:
        stats.runs += 1
        crashing = stats.kills + stats.self_crashes < min_kills
        proc = start_pipeline(bootstrap, topic, store, app_id, pattern,
                              crash_prob=crash_prob if crashing else 0.0, seed=rng.randrange(1 << 30), extra=extra,
                              rate=rate)
        deadline = time.monotonic() + (rng.uniform(*kill_window) if crashing else run_timeout)
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if proc.poll() is None:
            kill_group(proc)
            out = proc.stdout.read() if proc.stdout else ""
            if not crashing:
                raise AssertionError(f"pipeline did not finish within {run_timeout}s:\n{out[-4000:]}")
            stats.kills += 1
        else:
            out = proc.stdout.read() if proc.stdout else ""
            kill_group(proc)
            if "DONE" in out:
                stats.outputs.append(out)
                return stats
            if proc.returncode == -signal.SIGKILL or "CRASH at" in out:
                stats.self_crashes += 1
            else:
                stats.failures.append(out[-3000:])
                if len(stats.failures) >= 3:
                    raise AssertionError("the pipeline failed 3 times without being killed:\n"
                                         + "\n-----\n".join(stats.failures))
        stats.outputs.append(out)
        if between_runs is not None:
            between_runs(stats.runs)
    raise AssertionError(f"pipeline never finished in {max_runs} runs; last output:\n{stats.outputs[-1][-4000:]}")
