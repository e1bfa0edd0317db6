"""LocalPostgres: a throwaway PostgreSQL cluster (Debian packages) on a free loopback port.

PostgreSQL refuses to run as root, so when this process is root the cluster is created and run as
the ``postgres`` system user (created by the Debian package) in a temp dir that user owns.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any, Callable, Optional

from ..errors import ServiceError
from ._process import LocalService, ManagedProcess, free_port, port_open


def _pg_bin(name: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)
    if candidates:
        return candidates[0]
    raise ServiceError(f"PostgreSQL's {name!r} not found; install the Debian package 'postgresql'")


class LocalPostgres(LocalService):
    """A PostgreSQL server with trust auth for local connections plus a password for ``user``."""

    def __init__(self, *, user: str = "deo", password: str = "deo-test-pw", workdir: Optional[Path] = None) -> None:
        self.user = user
        self._password = password
        self._proc = ManagedProcess("postgres", workdir)
        self.port = 0
        self._demote: Optional[Callable[[], None]] = None

    def __repr__(self) -> str:
        return f"LocalPostgres(port={self.port}, user={self.user!r})"

    def url(self, dbname: str = "postgres", password: Optional[str] = None) -> str:
        pw = self._password if password is None else password
        return f"postgresql://{self.user}:{pw}@127.0.0.1:{self.port}/{dbname}"

    def _run_as(self) -> Optional[Callable[[], None]]:
        if os.geteuid() != 0:
            return None
        try:
            pg = pwd.getpwnam("postgres")
        except KeyError as exc:
            raise ServiceError(
                "running as root needs the 'postgres' system user (Debian package 'postgresql')") from exc
        uid, gid = pg.pw_uid, pg.pw_gid
        os.chown(self._proc.workdir, uid, gid)

        def demote() -> None:
            os.setgid(gid)
            os.setuid(uid)

        return demote

    def start(self, timeout: float = 60.0) -> LocalPostgres:
        data = self._proc.workdir / "data"
        demote = self._run_as()
        if not self.port:
            self.port = free_port()
            pwfile = self._proc.workdir / "pw"
            pwfile.write_text(self._password + "\n")
            if demote is not None:
                os.chown(pwfile, pwd.getpwnam("postgres").pw_uid, -1)
            pwfile.chmod(0o600)
            init = subprocess.run(
                [_pg_bin("initdb"), "-D", str(data), "-U", self.user, f"--pwfile={pwfile}",
                 "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--no-sync"],
                capture_output=True, text=True, preexec_fn=demote, cwd=self._proc.workdir,
            )
            pwfile.unlink()
            if init.returncode != 0:
                raise ServiceError(f"initdb failed: {init.stdout[-2000:]}{init.stderr[-2000:]}")
        self._proc.spawn(
            [_pg_bin("postgres"), "-D", str(data), "-p", str(self.port), "-c", "listen_addresses=127.0.0.1",
             "-c", f"unix_socket_directories={self._proc.workdir}", "-c", "fsync=on",
             "-c", "max_connections=100", "-c", "shared_buffers=64MB"],
            preexec=demote,
        )
        self._await_ready(self._ready, timeout, f"PostgreSQL on port {self.port}")
        return self

    def _ready(self) -> bool:
        if not port_open(self.port):
            return False
        with self.connect() as conn:
            # Our cluster, not another server that took the port free_port() picked.
            row = conn.execute("show data_directory").fetchone()
        return row is not None and os.path.realpath(row[0]) == os.path.realpath(self._proc.workdir / "data")

    def connect(self, dbname: str = "postgres", **kw: Any) -> Any:
        import psycopg

        return psycopg.connect(self.url(dbname), connect_timeout=3, autocommit=True, **kw)

    def create_database(self, name: Optional[str] = None) -> str:
        """A fresh database (uuid-named by default); returns its name."""
        name = name or "t_" + uuid.uuid4().hex[:16]
        with self.connect() as conn:
            conn.execute(f'create database "{name}"')
        return name

