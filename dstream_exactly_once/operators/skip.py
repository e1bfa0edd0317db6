"""Deprecated: :mod:`dstream_exactly_once.admin.skip` (this module re-exports its names)."""

from __future__ import annotations

from ..admin.skip import *  # noqa: F403 - the deprecated path keeps the same names
from ..admin.skip import __all__ as _names

__all__ = list(_names)
