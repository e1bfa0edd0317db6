"""LocalRedisCluster: a throwaway Redis Cluster (Debian ``redis-server``), three masters with a
replica each, on free loopback ports."""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

from ..errors import ServiceError
from . import _reaper
from ._process import ManagedProcess, free_port, wait_until


class LocalRedisCluster:
    """``masters`` masters with ``replicas`` replicas each, each node a ``redis-server
    --cluster-enabled yes`` in its own temp dir, joined by ``redis-cli --cluster create``.

    :meth:`start` returns once every node reports ``cluster_state:ok`` and agrees on the slot map;
    :meth:`stop` shuts every node down and removes the dirs. ``node_timeout`` (ms) is how long a
    master may be unreachable before its replica takes over; :meth:`kill` SIGKILLs one node (its
    dir kept, so :meth:`restart` brings it back, as a replica of whoever took over),
    :meth:`failover` runs ``CLUSTER FAILOVER`` on a replica.
    """

    def __init__(self, *, masters: int = 3, replicas: int = 1, node_timeout: int = 3000,
                 appendonly: bool = False) -> None:
        self.masters = masters
        self.replicas = replicas
        self.node_timeout = node_timeout
        self.appendonly = appendonly
        self._root = Path(tempfile.mkdtemp(prefix="deo-redis-cluster-"))
        _reaper.reap_dir(str(self._root))  # deleted if this process dies without stop()
        self._nodes: Dict[int, ManagedProcess] = {}

    def __repr__(self) -> str:
        return f"LocalRedisCluster(ports={self.ports}, masters={self.masters}, replicas={self.replicas})"

    @property
    def ports(self) -> List[int]:
        return sorted(self._nodes)

    @property
    def url(self) -> str:
        """``redis+cluster://`` URL listing every node as a startup node."""
        return "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in self.ports)

    # ---------------------------------------------------------------- lifecycle
    def start(self, timeout: float = 60.0) -> LocalRedisCluster:
        exe, cli = shutil.which("redis-server"), shutil.which("redis-cli")
        if exe is None or cli is None:
            raise ServiceError("redis-server / redis-cli not found; install the Debian package 'redis-server'")
        try:
            for _ in range(self.masters * (1 + self.replicas)):
                port = _cluster_port(set(self._nodes))
                self._nodes[port] = ManagedProcess(f"redis-{port}", self._root / str(port))
                self._nodes[port].workdir.mkdir(parents=True, exist_ok=True)
                self._spawn(port, timeout)
            create = [cli, "--cluster", "create", *(f"127.0.0.1:{p}" for p in self.ports),
                      "--cluster-replicas", str(self.replicas), "--cluster-yes"]
            done = subprocess.run(create, capture_output=True, text=True, timeout=timeout, check=False)
            if done.returncode != 0:
                raise ServiceError(f"redis-cli --cluster create failed ({done.returncode}): "
                                   f"{done.stdout[-2000:]}{done.stderr[-2000:]}")
            self.wait_ok(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _spawn(self, port: int, timeout: float) -> None:
        proc = self._nodes[port]
        conf = proc.workdir / "redis.conf"
        conf.write_text("\n".join([
            f"port {port}", "bind 127.0.0.1", f"dir {proc.workdir}", "daemonize no", "save \"\"",
            "protected-mode yes", "logfile \"\"", "cluster-enabled yes", "cluster-config-file nodes.conf",
            f"cluster-node-timeout {self.node_timeout}", f"appendonly {'yes' if self.appendonly else 'no'}",
            "appendfsync always", "repl-diskless-sync-delay 0",
        ]) + "\n")
        proc.spawn([shutil.which("redis-server") or "redis-server", str(conf)])
        wait_until(lambda: self._is_ours(port), timeout=timeout, what=f"redis-server (cluster node) on port {port}",
                   proc=proc.proc, log=proc.log_path)

    def _is_ours(self, port: int) -> bool:
        proc = self._nodes[port].proc
        client = self.node_client(port)
        try:
            return proc is not None and int(client.info("server")["process_id"]) == proc.pid
        finally:
            client.close()

    def wait_ok(self, timeout: float = 60.0) -> None:
        """Wait until every running node says ``cluster_state:ok`` and they agree on the slot owners."""
        def ok() -> bool:
            views = set()
            for port in self.running_ports():
                client = self.node_client(port)
                try:
                    if client.cluster("info")["cluster_state"] != "ok":
                        return False
                    views.add(tuple(sorted((s[0], s[1], s[2][1]) for s in client.execute_command("CLUSTER SLOTS"))))
                    info = client.info("replication")
                    if info["role"] == "slave" and info.get("master_link_status") != "up":
                        return False
                finally:
                    client.close()
            return len(views) == 1
        wait_until(ok, timeout=timeout, what="Redis Cluster to reach cluster_state:ok")

    def running_ports(self) -> List[int]:
        return [p for p, proc in sorted(self._nodes.items()) if proc.running]

    def stop(self) -> None:
        for proc in self._nodes.values():
            proc.kill(signal.SIGCONT)  # a paused node would not see the SIGTERM
            proc.stop(cleanup=False)
        shutil.rmtree(self._root, ignore_errors=True)
        _reaper.forget_dir(str(self._root))

    def __enter__(self) -> LocalRedisCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---------------------------------------------------------------- clients and roles
    def node_client(self, port: int, **kw: Any) -> Any:
        """A plain (single-node) client of one node."""
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        kw.setdefault("socket_timeout", 5)
        kw.setdefault("socket_connect_timeout", 2)
        kw.setdefault("decode_responses", True)
        return redis.Redis(host="127.0.0.1", port=port, retry=Retry(NoBackoff(), 0), **kw)

    def client(self) -> Any:
        """A ``redis.cluster.RedisCluster`` client of the whole cluster."""
        from redis.cluster import ClusterNode, RedisCluster

        return RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", p) for p in self.running_ports()],
                            decode_responses=True)

    def master_of_key(self, key: str) -> int:
        """The port of the master serving ``key``'s slot (as the running nodes see it)."""
        from redis.crc import key_slot

        slot = key_slot(key.encode())
        for port in self.running_ports():
            client = self.node_client(port)
            try:
                for start, end, master, *_ in client.execute_command("CLUSTER SLOTS"):
                    if start <= slot <= end:
                        return int(master[1])
            except Exception:  # noqa: BLE001 - a node that is restarting: ask the next one
                continue
            finally:
                client.close()
        raise ServiceError(f"no running node knows the master of slot {slot}")

    def replicas_of(self, master_port: int) -> List[int]:
        """Ports of the replicas that replicate ``master_port`` (from the master's ``INFO replication``)."""
        client = self.node_client(master_port)
        try:
            info = client.info("replication")
        finally:
            client.close()
        return sorted(int(v["port"]) for k, v in info.items() if k.startswith("slave") and isinstance(v, dict))

    def role(self, port: int) -> str:
        client = self.node_client(port)
        try:
            return str(client.execute_command("ROLE")[0])
        finally:
            client.close()

    # ---------------------------------------------------------------- faults
    def failover(self, replica_port: int, timeout: float = 60.0) -> None:
        """``CLUSTER FAILOVER`` on ``replica_port``; returns once it is a master and the cluster is ok."""
        deadline = time.monotonic() + timeout
        while self.role(replica_port) != "master":  # a manual failover that timed out is asked again
            client = self.node_client(replica_port)
            try:
                client.execute_command("CLUSTER FAILOVER")
            finally:
                client.close()
            try:
                wait_until(lambda: self.role(replica_port) == "master", timeout=min(15.0, timeout),
                           what=f"replica {replica_port} to take over by CLUSTER FAILOVER")
            except ServiceError:
                if time.monotonic() > deadline:
                    raise
        self.wait_ok(max(1.0, deadline - time.monotonic()))

    def kill(self, port: int) -> None:
        """SIGKILL node ``port`` (its dir and ``nodes.conf`` stay for :meth:`restart`)."""
        proc = self._nodes[port]
        proc.kill()
        if proc.proc is not None:
            proc.proc.wait(10)

    def pause(self, port: int) -> None:
        """SIGSTOP node ``port``: it keeps its connections but answers nothing (a replica that lags)."""
        self._nodes[port].kill(signal.SIGSTOP)

    def resume(self, port: int) -> None:
        """SIGCONT a node stopped by :meth:`pause`."""
        self._nodes[port].kill(signal.SIGCONT)

    def restart(self, port: int, timeout: float = 60.0) -> None:
        """Start a killed node again on its port and dir; it rejoins the cluster."""
        self._spawn(port, timeout)

    def wait_master(self, port: int, timeout: float = 60.0) -> None:
        """Wait until node ``port`` is a master (a replica promoted after its master died)."""
        deadline = time.monotonic() + timeout
        wait_until(lambda: self.role(port) == "master", timeout=timeout, what=f"node {port} to be promoted")
        self.wait_ok(max(1.0, deadline - time.monotonic()))


