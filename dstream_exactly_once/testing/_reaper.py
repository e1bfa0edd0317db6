"""The reaper: no local service outlives the process that started it, however that process ends.

Each process that starts a service (a test session, a user's script) gets one small watcher process,
the *reaper* (in the spirit of testcontainers' Ryuk), started on first use. The owner holds the write
end of a pipe to the reaper's stdin and tells it, one line each, which process groups (a service and
everything it forked: Kafka's JVM, a Spark worker's executors) and which data directories are the
owner's. The kernel closes the pipe when the owner exits — normally, by an exception, by SIGTERM or
SIGKILL alike — and the reaper then SIGKILLs every group still registered and every process descended
from them (PostgreSQL's backends lead groups of their own), waits until they are gone, deletes the
registered directories and exits. A service stopped by its owner is unregistered first, so nothing of
it is touched twice.

The reaper runs in its own session, so a signal sent to the owner's process group (Ctrl-C, a CI
timeout killing the job's group) does not take it down with the owner; it runs this file as a script
with ``python -I -S`` (standard library only), so it works wherever the owner's interpreter does.
A group is killed only if it is still the one registered: when a process with the group's id exists,
its start time must be the registered one (a reused id is left alone; no group can share the id of a
living process that is not its leader).

Processes forked from the owner without ``exec`` (``os.fork``, ``multiprocessing`` with ``fork``)
hold the pipe too: the services then live until the last of them exits.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from typing import IO, Dict, Iterable, List, Optional, Set, Tuple

__all__ = ["forget_dir", "forget_group", "reap_dir", "reap_group", "reaper_pid"]

#: seconds the reaper waits for killed groups to be gone before it deletes the directories anyway
GONE_TIMEOUT_S = 10.0


def start_time(pid: int) -> Optional[str]:
    """The start time of process ``pid`` (clock ticks since boot, ``/proc/<pid>/stat`` field 22), or
    ``None`` when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode("ascii", "replace")
    except OSError:
        return None
    return stat[stat.rindex(")") + 2:].split()[19]


# ---------------------------------------------------------------------------------------- owner side
class _Owner:
    """This process's reaper and what it was told (resent to a new reaper if the old one died)."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.pid = -1  # the owner the reaper was started for (a forked child starts its own)
        self.proc: Optional[subprocess.Popen[bytes]] = None
        self.groups: Dict[int, str] = {}
        self.dirs: Set[str] = set()

    def forked(self) -> None:
        """In a child forked from the owner: the parent's services and reaper are the parent's."""
        self.lock = threading.RLock()
        self.proc, self.pid = None, -1
        self.groups, self.dirs = {}, set()

    def _start(self) -> subprocess.Popen[bytes]:
        from ..errors import ServiceError

        try:
            proc = subprocess.Popen([sys.executable, "-I", "-S", os.path.abspath(__file__)], stdin=subprocess.PIPE,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                                    close_fds=True, cwd="/")
        except OSError as exc:
            raise ServiceError(f"cannot start the reaper that stops local services when their owner dies: {exc}") \
                from exc
        self.proc, self.pid = proc, os.getpid()
        return proc

    def send(self, line: str) -> None:
        """Send ``line`` to this process's reaper, starting it (again) if needed."""
        with self.lock:
            fresh = self.proc is None or self.pid != os.getpid() or self.proc.poll() is not None
            if fresh:
                self._start()
            try:
                stdin = self._stdin()
                if fresh:  # a reaper started again after the last one died: everything registered so far
                    stdin.writelines([f"G {g} {t}\n".encode() for g, t in self.groups.items()]
                                     + [f"D {d}\n".encode() for d in self.dirs])
                stdin.write(line.encode() + b"\n")
                stdin.flush()
            except (BrokenPipeError, ValueError):  # the reaper died meanwhile: the next line starts a new one
                self.proc = None

    def _stdin(self) -> IO[bytes]:
        assert self.proc is not None and self.proc.stdin is not None
        return self.proc.stdin


_OWNER = _Owner()
os.register_at_fork(after_in_child=_OWNER.forked)


