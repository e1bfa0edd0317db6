"""Deprecated path: this module moved to a private one; import store_sink_options and StoreSinkOptions from
dstream_exactly_once.structured.

It still imports, re-exporting SINK_POSITION_KEY, STORE_SINK_NAME, SinkBatchRange, StoreSinkOptions,
commit_batch, merge_writes, rows_to_writes, store_sink_options, with a :class:`DeprecationWarning`; it will be
removed in a later release.
"""

from __future__ import annotations

import warnings

from ._store_sink import (  # noqa: F401 - re-exported
    SINK_POSITION_KEY,
    STORE_SINK_NAME,
    SinkBatchRange,
    StoreSinkOptions,
    commit_batch,
    merge_writes,
    rows_to_writes,
    store_sink_options,
)

__all__ = [
    "SINK_POSITION_KEY",
    "STORE_SINK_NAME",
    "SinkBatchRange",
    "StoreSinkOptions",
    "commit_batch",
    "merge_writes",
    "rows_to_writes",
    "store_sink_options",
]

warnings.warn("dstream_exactly_once.structured.store_sink is deprecated: import store_sink_options and "
              "StoreSinkOptions from dstream_exactly_once.structured",
              DeprecationWarning, stacklevel=2)