def node_id(cluster: LocalRedisCluster, port: int) -> str:
    """The cluster node id of node ``port``."""
    client = cluster.node_client(port)
    try:
        return str(client.execute_command("CLUSTER MYID"))
    finally:
        client.close()


def begin_migration(cluster: LocalRedisCluster, slot: int, source: int, target: int) -> None:
    """Mark ``slot`` IMPORTING on ``target`` and MIGRATING on ``source`` (the first steps of a resharding)."""
    for port, state, other in ((target, "IMPORTING", source), (source, "MIGRATING", target)):
        client = cluster.node_client(port)
        try:
            client.execute_command("CLUSTER SETSLOT", slot, state, node_id(cluster, other))
        finally:
            client.close()


def migrate_keys(cluster: LocalRedisCluster, source: int, target: int, keys: List[str]) -> None:
    """``MIGRATE`` ``keys`` from ``source`` to ``target`` (the slot being migrated)."""
    client = cluster.node_client(source)
    try:
        client.execute_command("MIGRATE", "127.0.0.1", target, "", 0, 5000, "KEYS", *keys)
    finally:
        client.close()


def finish_migration(cluster: LocalRedisCluster, slot: int, target: int) -> None:
    """``CLUSTER SETSLOT slot NODE target`` on every master: ``target`` owns ``slot`` from now on."""
    owner = node_id(cluster, target)
    for port in [target] + [p for p in master_ports(cluster) if p != target]:
        client = cluster.node_client(port)
        try:
            client.execute_command("CLUSTER SETSLOT", slot, "NODE", owner)
        finally:
            client.close()
    cluster.wait_ok()


def _cluster_port(taken: set[int]) -> int:
    """A free port ``p <= 55535`` whose cluster-bus port ``p + 10000`` is free too."""
    for _ in range(200):
        port = free_port()
        if port <= 55535 and port not in taken and not _bound(port + 10000):
            return port
        low = free_port() % 20000 + 20000  # the ephemeral range is often above 55535: try low ports
        if low not in taken and not _bound(low) and not _bound(low + 10000):
            return low
    raise ServiceError("no free port pair (port, port + 10000) for a Redis Cluster node")


def _bound(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def master_ports(cluster: LocalRedisCluster) -> List[int]:
    """Ports of the current masters."""
    return [p for p in cluster.running_ports() if cluster.role(p) == "master"]


def slot_owner(cluster: LocalRedisCluster, key: str) -> Optional[int]:
    """:meth:`LocalRedisCluster.master_of_key`, ``None`` while no running node knows it."""
    try:
        return cluster.master_of_key(key)
    except ServiceError:
        return None
