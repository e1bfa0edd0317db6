"""Deprecated: import these names from :mod:`dstream_exactly_once.admin` (this module re-exports them)."""

from __future__ import annotations

from ..admin._retire import *  # noqa: F403 - the deprecated path keeps the same names
from ..admin._retire import __all__ as _names

__all__ = list(_names)