def reap_group(pgid: int) -> None:
    """Kill process group ``pgid`` (led by process ``pgid``, just started) if this process dies first."""
    started = start_time(pgid)
    if started is None:
        return  # already gone
    with _OWNER.lock:
        _OWNER.groups[pgid] = started
        _OWNER.send(f"G {pgid} {started}")


def forget_group(pgid: int) -> None:
    """Group ``pgid`` is stopped (or left to the caller): the reaper leaves it alone."""
    with _OWNER.lock:
        if _OWNER.groups.pop(pgid, None) is not None:
            _OWNER.send(f"U {pgid}")


def reap_dir(path: str) -> None:
    """Delete directory ``path`` (a service's data) if this process dies before :func:`forget_dir`."""
    path = os.path.abspath(path)
    with _OWNER.lock:
        if "\n" in path or path in _OWNER.dirs:
            return
        _OWNER.dirs.add(path)
        _OWNER.send(f"D {path}")


def forget_dir(path: str) -> None:
    """Directory ``path`` is deleted (or kept on purpose): the reaper leaves it alone."""
    path = os.path.abspath(path)
    with _OWNER.lock:
        if path in _OWNER.dirs:
            _OWNER.dirs.discard(path)
            _OWNER.send(f"K {path}")


def reaper_pid() -> Optional[int]:
    """The PID of this process's reaper, if one is running."""
    proc = _OWNER.proc
    return proc.pid if proc is not None and _OWNER.pid == os.getpid() and proc.poll() is None else None


# --------------------------------------------------------------------------------------- reaper side
def _processes() -> Dict[int, Tuple[int, int]]:
    """``{pid: (parent pid, process group)}`` of every process (zombies included)."""
    out: Dict[int, Tuple[int, int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read().decode("ascii", "replace")
            fields = stat[stat.rindex(")") + 2:].split()
            out[int(name)] = (int(fields[1]), int(fields[2]))
        except (OSError, ValueError, IndexError):
            continue
    return out


def family(groups: Iterable[int]) -> Set[int]:
    """The processes of ``groups`` and all their descendants (PostgreSQL's backends lead groups of their
    own, so a group is not enough)."""
    procs = _processes()
    wanted = set(groups)
    found = {pid for pid, (_, pgid) in procs.items() if pgid in wanted}
    children: Dict[int, List[int]] = {}
    for pid, (ppid, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    todo = list(found)
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _signal_all(groups: Iterable[int], pids: Iterable[int], sig: int) -> None:
    for pgid in groups:
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _reap(groups: Dict[int, str], dirs: Set[str]) -> None:
    """Kill the registered groups that are still the registered ones, with every descendant, wait for
    them, delete the dirs. The family is stopped first, so none of it forks while it is listed."""
    ours = [g for g, started in groups.items() if start_time(g) in (None, started)]  # else: the id was reused
    stopped: Set[int] = set()
    for _ in range(3):  # stop what is found, then look again: a fork may have raced the first look
        members = family(ours) - stopped
        if not members:
            break
        _signal_all(ours, members, signal.SIGSTOP)
        stopped |= members
    _signal_all(ours, stopped, signal.SIGKILL)
    deadline = time.monotonic() + GONE_TIMEOUT_S
    while time.monotonic() < deadline and any(start_time(p) is not None and not _zombie(p) for p in stopped):
        time.sleep(0.05)
    for path in dirs:
        shutil.rmtree(path, ignore_errors=True)


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode("ascii", "replace")
    except OSError:
        return True
    return stat[stat.rindex(")") + 2:].split()[0] in ("Z", "X")


def main() -> None:
    """The reaper: read registrations from stdin until it closes, then reap."""
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)  # only the owner's death ends it
    groups: Dict[int, str] = {}
    dirs: Set[str] = set()
    stdin = sys.stdin.buffer
    while True:
        line = stdin.readline()
        if not line:
            break
        verb, _, arg = line.decode("utf-8", "replace").rstrip("\n").partition(" ")
        if verb == "G":
            pgid, _, started = arg.partition(" ")
            groups[int(pgid)] = started
        elif verb == "U":
            groups.pop(int(arg), None)
        elif verb == "D":
            dirs.add(arg)
        elif verb == "K":
            dirs.discard(arg)
    _reap(groups, dirs)


if __name__ == "__main__":
    main()
