"""Structured Streaming on PySpark 4's Python Data Source API: sources and exactly-once sinks."""

from __future__ import annotations

from typing import Any

# ---- sinks (lazy: importing this package needs no Spark)
_SINK_EXPORTS = {
    "register_sinks": ".sinks",
    "store_sink_options": ".store_sink",
    "StoreSinkOptions": ".store_sink",
}


def __getattr__(name: str) -> Any:
    module = _SINK_EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module, __name__), name)
