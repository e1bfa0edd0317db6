"""LocalRedis: a throwaway ``redis-server`` (Debian package) on a free loopback port."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Optional

from ..errors import ServiceError
from ._process import LocalService, ManagedProcess, free_port


class LocalRedis(LocalService):
    """``redis-server`` in a temp dir. ``appendonly`` turns AOF on (fsync always) for durability
    tests; ``password`` sets ``requirepass``. :meth:`kill` + :meth:`start` restarts on the same
    port and data dir, so AOF recovery can be tested."""

    def __init__(self, *, appendonly: bool = False, password: Optional[str] = None,
                 workdir: Optional[Path] = None) -> None:
        self.appendonly = appendonly
        self._password = password
        self._proc = ManagedProcess("redis", workdir)
        self.port = 0

    def __repr__(self) -> str:  # never shows the password
        return f"LocalRedis(port={self.port}, appendonly={self.appendonly}, auth={self._password is not None})"

    @property
    def url(self) -> str:
        """``redis://`` URL of this server, including the password when one is set."""
        auth = f":{self._password}@" if self._password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 20.0) -> LocalRedis:
        exe = shutil.which("redis-server")
        if exe is None:
            raise ServiceError("redis-server not found; install the Debian package 'redis-server'")
        if not self.port:
            self.port = free_port()
        conf = self._proc.workdir / "redis.conf"
        lines = [
            f"port {self.port}", "bind 127.0.0.1", f"dir {self._proc.workdir}", "daemonize no",
            "save \"\"", "protected-mode yes", "logfile \"\"",
            f"appendonly {'yes' if self.appendonly else 'no'}", "appendfsync always",
        ]
        if self._password:
            lines.append(f"requirepass {_conf_quote(self._password)}")
        conf.write_text("\n".join(lines) + "\n")
        conf.chmod(0o600)
        self._proc.spawn([exe, str(conf)])
        self._await_ready(self._ping, timeout, f"redis-server on port {self.port}")
        return self

    def _ping(self) -> bool:
        # Our server, not another one that took the port free_port() picked: compare PIDs.
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        client = self.client(socket_timeout=1, socket_connect_timeout=1, retry=Retry(NoBackoff(), 0))
        try:
            proc = self._proc.proc
            return proc is not None and int(client.info("server")["process_id"]) == proc.pid
        finally:
            client.close()

    def client(self, **kw: Any) -> Any:
        import redis

        return redis.Redis(host="127.0.0.1", port=self.port, password=self._password, **kw)



def _conf_quote(value: str) -> str:
    """``value`` as one double-quoted redis.conf argument: anything but ``[A-Za-z0-9_.-]`` is
    written as ``\\xHH`` so spaces, quotes, backslashes, ``#`` or newlines cannot break the file."""
    safe = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-"
    return '"' + "".join(chr(b) if b in safe else f"\\x{b:02x}" for b in value.encode("utf-8")) + '"'
