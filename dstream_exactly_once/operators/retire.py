"""Deprecated: :mod:`dstream_exactly_once.admin.retire` (this module re-exports its names)."""

from __future__ import annotations

from ..admin.retire import *  # noqa: F403 - the deprecated path keeps the same names
from ..admin.retire import __all__ as _names

__all__ = list(_names)
