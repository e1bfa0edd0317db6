"""The Redis stores: :class:`RedisStore` (:mod:`.store`, one server) and its Redis Cluster form.

``store.py`` holds the store, ``lua/*.lua`` the scripts that run each write as one transaction on the
server; the ``_*.py`` modules its parts.
"""

from __future__ import annotations

from .store import RedisStore

__all__ = ["RedisStore"]
