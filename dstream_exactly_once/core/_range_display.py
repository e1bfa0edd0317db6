"""How operator tools and progress records show the positions of one range kind.

Display only: nothing that plans, reads or commits a batch asks it, so it is kept out of the range
contract (:class:`~._ranges.SourceRange`). A source registers one :class:`RangeDisplay` per range kind
when its package is imported, beside its live log (:mod:`._live_log`); a kind without one is shown
flat, by position key, with no lag. Nothing here imports a source or Spark.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Tuple

from ..errors import ConfigurationError
from ._ranges import Position, SourceRange

__all__ = ["RangeDisplay", "range_display", "register_range_display"]


class RangeDisplay:
    """The display hooks of one range kind (:attr:`kind`); the defaults show positions flat."""

    #: The range kind this display shows (``SourceRange.kind``).
    kind: str = ""

    def __init__(self, kind: Optional[str] = None) -> None:
        if kind is not None:
            self.kind = kind

    def progress_group(self, r: SourceRange) -> Optional[Tuple[str, str]]:
        """``(group, member)`` under which progress records nest the positions of ``r`` (Kafka:
        ``(topic, partition)`` gives ``{topic: {partition: offset}}``); ``None``: flat, by position key."""
        return None

    def position_row(self, key: str, position: Position) -> Dict[str, Any]:
        """What the CLI shows of the stored ``position`` of ``key`` (a key of this kind), from the
        store alone: ``source`` (the kind), the source's own name of the partition, ``position``, and
        ``earliest``/``latest``/``lag`` where the store knows them; otherwise ``lag`` is ``None`` and
        ``lag_note`` says where it comes from."""
        return {"source": self.kind, "position": position.offset, "lag": None,
                "lag_note": f"the {self.kind} source records no lag in the store"}

    def live_rows(self, positions: Mapping[str, Position]) -> Dict[str, Dict[str, Any]]:
        """What this host sees of the live source behind ``positions`` (stored positions of this kind),
        over :meth:`position_row`: per key, the fields it measured now (``latest``, ``lag``,
        ``lag_note``, …); and rows of its own (keys that are no stored position, ``position`` ``None``)
        for data no position covers yet. Default: nothing (the source has no live view here)."""
        return {}


_DISPLAYS: Dict[str, RangeDisplay] = {}


def register_range_display(display: RangeDisplay) -> None:
    """Register ``display`` for its range kind (re-registering replaces)."""
    if not isinstance(display, RangeDisplay) or not isinstance(display.kind, str) or not display.kind:
        raise ConfigurationError(f"a range display needs a non-empty str range kind, got {display!r}")
    _DISPLAYS[display.kind] = display


def range_display(kind: str) -> RangeDisplay:
    """The display registered for range kind ``kind``; the flat default if it has none."""
    found = _DISPLAYS.get(kind)
    if found is None:
        found = _DISPLAYS[kind] = RangeDisplay(kind)
    return found
