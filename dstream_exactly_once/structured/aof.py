"""Deprecated path of the ``aof`` source: register it with :func:`dstream_exactly_once.structured.register`
(or :func:`dstream_exactly_once.structured.register_aof`).

This module still imports, with a :class:`DeprecationWarning`; it will be removed in a later release.
"""

from __future__ import annotations

import warnings

from ..files.structured._aof import *  # noqa: F403 - the deprecated path keeps the same names
from ..files.structured._aof import __all__ as _names

__all__ = list(_names)

warnings.warn("dstream_exactly_once.structured.aof is deprecated: register the aof source with "
              "dstream_exactly_once.structured.register", DeprecationWarning, stacklevel=2)
