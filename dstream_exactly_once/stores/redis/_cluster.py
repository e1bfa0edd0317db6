"""RedisClusterStore: the Redis store on a Redis Cluster (redis-py's ``RedisCluster`` client).

Every key of one application carries the hash tag ``{deo:<app_id>}`` (see :mod:`.redis`), so all of
them live in ONE hash slot, served by one master: each write script runs on that master alone and
stays atomic, exactly as on a single server. Different applications hash to different slots and
spread over the masters.
"""

from __future__ import annotations

from typing import Any, List, Tuple

from ...errors import ConfigurationError, StoreUnavailableError
from .._url import StoreURL
from ._store import RedisStore
from ._wait import script_then_wait

__all__ = ["RedisClusterStore"]

_REDIRECTS = 5


class RedisClusterStore(RedisStore):
    """Offsets and results of one application in a Redis Cluster, in the slot of ``{deo:<app_id>}``.

    Unit of atomicity and delivery guarantee: those of :class:`RedisStore` (one Lua script per
    write, on the master of the application's slot). Redirections are followed: ``MOVED`` (the slot
    has another master, after a failover or a resharding) and ``ASK`` (the slot is being migrated
    and the keys are already on the target); a slot split between two masters mid-migration
    (``TRYAGAIN``), a slot without a master or a cluster that is down (``CLUSTERDOWN``) raise
    :class:`StoreUnavailableError`, which a stream's ``store_retry`` rides out like any outage.
    Replication to the replicas is asynchronous: see ``wait_replicas`` in :class:`RedisStore` and
    ``docs/stores.md`` ("Redis Cluster").

    URL: ``redis+cluster://[user:password@]host:port[,host:port…][/]`` (``rediss+cluster://`` for
    TLS): startup nodes, any of them reachable is enough; the rest of the cluster is discovered.
    Options as for :class:`RedisStore`; there is no database number (a cluster has database 0 only).
    """

    scheme = "redis+cluster"
    _schemes = ("redis+cluster", "rediss+cluster")

    def _configure(self, parsed: StoreURL, db: int) -> None:
        if parsed.path.strip("/") not in ("", "0"):
            raise ConfigurationError(f"a Redis Cluster has database 0 only, got path {parsed.path!r} in "
                                     f"{self.display_url!r}; leave the path empty")
        self._startup_nodes: List[Tuple[str, int]] = [(h, p or 6379) for h, p in parsed.hosts]
        self._address = ",".join(f"{h}:{p}" for h, p in self._startup_nodes)

    def _new_client(self) -> Any:
        from redis.backoff import ExponentialBackoff
        from redis.cluster import ClusterNode, RedisCluster
        from redis.retry import Retry

        return RedisCluster(startup_nodes=[ClusterNode(h, p) for h, p in self._startup_nodes],
                            retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), 3), **self._params)

    def _eval_and_wait(self, client: Any, script: Tuple[str, str], keys: List[str],
                       arg: str) -> Tuple[Any, int, str]:
        """The script, touch and ``WAIT`` on one connection to the master of the application's slot,
        following ``MOVED`` and ``ASK``."""
        import redis.exceptions as rex
        from redis.cluster import ClusterNode
        from redis.crc import key_slot

        slot = key_slot(keys[0].encode())
        node, asking = client.nodes_manager.get_node_from_slot(slot), False
        for _ in range(_REDIRECTS):
            conn = client.get_redis_connection(node)
            try:
                reply, acked = script_then_wait(conn, script, keys, arg, self._wait, asking=asking)
            except (rex.ConnectionError, rex.TimeoutError):
                client.nodes_manager.initialize()  # the master may be gone: learn who serves the slot
                raise
            if isinstance(reply, rex.MovedError):
                client.nodes_manager.initialize()
                node, asking = client.nodes_manager.get_node_from_slot(slot), False
            elif isinstance(reply, rex.AskError):
                node = client.get_node(host=reply.host, port=reply.port) or ClusterNode(reply.host, reply.port)
                asking = True
            else:
                return reply, acked, node.name
        raise StoreUnavailableError(f"Redis Cluster at {self._address}: slot {slot} of app {self.app_id!r} "
                                    f"was redirected {_REDIRECTS} times in a row (a resharding in progress?)")
