"""The SQL stores: one shared base (:class:`SQLStore`, :mod:`.store`) with native upserts per dialect.

``store.py`` holds the transactions and reads every SQL backend shares; the ``_*.py`` modules its
parts (statements, schema and layout, flat whole-batch commits, operator reads, retirement, SQL text).
"""

from __future__ import annotations

from .store import SQLStore

__all__ = ["SQLStore"]
