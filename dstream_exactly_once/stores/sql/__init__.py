"""The SQL stores: one shared base (:class:`SQLStore`, :mod:`._store`) with native upserts per dialect,
:class:`SQLiteStore` (:mod:`._sqlite`) and :class:`PostgresStore` (:mod:`._postgres`).

``_store.py`` holds the transactions and reads every SQL backend shares; the ``_*.py`` modules its
parts (statements, schema and layout, flat whole-batch commits, operator reads, retirement). Open a
store with :func:`dstream_exactly_once.stores.open_store`.
"""

from __future__ import annotations

from ._postgres import PostgresStore
from ._sqlite import SQLiteStore
from ._store import SQLStore

__all__ = ["PostgresStore", "SQLStore", "SQLiteStore"]
