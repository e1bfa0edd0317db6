"""Operator actions on an application's stored state (what ``dstream-eo`` runs; no Spark import).

- :func:`~dstream_exactly_once.operators.skip.skip_batch` — move an application past a logged
  batch that fails every time: an audited, epoch-fenced commit without output.
"""

from __future__ import annotations

from .skip import SkipPlan, skip_batch

__all__ = ["SkipPlan", "skip_batch"]
