"""The Redis stores: :class:`RedisStore` (:mod:`._store`, one server) and :class:`RedisClusterStore`
(:mod:`._cluster`, Redis Cluster).

``_store.py`` holds the store, ``lua/*.lua`` the scripts that run each write as one transaction on the
server; the ``_*.py`` modules its parts.
"""

from __future__ import annotations

from ._cluster import RedisClusterStore
from ._store import RedisStore

__all__ = ["RedisClusterStore", "RedisStore"]
