"""What the core and the stores know of a range kind comes from its class (whether ``end - start``
counts records, the bare-list offset-log encoding, the words of commit errors) and, for progress
grouping, from the display its source registers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict

import pytest

from dstream_exactly_once import OffsetConflictError, OffsetRange, Writes, open_store
from dstream_exactly_once.core._progress import offsets_json
from dstream_exactly_once.core._ranges import (
    SourceRange,
    decode_range,
    encode_range,
    legacy_range_type,
    range_kind_of_key,
    register_range_kind,
)
from dstream_exactly_once.files._ranges import FileRange
from dstream_exactly_once.stores._base import PlannedBatch


@register_range_kind
@dataclass(frozen=True)
class _RowRange(SourceRange):
    """A third source's range, registered by this module only (nothing in the package root)."""

    kind = "rows-test"
    position_unit = "row"
    start_name = "first row"
    end_name = "row after"
    table: str
    lo: int
    hi: int

    @property
    def position_key(self) -> str:
        return f"rows:{self.table}"

    @property
    def start(self) -> int:
        return self.lo

    @property
    def end(self) -> int:
        return self.hi

    def to_json_obj(self) -> Dict[str, Any]:
        return {"table": self.table, "lo": self.lo, "hi": self.hi}

    @classmethod
    def from_json_obj(cls, obj: Any) -> _RowRange:
        return cls(obj["table"], obj["lo"], obj["hi"])

    @classmethod
    def parse_position_key(cls, key: str) -> Any:
        return key[5:] if key.startswith("rows:") else None


def test_a_source_registers_its_kind_by_importing_its_range_module():
    r = _RowRange("t", 3, 9)
    assert decode_range(encode_range(r)) == r
    assert range_kind_of_key("rows:t") is _RowRange and range_kind_of_key("t/0") is OffsetRange
    assert legacy_range_type() is OffsetRange  # the kind whose ranges are bare lists
    assert decode_range(["t", 0, 1, 2]) == OffsetRange("t", 0, 1, 2)


def test_progress_groups_positions_by_the_kinds_display():
    assert offsets_json([OffsetRange("a", 1, 5, 9)], "end") == {"a": {"1": 9}}
    assert offsets_json([_RowRange("t", 3, 9)], "start") == {"rows:t": 3}
    assert OffsetRange.counts_records and not FileRange.counts_records and not _RowRange.counts_records


def test_a_commit_conflict_names_positions_in_the_sources_words(tmp_path):
    with open_store(f"sqlite:///{tmp_path}/s.db", "app") as store:
        epoch = store.start_epoch()
        store.commit(epoch, PlannedBatch(0, 1000, (_RowRange("t", 0, 10),)), Writes())
        epoch = store.start_epoch()  # the first commit of an epoch compares every range
        with pytest.raises(OffsetConflictError, match=r"stored row 10 is neither first row 20 nor row after 30"):
            store.commit(epoch, PlannedBatch(1, 2000, (_RowRange("t", 20, 30),)), Writes())
        store.commit(epoch, PlannedBatch(1, 3000, (OffsetRange("k", 0, 0, 5),)), Writes())
        epoch = store.start_epoch()
        with pytest.raises(OffsetConflictError, match=r"stored offset 5 is neither fromOffset 7 nor untilOffset 9"):
            store.commit(epoch, PlannedBatch(2, 4000, (OffsetRange("k", 0, 7, 9),)), Writes())
