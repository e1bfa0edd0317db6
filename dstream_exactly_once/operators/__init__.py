"""Deprecated name of :mod:`dstream_exactly_once.admin` (the operator actions on stored state).

``dstream_exactly_once.operators`` and its modules ``export``, ``retire`` and ``skip`` still import,
with a :class:`DeprecationWarning`; they will be removed in a later release. Import from
:mod:`dstream_exactly_once.admin` instead (``skip_batch`` and ``SkipPlan`` also from the package root).
"""

from __future__ import annotations

import warnings

from ..admin import *  # noqa: F403 - the deprecated name keeps the same names
from ..admin import __all__ as _names

__all__ = list(_names)

warnings.warn("dstream_exactly_once.operators is deprecated: import from dstream_exactly_once.admin",
              DeprecationWarning, stacklevel=2)
