"""Deprecated path: this module moved to a private one; import register_sinks from
dstream_exactly_once.structured.

It still imports, re-exporting register_sinks, with a :class:`DeprecationWarning`; it will be removed in a
later release.
"""

from __future__ import annotations

import warnings

from ._sinks import (  # noqa: F401 - re-exported
    register_sinks,
)

__all__ = ["register_sinks"]

warnings.warn("dstream_exactly_once.structured.sinks is deprecated: import register_sinks from "
              "dstream_exactly_once.structured",
              DeprecationWarning, stacklevel=2)
