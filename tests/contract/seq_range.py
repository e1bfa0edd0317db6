"""``SeqRange``: a range kind that exists only in the tests, registered the way a source registers its own.

The store contract uses it where positions are source-agnostic, so no store code path can depend
on Kafka's ``"topic/partition"`` keys.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional

from dstream_exactly_once.core._ranges import SourceRange, register_range_kind


@register_range_kind
@dataclass(frozen=True)
class SeqRange(SourceRange):
    """Test-only range kind: numbers ``[lo, hi)`` of sequence ``name``; ``note`` is stored beside ``hi``."""

    kind = "test-seq"

    name: str
    lo: int
    hi: int
    note: Optional[str] = None

    @property
    def position_key(self) -> str:
        return "seq:" + self.name

    @property
    def start(self) -> int:
        return self.lo

    @property
    def end(self) -> int:
        return self.hi

    def position_meta(self) -> Optional[Dict[str, Any]]:
        return None if self.note is None else {"note": self.note, "hi": self.hi}

    def to_json_obj(self) -> Dict[str, Any]:
        return {"name": self.name, "lo": self.lo, "hi": self.hi, "note": self.note}

    @classmethod
    def from_json_obj(cls, obj: Any) -> SeqRange:
        return cls(**obj)
