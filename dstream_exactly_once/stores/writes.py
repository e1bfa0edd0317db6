"""Deprecated path: this module moved to a private one; import Writes from dstream_exactly_once
(RESERVED_NAMESPACE from dstream_exactly_once.stores).

It still imports, re-exporting INCIDENT_KINDS, INT64_MAX, INT64_MIN, MAX_KEY_BYTES, RESERVED_NAMESPACE,
CommitOutcome, Number, PlannedBatch, Writes, incident_key, with a :class:`DeprecationWarning`; it will be
removed in a later release.
"""

from __future__ import annotations

import warnings

from ._writes import (  # noqa: F401 - re-exported
    INCIDENT_KINDS,
    INT64_MAX,
    INT64_MIN,
    MAX_KEY_BYTES,
    RESERVED_NAMESPACE,
    CommitOutcome,
    Number,
    PlannedBatch,
    Writes,
    incident_key,
)

__all__ = [
    "INCIDENT_KINDS",
    "INT64_MAX",
    "INT64_MIN",
    "MAX_KEY_BYTES",
    "RESERVED_NAMESPACE",
    "CommitOutcome",
    "Number",
    "PlannedBatch",
    "Writes",
    "incident_key",
]

warnings.warn("dstream_exactly_once.stores.writes is deprecated: import Writes from dstream_exactly_once "
              "(RESERVED_NAMESPACE from dstream_exactly_once.stores)",
              DeprecationWarning, stacklevel=2)
