"""The driver's heartbeat in the store, and how operators judge it (``dstream-eo``).

A running exactly-once driver writes ``{"epoch", "host", "pid", "pid_ns", "started", "last_batch",
"time", "interval_s"}`` with :meth:`~dstream_exactly_once.stores.TransactionalStore.heartbeat` once per
batch interval (also when a batch is empty), in its own small epoch-checked transaction. A driver
counts as *live* when its heartbeat is younger than :func:`live_window` (three batch intervals, at
least 60 s) and carries the store's current epoch — unless it is known *dead*: its host is this host,
its PID namespace (``pid_ns``, where recorded) is this process's, and no process with its PID and
start time (``started``, clock ticks since boot) runs here. A fenced driver's heartbeat is refused by
the store; a failing heartbeat is logged, never fails the stream (it changes no data).
"""

from __future__ import annotations

import logging
import os
import socket
import time as _time
from typing import TYPE_CHECKING, Any, Callable, Dict, Mapping, Optional

from .._checks import is_number
from ..errors import DStreamExactlyOnceError

if TYPE_CHECKING:
    from ..stores._interfaces import HeartbeatStore

log = logging.getLogger(__name__)

__all__ = ["Heartbeat", "driver_status", "heartbeat_age", "is_live", "known_dead", "live_window"]

MIN_LIVE_WINDOW_S = 60.0


def live_window(doc: Mapping[str, Any]) -> float:
    """Seconds a heartbeat stays fresh: three of its batch intervals, at least 60 s."""
    interval = doc.get("interval_s")
    interval = float(interval) if is_number(interval) else 0.0
    return max(3 * interval, MIN_LIVE_WINDOW_S)


def heartbeat_age(doc: Mapping[str, Any], now: Optional[float] = None) -> Optional[float]:
    """Seconds since the heartbeat was written (``None`` if it has no time)."""
    t = doc.get("time")
    if not is_number(t):
        return None
    return (now if now is not None else _time.time()) - float(t)


def is_live(doc: Optional[Mapping[str, Any]], current_epoch: int, now: Optional[float] = None) -> bool:
    """Whether ``doc`` is the heartbeat of a driver that is probably still running."""
    if not doc or doc.get("epoch") != current_epoch or doc.get("stopped"):
        return False
    age = heartbeat_age(doc, now)
    return age is not None and age < live_window(doc)


def _pid_namespace() -> Optional[str]:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def _start_ticks(pid: int) -> Optional[int]:
    """When process ``pid`` started (clock ticks since boot), ``None`` if there is none (Linux ``/proc``)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode("ascii", "replace")
        return int(stat[stat.rindex(")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def known_dead(doc: Optional[Mapping[str, Any]]) -> bool:
    """Whether the driver that wrote ``doc`` is known to have exited: it ran on this host (same host
    name, and the same PID namespace where the heartbeat records one) and no process with its PID —
    and, where recorded, its start time — is running. Unknown (another host, a heartbeat without a
    PID, no ``/proc``): ``False``."""
    if not doc or doc.get("host") != socket.gethostname() or not os.path.isdir("/proc/self"):
        return False
    pid = doc.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    recorded_ns = doc.get("pid_ns")
    if recorded_ns is not None and recorded_ns != _pid_namespace():
        return False  # another container on this host name: its PIDs are not ours to look up
    started = _start_ticks(pid)
    if started is None:
        return True
    recorded = doc.get("started")
    return isinstance(recorded, int) and not isinstance(recorded, bool) and recorded != started


def driver_status(store: HeartbeatStore, now: Optional[float] = None) -> Dict[str, Any]:
    """``{"heartbeat": doc or None, "epoch": current epoch, "live": bool, "dead": bool, "age_s": seconds}``
    of the app of ``store`` (read-only; what operator actions check before they take an epoch).
    ``dead``: :func:`known_dead` — a fresh heartbeat of a driver whose process is gone is not live."""
    now = _time.time() if now is None else now
    doc = store.load_heartbeat()
    epoch = store.current_epoch()
    age = heartbeat_age(doc, now) if doc else None
    dead = doc is not None and bool(doc) and not doc.get("stopped") and known_dead(doc)
    return {"heartbeat": doc, "epoch": epoch, "live": is_live(doc, epoch, now) and not dead, "dead": dead,
            "age_s": age}


class Heartbeat:
    """Writes the heartbeat of the driver holding ``epoch``, at most once per ``min_gap_s``."""

    def __init__(self, store: HeartbeatStore, epoch: int, interval_s: float, *, min_gap_s: Optional[float] = None,
                 clock: Callable[[], float] = _time.time) -> None:
        self.store = store
        self.epoch = epoch
        self.interval_s = float(interval_s)
        self.min_gap_s = self.interval_s * 0.5 if min_gap_s is None else min_gap_s
        self._clock = clock
        self._last = 0.0
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self.pid_ns = _pid_namespace()
        self.started = _start_ticks(self.pid)
        self.failures = 0

    def doc(self, last_batch: Optional[int], **extra: Any) -> Dict[str, Any]:
        return {"epoch": self.epoch, "host": self.host, "pid": self.pid, "pid_ns": self.pid_ns,
                "started": self.started, "last_batch": last_batch, "time": round(self._clock(), 3),
                "interval_s": self.interval_s, **extra}

    def beat(self, last_batch: Optional[int], *, force: bool = False, **extra: Any) -> bool:
        """Write the heartbeat if one is due; returns whether it was written. Never raises for a store
        error (logged); a fenced epoch is left for the next commit or plan to report."""
        now = self._clock()
        if not force and now - self._last < self.min_gap_s:
            return False
        try:
            self.store.heartbeat(self.epoch, self.doc(last_batch, **extra))
        except DStreamExactlyOnceError as exc:
            self.failures += 1
            log.warning("could not write the driver heartbeat of app %r: %s", getattr(self.store, "app_id", "?"), exc)
            return False
        self._last = now
        return True
