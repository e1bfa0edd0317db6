"""CPU time of the benchmark's own processes and of the whole machine, beside wall time.

A :class:`CpuMeter` snapshot sums user + system time of every process in this benchmark's
process tree (this Python process, the Kafka broker, Spark's JVMs, the PySpark daemon and its
Python workers, the B1(c) JVM subprocess, Redis; children that exited count through their
parent's ``cutime``/``cstime``), plus any extra root pids (the broker's, in case it was
re-parented). From ``/proc`` (Linux) — ``psutil`` is not needed. The machine-wide busy time from
``/proc/stat`` over the same interval shows how much CPU *other* processes (other users of a
shared machine) took meanwhile: a busy machine is reported, not hidden.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Set, Tuple

_TICK = float(os.sysconf("SC_CLK_TCK")) if hasattr(os, "sysconf") else 100.0
TICKS_PER_SECOND = _TICK  #: /proc counts CPU time in these ticks (the resolution of every CPU figure)


def _stat(pid: int) -> Optional[Tuple[int, float, float]]:
    """``(ppid, own cpu seconds, reaped children's cpu seconds)`` of ``pid``, or None if gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read().decode("ascii", "replace")
    except OSError:
        return None
    rest = raw[raw.rfind(")") + 2:].split()
    # fields after comm: state(3) ppid(4) ... utime(14) stime(15) cutime(16) cstime(17)
    ppid = int(rest[1])
    utime, stime, cutime, cstime = (int(x) for x in rest[11:15])
    return ppid, (utime + stime) / _TICK, (cutime + cstime) / _TICK


def _all_processes() -> Dict[int, Tuple[int, float, float]]:
    out = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = _stat(int(name))
            if st is not None:
                out[int(name)] = st
    return out


def _tree(procs: Dict[int, Tuple[int, float, float]], roots: Iterable[int]) -> Set[int]:
    children: Dict[int, List[int]] = {}
    for pid, (ppid, _, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    seen: Set[int] = set()
    todo = [r for r in roots if r in procs]
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        todo.extend(children.get(pid, ()))
    return seen


def _machine_busy() -> float:
    """Seconds of busy CPU time summed over all CPUs since boot (``/proc/stat`` minus idle + iowait)."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except OSError:
        return float("nan")
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    guest = sum(fields[8:10]) if len(fields) > 9 else 0  # guest time is already counted in user/nice
    return (sum(fields) - idle - guest) / _TICK


@dataclass
class CpuSample:
    """CPU seconds used during one measured interval."""

    wall: float
    ours: float        # every process of the benchmark's tree (+ extra roots)
    broker: float      # of which the Kafka broker
    machine: float     # all processes of the machine
    driver: float = 0.0  # of which this Python process alone (own + reaped children): B6 charges A/B with it

    @property
    def others(self) -> float:
        """CPU seconds taken by processes that are not the benchmark's (other users)."""
        return max(0.0, self.machine - self.ours)

    @property
    def cores_used(self) -> float:
        return self.ours / self.wall if self.wall > 0 else float("nan")

    @property
    def others_cores(self) -> float:
        return self.others / self.wall if self.wall > 0 else float("nan")

    def as_dict(self) -> Dict[str, float]:
        return {"wall": self.wall, "cpu": self.ours, "broker_cpu": self.broker, "machine_cpu": self.machine,
                "others_cpu": self.others, "driver_cpu": self.driver}


class CpuMeter:
    """``start()`` … ``stop()`` → :class:`CpuSample`; the tree is re-walked at each snapshot."""

    def __init__(self, broker_pid: Optional[int] = None) -> None:
        self.broker_pid = broker_pid
        self._t0 = 0.0
        self._snap: Tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)

    def _snapshot(self) -> Tuple[float, float, float, float]:
        procs = _all_processes()
        me = os.getpid()
        roots = [me] + ([self.broker_pid] if self.broker_pid else [])
        ours = sum(procs[p][1] + procs[p][2] for p in _tree(procs, roots))
        broker = sum(procs[p][1] + procs[p][2] for p in _tree(procs, [self.broker_pid])) if self.broker_pid else 0.0
        driver = procs[me][1] + procs[me][2] if me in procs else 0.0
        return ours, broker, _machine_busy(), driver

    def start(self) -> CpuMeter:
        self._snap = self._snapshot()
        self._t0 = time.perf_counter()
        return self

    def stop(self) -> CpuSample:
        wall = time.perf_counter() - self._t0
        ours, broker, machine, driver = self._snapshot()
        o0, b0, m0, d0 = self._snap
        return CpuSample(wall, ours - o0, broker - b0, machine - m0, driver - d0)
