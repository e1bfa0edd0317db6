"""One shape for what a stream skipped as lost, whatever its source: :class:`DataLossTotals`.

Kafka counts record offsets, the file source bytes; both count the same two ways data goes
missing under a skip data-loss policy (``failOnDataLoss=False``, ``fail.on.data.loss=false``):
gone before the batch is planned (the planner moves past it) and gone when a planned range is
read. ``stream.data_loss()`` returns it on every stream kind; each progress record carries the
same numbers as ``dataLossTotals``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Mapping

__all__ = ["DataLossTotals", "UNITS"]

#: the units sources count lost data in: Kafka record offsets, file bytes
UNITS = ("offsets", "bytes")


@dataclass(frozen=True)
class DataLossTotals:
    """Data a stream skipped as lost since this driver started (never negative).

    ``unit``: ``"offsets"`` (Kafka: offsets of records deleted by retention or with their topic) or
    ``"bytes"`` (files: bytes of a file rotated away or truncated before they were read).
    ``planned``: skipped while planning (the source's stored or next position is no longer in the
    log or file). ``read``: found gone while reading a planned range (counted once per range).
    With a fail policy both stay 0: the batch fails with ``DataLossError`` instead.
    """

    unit: str
    planned: int = 0
    read: int = 0

    def __post_init__(self) -> None:
        if self.unit not in UNITS:
            raise ValueError(f"unit must be one of {UNITS}, got {self.unit!r}")
        for name in ("planned", "read"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be an int >= 0, got {value!r}")

    @property
    def total(self) -> int:
        """``planned + read``."""
        return self.planned + self.read

    def to_json(self) -> Dict[str, object]:
        """``{"unit", "planned", "read", "total"}`` (the progress record's ``dataLossTotals``)."""
        return {"unit": self.unit, "planned": self.planned, "read": self.read, "total": self.total}

    @classmethod
    def of(cls, unit: str, planned: int, read_by_unit: Mapping[str, int]) -> DataLossTotals:
        """The totals of a source counting in ``unit``: ``planned`` and the read losses in that unit."""
        return cls(unit, max(int(planned), 0), max(int(read_by_unit.get(unit, 0)), 0))
