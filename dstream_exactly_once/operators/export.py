"""Deprecated: :mod:`dstream_exactly_once.admin.export` (this module re-exports its names)."""

from __future__ import annotations

from ..admin.export import *  # noqa: F403 - the deprecated path keeps the same names
from ..admin.export import __all__ as _names

__all__ = list(_names)
