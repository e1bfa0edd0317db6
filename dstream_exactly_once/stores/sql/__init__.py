"""The SQL stores: one shared base (:class:`SQLStore`, :mod:`.store`) with native upserts per dialect,
:class:`SQLiteStore` (:mod:`.sqlite`) and :class:`PostgresStore` (:mod:`.postgres`).

``store.py`` holds the transactions and reads every SQL backend shares; the ``_*.py`` modules its
parts (statements, schema and layout, flat whole-batch commits, operator reads, retirement). Open a
store with :func:`dstream_exactly_once.stores.open_store`.
"""

from __future__ import annotations

from .postgres import PostgresStore
from .sqlite import SQLiteStore
from .store import SQLStore

__all__ = ["PostgresStore", "SQLStore", "SQLiteStore"]
