"""Deprecated path: this module moved to a private one; import register_aof from dstream_exactly_once.structured.

It still imports, re-exporting AofDataSource, AofStreamReader, FileRangePartition, register_aof, with a
:class:`DeprecationWarning`; it will be removed in a later release.
"""

from __future__ import annotations

import warnings

from ._aof import (  # noqa: F401 - re-exported
    AofDataSource,
    AofStreamReader,
    FileRangePartition,
    register_aof,
)

__all__ = ["AofDataSource", "AofStreamReader", "FileRangePartition", "register_aof"]

warnings.warn("dstream_exactly_once.files.structured.aof is deprecated: import register_aof from "
              "dstream_exactly_once.structured",
              DeprecationWarning, stacklevel=2)
