"""Deprecated: import these names from :mod:`dstream_exactly_once.admin` (this module re-exports them)."""

from __future__ import annotations

from ..admin._skip import *  # noqa: F403 - the deprecated path keeps the same names
from ..admin._skip import __all__ as _names

__all__ = list(_names)
