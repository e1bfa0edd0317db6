"""Fault-injection harness: run the demo pipeline as a child process and SIGKILL it repeatedly."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, List, Optional, Sequence, Tuple, Union

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclass
class FaultRun:
    kills: int = 0
    self_crashes: int = 0
    failures: List[str] = field(default_factory=list)
    runs: int = 0
    outputs: List[str] = field(default_factory=list)


def start_pipeline(bootstrap: str, topic: str, store: Union[str, Sequence[str]], app_id: str, pattern: str, *,
                   crash_prob: float = 0.0, rate: int = 2000, seed: Optional[int] = None,
                   extra: Sequence[str] = ()) -> subprocess.Popen:
    """One pipeline driver; several ``store`` URLs run the application(s) on each, in this one driver."""
    stores = [store] if isinstance(store, str) else list(store)
    cmd = [sys.executable, "-m", "dstream_exactly_once.teaching._pipeline", "pipeline", "--bootstrap", bootstrap,
           "--topic", topic, *[arg for url in stores for arg in ("--store", url)],
           "--app-id", app_id, "--pattern", pattern, "--rate", str(rate), "--crash-prob", str(crash_prob)]
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


def run_with_kills(bootstrap: str, topic: str, store: Union[str, Sequence[str]], app_id: str, pattern: str, *,
                   min_kills: int = 10, seed: int = 1, kill_window: tuple = (2.0, 9.0), crash_prob: float = 0.15,
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


def committed(store: str, app: str) -> int:
    """The last batch id the store committed for ``app`` (-1: none)."""
    from dstream_exactly_once.stores import open_store

    with open_store(store, app) as s:
        last = s.last_committed_batch_id()
    return -1 if last is None else last


def kill_after_commits(spawn: Callable[[], subprocess.Popen], apps: Sequence[Tuple[str, str]], kills: int,
                       seed: int, before_run: Optional[Callable[[int], None]] = None) -> int:
    """Start ``spawn()`` until a run prints DONE; the first ``kills`` runs are SIGKILLed once every
    ``(store, app)`` of ``apps`` committed a new batch (polled), after a random short delay that lands
    anywhere in the next batch. ``before_run(run)`` (0-based) is called before each start. Returns
    the number of kills."""
    rng = random.Random(seed)
    done_kills = 0
    for run in range(kills + 5):
        if before_run is not None:
            before_run(run)
        before = [committed(store, app) for store, app in apps]
        proc = spawn()
        if done_kills < kills:
            deadline = time.monotonic() + 180
            while proc.poll() is None and any(committed(store, app) <= b
                                              for (store, app), b in zip(apps, before, strict=True)):
                if time.monotonic() > deadline:
                    kill_group(proc)
                    out = proc.stdout.read() if proc.stdout else ""
                    raise AssertionError(f"run {run}: not every store committed a batch within 180 s:\n{out[-4000:]}")
                time.sleep(0.05)
            time.sleep(rng.uniform(0.0, 0.6))
            if proc.poll() is None:
                kill_group(proc)
                done_kills += 1
                continue
        try:
            out, _ = proc.communicate(timeout=240)
        finally:
            kill_group(proc)
        if "DONE" in out:
            return done_kills
        raise AssertionError(f"query failed without being killed:\n{out[-4000:]}")
    raise AssertionError("the query never finished")


#: Failures after which a Structured Streaming fault driver starts a query again from its checkpoint, as
#: a supervisor would: a loaded machine misses Spark's fixed 10 s for a Python worker to connect back,
#: and queries of Python data sources starting together in one driver can fail their first tasks'
#: deserialization inside Spark's JVM (``java.io.OptionalDataException``).
RESTARTABLE_QUERY_FAILURES = ("Python worker failed to connect back", "java.io.OptionalDataException")


def restartable(failure: Optional[BaseException]) -> bool:
    """Whether a query's ``failure`` is one of :data:`RESTARTABLE_QUERY_FAILURES`."""
    return failure is not None and any(known in str(failure) for known in RESTARTABLE_QUERY_FAILURES)


def wait_settled(query: Any, held: str, within: float) -> None:
    """Wait (at most ``within`` seconds) until the streaming ``query`` finished a trigger, failed, or holds
    (the file ``held`` exists): a fault driver starts its queries one at a time, since several Python
    source runners starting at once on a loaded machine miss Spark's 10 s connect-back."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline and not query.recentProgress and query.exception() is None \
            and not os.path.exists(held):
        time.sleep(0.1)
