"""Deprecated path: this module moved to a private one; import delta_sink_options and DeltaSinkOptions from
dstream_exactly_once.structured.

It still imports, re-exporting DELTA_SINK_NAME, DeltaSinkOptions, DeltaTaskFiles, commit_delta_batch,
delta_sink_options, write_partition, with a :class:`DeprecationWarning`; it will be removed in a later
release.
"""

from __future__ import annotations

import warnings

from ._delta_sink import (  # noqa: F401 - re-exported
    DELTA_SINK_NAME,
    DeltaSinkOptions,
    DeltaTaskFiles,
    commit_delta_batch,
    delta_sink_options,
    write_partition,
)

__all__ = [
    "DELTA_SINK_NAME",
    "DeltaSinkOptions",
    "DeltaTaskFiles",
    "commit_delta_batch",
    "delta_sink_options",
    "write_partition",
]

warnings.warn("dstream_exactly_once.structured.delta_sink is deprecated: import delta_sink_options and "
              "DeltaSinkOptions from dstream_exactly_once.structured",
              DeprecationWarning, stacklevel=2)
