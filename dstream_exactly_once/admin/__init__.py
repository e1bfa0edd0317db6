"""Operator actions on an application's stored state (what ``dstream-eo`` runs; no Spark import).

This package was called ``dstream_exactly_once.operators``; that name still imports, deprecated.

- :func:`skip_batch` — move an application past a logged
  batch that fails every time: an audited, epoch-fenced commit without output.
- :func:`retire_app` — delete everything a store holds of an
  application that will not run again, in one epoch-fenced transaction.
- :func:`export_offsets` — an application's committed Kafka offsets
  in a form another consumer takes (Structured Streaming's ``startingOffsets``).
"""

from __future__ import annotations

from ._export import EXPORT_FORMATS, export_offsets, structured_streaming_offsets
from ._retire import RetirePlan, retire_app
from ._skip import SkipPlan, skip_batch

__all__ = ["EXPORT_FORMATS", "RetirePlan", "SkipPlan", "export_offsets", "retire_app", "skip_batch",
           "structured_streaming_offsets"]
