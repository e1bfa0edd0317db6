"""Argument checks of the store interface's write calls (epoch, keep, batch, writes, positions,
documents), shared by every backend: each refuses a bad argument with one
:class:`~dstream_exactly_once.errors.ConfigurationError` naming it, before anything is written."""

from __future__ import annotations

import json
from typing import Dict, Mapping

from .._checks import is_int
from ..errors import ConfigurationError
from ._writes import INT64_MAX, PlannedBatch, Writes

__all__ = ["check_batch_arg", "check_documents_arg", "check_epoch_arg", "check_keep_arg", "check_positions_arg",
           "check_writes_arg"]


def check_epoch_arg(epoch: object) -> int:
    if not is_int(epoch) or epoch < 1:
        raise ConfigurationError(f"epoch must be an int >= 1 taken with start_epoch(), got {epoch!r}")
    return epoch


def check_keep_arg(keep: object) -> int:
    if not is_int(keep) or keep < 1:
        raise ConfigurationError(f"keep (batches to retain in the offset and commit logs) must be an int >= 1, "
                                 f"got {keep!r}")
    return keep


def check_batch_arg(batch: object) -> PlannedBatch:
    if not isinstance(batch, PlannedBatch):
        raise ConfigurationError(f"batch must be a PlannedBatch, got {batch!r}")
    return batch


def check_writes_arg(writes: object) -> Writes:
    if not isinstance(writes, Writes):
        raise ConfigurationError(f"writes must be a Writes, got {writes!r}")
    return writes


def check_positions_arg(positions: object) -> Dict[str, int]:
    """``positions`` of :meth:`TransactionalStore.reset_positions` as a dict, checked entry by entry."""
    if not isinstance(positions, Mapping):
        raise ConfigurationError(f"positions must be a mapping {{position_key: next position}}, got {positions!r}")
    out: Dict[str, int] = {}
    for key, pos in positions.items():
        if not isinstance(key, str) or not key:
            raise ConfigurationError(f"position key must be a non-empty str (e.g. 'topic/0'), got {key!r}")
        if not is_int(pos) or not 0 <= pos <= INT64_MAX:
            raise ConfigurationError(f"position of {key!r} must be an int in 0..2**63-1, got {pos!r}")
        out[key] = pos
    return out


def check_documents_arg(documents: object, positions: Mapping[str, int]) -> Dict[str, str]:
    """``documents`` of :meth:`TransactionalStore.reset_positions` as ``{key: JSON text}``: each a
    JSON object for a key of ``positions``."""
    if documents is None:
        return {}
    if not isinstance(documents, Mapping):
        raise ConfigurationError(f"documents must be a mapping {{position_key: dict}}, got {documents!r}")
    out: Dict[str, str] = {}
    for key, doc in documents.items():
        if key not in positions:
            raise ConfigurationError(f"document for {key!r}, which is not one of the positions being set "
                                     f"{sorted(positions)!r}")
        if not isinstance(doc, Mapping):
            raise ConfigurationError(f"document of {key!r} must be a dict, got {doc!r}")
        try:
            out[key] = json.dumps(dict(doc), separators=(",", ":"), sort_keys=True, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ConfigurationError(f"document of {key!r} cannot be stored as JSON: {doc!r} ({exc})") from exc
    return out
