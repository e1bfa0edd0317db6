"""Process plumbing shared by the local service helpers: free ports, readiness waits, teardown, and
:class:`LocalService`, the crash/stop/``with`` part every single-process helper has.

Every process started by :class:`ManagedProcess` (with everything it forks) and every temp dir it
makes are registered with this process's reaper (:mod:`._reaper`): if the owner dies without stopping
them — SIGKILL included — they are killed and deleted within seconds."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Optional, Self, Sequence

from ..errors import ServiceError
from . import _reaper


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(
    ready: Callable[[], bool],
    *,
    timeout: float,
    what: str,
    proc: Optional[subprocess.Popen[bytes]] = None,
    log: Optional[Path] = None,
    interval: float = 0.2,
) -> None:
    """Poll ``ready()`` until true; raise :class:`ServiceError` naming ``what`` on timeout/exit."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise ServiceError(f"{what} exited with code {proc.returncode}{_tail(log)}")
        try:
            if ready():
                return
        except Exception:  # noqa: BLE001 - not ready yet, whatever the reason
            pass
        time.sleep(interval)
    if proc is not None and proc.poll() is not None:  # it died while a (slow) probe was running
        raise ServiceError(f"{what} exited with code {proc.returncode}{_tail(log)}")
    raise ServiceError(f"{what} was not ready after {timeout:.0f}s{_tail(log)}")


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def _tail(log: Optional[Path], lines: int = 30) -> str:
    if log is None or not log.exists():
        return ""
    text = log.read_text(errors="replace").splitlines()[-lines:]
    return "\n--- last lines of " + str(log) + " ---\n" + "\n".join(text)


def _parents() -> dict[int, int]:
    """PID -> parent PID of every process this user can see (from ``/proc``)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the last ")".
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) > 1:
            parents[int(entry)] = int(fields[1])
    return parents


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` in the process tree (children, their children, ...)."""
    children: dict[int, list[int]] = {}
    for child, parent in _parents().items():
        children.setdefault(parent, []).append(child)
    found: list[int] = []
    todo = list(children.get(pid, []))
    while todo:
        p = todo.pop()
        found.append(p)
        todo.extend(children.get(p, []))
    return found


def _alive(pid: int) -> bool:
    """``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2:][:1] != b"Z"


class ManagedProcess:
    """A child process in its own session with a temp work dir; stop() is idempotent."""

    def __init__(self, name: str, workdir: Optional[Path] = None) -> None:
        self.name = name
        self._own_dir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix=f"deo-{name}-"))
        if self._own_dir:
            _reaper.reap_dir(str(self.workdir))
        self.proc: Optional[subprocess.Popen[bytes]] = None
        self.log_path = self.workdir / f"{name}.log"

    def spawn(self, argv: Sequence[str], env: Optional[dict[str, str]] = None,
              preexec: Optional[Callable[[], None]] = None) -> subprocess.Popen[bytes]:
        if self.proc is not None:
            self._release_group()  # a restart: the old group is dead (kill) or stopped
        log = open(self.log_path, "ab")
        try:
            self.proc = subprocess.Popen(
                list(argv), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                cwd=self.workdir, env={**os.environ, **(env or {})}, start_new_session=True,
                preexec_fn=preexec,
            )
        except OSError as exc:
            raise ServiceError(f"cannot start {self.name}: {argv[0]!r}: {exc}") from exc
        finally:
            log.close()
        _reaper.reap_group(self.proc.pid)  # its own session: the group id is its PID
        return self.proc

    def _release_group(self) -> None:
        """The group is gone: the reaper forgets it (after :meth:`_kill_orphans`)."""
        assert self.proc is not None
        if self.proc.poll() is not None:
            self._kill_orphans()
            _reaper.forget_group(self.proc.pid)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self, sig: int = signal.SIGKILL) -> list[int]:
        """Send ``sig`` to the whole process group (the service and anything it forked).

        SIGKILL also reaches the leader's descendants that left its group (PostgreSQL backends
        start sessions of their own): the leader is stopped first so that it forks no more, then
        its descendants and its group are killed. Returns the descendants killed that way, which
        are not this process's children: :meth:`await_gone` waits for them."""
        if self.proc is None or self.proc.poll() is not None:
            return []
        strays: list[int] = []
        try:
            if sig == signal.SIGKILL:
                os.kill(self.proc.pid, signal.SIGSTOP)
                strays = _descendants(self.proc.pid)
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass
        for pid in strays:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return strays

    @staticmethod
    def await_gone(pids: Sequence[int], timeout: float = 10.0) -> None:
        """Wait until none of ``pids`` runs any more (zombies count as gone)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and any(_alive(pid) for pid in pids):
            time.sleep(0.02)

    def stop(self, timeout: float = 15.0, cleanup: bool = True) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.kill(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill(signal.SIGKILL)
                self.proc.wait(10)
        if self.proc is not None:
            self._release_group()
        if cleanup and self._own_dir:
            shutil.rmtree(self.workdir, ignore_errors=True)
            _reaper.forget_dir(str(self.workdir))

    def _kill_orphans(self) -> None:
        """SIGKILL what is left of the (reaped) leader's process group.

        Children can outlive the leader (executor JVMs of a Spark worker, their Python daemons)
        and :meth:`kill` skips a dead leader. The group id cannot be reused
        as a PID while members exist, so when no process has the leader's PID any more, the
        group's members are ours; if the PID exists it was reused and nothing is sent.
        """
        if self.proc is None or self.proc.poll() is None or os.path.exists(f"/proc/{self.proc.pid}"):
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def log_tail(self, lines: int = 30) -> str:
        return _tail(self.log_path, lines)


class LocalService:
    """A local server run as one :class:`ManagedProcess` (``_proc``): :meth:`kill` crashes it and keeps
    its data dir, so :meth:`start` restarts it with crash recovery; :meth:`stop` stops it and deletes
    the data; ``with`` starts and stops it."""

    _proc: ManagedProcess

    def start(self, timeout: float = 60.0) -> Any:
        raise NotImplementedError

    def _await_ready(self, ready: Callable[[], bool], timeout: float, what: str, log: Optional[Path] = None) -> None:
        """Wait until ``ready()`` (:func:`wait_until`); a server that does not get ready is stopped,
        its data dir kept, before the :class:`ServiceError` is raised: none is left half-started."""
        try:
            wait_until(ready, timeout=timeout, what=what, proc=self._proc.proc, log=log or self._proc.log_path)
        except ServiceError:
            self._proc.stop(cleanup=False)
            raise

    def _release(self) -> None:
        """Close this helper's own clients before the server goes away (default: none)."""

    def kill(self) -> None:
        """SIGKILL the server, keeping its data dir: :meth:`start` restarts it (crash recovery)."""
        self._release()
        strays = self._proc.kill()
        if self._proc.proc is not None:
            self._proc.proc.wait(10)
        self._proc.await_gone(strays)

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL) and delete its data dir."""
        self._release()
        self._proc.stop(cleanup=True)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
