"""The partition reader's output type: consecutive records of one range as parallel lists."""

from __future__ import annotations

from typing import Any, List, NamedTuple, Optional

__all__ = ["RecordBlock"]


class RecordBlock(NamedTuple):
    """Consecutive records of one range (from one fetched record batch), as parallel lists.

    ``offsets`` ascend and lie in the range; ``keys``/``values`` are raw bytes (``None`` for null).
    ``timestamps``, ``timestamp_types`` and ``headers`` are filled only when the range is read with
    ``metadata=True`` (``None`` otherwise); each record's headers are a list of its own (``[]``
    without headers) of ``(str, bytes or None)`` tuples, handed to a message handler as they are.
    """

    topic: str
    partition: int
    offsets: List[int]
    keys: List[Optional[bytes]]
    values: List[Optional[bytes]]
    timestamps: Optional[List[int]] = None
    timestamp_types: Optional[List[int]] = None
    headers: Optional[List[Any]] = None
