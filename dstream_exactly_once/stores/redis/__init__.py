"""The Redis stores: :class:`RedisStore` (:mod:`.store`, one server) and :class:`RedisClusterStore`
(:mod:`.cluster`, Redis Cluster).

``store.py`` holds the store, ``lua/*.lua`` the scripts that run each write as one transaction on the
server; the ``_*.py`` modules its parts.
"""

from __future__ import annotations

from .cluster import RedisClusterStore
from .store import RedisStore

__all__ = ["RedisClusterStore", "RedisStore"]
