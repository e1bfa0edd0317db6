"""Export an application's committed Kafka offsets for another consumer (no Spark import).

:func:`structured_streaming_offsets` gives the document Spark's Structured Streaming Kafka source
takes as ``startingOffsets`` (``{"topic": {"0": 42}}``: per partition, the next offset to read), so
a query can continue exactly where a DStream application stopped. Reading never writes.
"""

from __future__ import annotations

import json
from typing import Dict

from ..errors import ConfigurationError
from ..stores._interfaces import PositionStore

__all__ = ["EXPORT_FORMATS", "export_offsets", "structured_streaming_offsets"]

#: The formats :func:`export_offsets` writes.
EXPORT_FORMATS = ("structured-streaming",)


def structured_streaming_offsets(store: PositionStore) -> Dict[str, Dict[str, int]]:
    """``{topic: {"partition": next offset}}`` from ``store``'s committed Kafka positions.

    Raises :class:`ConfigurationError` when the application has no committed Kafka offset (Spark
    would otherwise start from its own default, not from this application's position).
    """
    out: Dict[str, Dict[str, int]] = {}
    for tp, offset in sorted(store.load_offsets().items(), key=lambda kv: (kv[0].topic, kv[0].partition)):
        out.setdefault(tp.topic, {})[str(tp.partition)] = offset
    if not out:
        raise ConfigurationError(f"application {store.app_id!r} has no committed Kafka offsets in {store!r}; "
                                 f"nothing to export (did its first batch commit?)")
    return out


def export_offsets(store: PositionStore, fmt: str = "structured-streaming") -> str:
    """The committed offsets of ``store``'s application as text in format ``fmt``."""
    if fmt not in EXPORT_FORMATS:
        raise ConfigurationError(f"export format must be one of {list(EXPORT_FORMATS)}, got {fmt!r}")
    return json.dumps(structured_streaming_offsets(store), separators=(",", ":"), sort_keys=True)
