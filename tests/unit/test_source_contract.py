"""The source contract is stated once (``core.source.CONTRACT``) and holds only what planning, reading
and committing need; how a range kind is shown (progress grouping, the CLI's rows) is its display,
registered per kind beside its live log."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

from dstream_exactly_once import OffsetRange
from dstream_exactly_once.core._progress import offsets_json
from dstream_exactly_once.core._range_display import RangeDisplay, range_display, register_range_display
from dstream_exactly_once.core._ranges import Position, SourceRange, register_range_kind
from dstream_exactly_once.core._source import CONTRACT, BatchSource, RangeReader
from dstream_exactly_once.files._ranges import FileRange


def _public(cls: type) -> set:
    return {n for n in dir(cls) if not n.startswith("_")}


def test_the_contract_lists_every_member_of_each_piece():
    for cls in (SourceRange, BatchSource, RangeReader):
        stated = CONTRACT[cls.__name__]
        assert len(stated) == len(set(stated)), cls.__name__
        assert _public(cls) == set(stated), cls.__name__


def test_the_display_hooks_are_no_part_of_the_range_contract():
    for hook in ("progress_group", "position_row", "live_rows"):
        assert not hasattr(SourceRange, hook) and not hasattr(OffsetRange, hook) and not hasattr(FileRange, hook)
        assert hasattr(RangeDisplay, hook)


def test_kafka_and_file_displays_show_positions_as_before():
    assert offsets_json([OffsetRange("a", 1, 5, 9), OffsetRange("a", 2, 0, 3)], "end") == {"a": {"1": 9, "2": 3}}
    assert range_display("kafka").position_row("t/3", Position(7)) == {
        "source": "kafka", "topic": "t", "partition": 3, "position": 7}
    assert range_display("kafka").position_row("not-a-kafka-key", Position(7))["lag"] is None
    file_row = range_display("file").position_row("file:f1", Position(4, {"path": "/l/a.log", "seen_size": 10}))
    assert file_row == {"source": "file", "path": "/l/a.log", "position": 4, "earliest": 0, "latest": 10, "lag": 6,
                        "lag_note": "against the size the driver recorded when it last planned this file"}
    unknown = range_display("file").position_row("file:f2", Position(4))
    assert unknown["lag"] is None and unknown["latest"] is None
    assert range_display("file").live_rows({}) == {}
    assert offsets_json([FileRange("f1", "/l/a.log", 0, 4)], "start") == {"file:f1": 0}


@register_range_kind
@dataclass(frozen=True)
class _TableRange(SourceRange):
    kind = "table-contract-test"
    table: str
    lo: int
    hi: int

    @property
    def position_key(self) -> str:
        return f"table:{self.table}"

    @property
    def start(self) -> int:
        return self.lo

    @property
    def end(self) -> int:
        return self.hi

    def to_json_obj(self) -> Dict[str, Any]:
        return {"table": self.table, "lo": self.lo, "hi": self.hi}

    @classmethod
    def from_json_obj(cls, obj: Any) -> _TableRange:
        return cls(obj["table"], obj["lo"], obj["hi"])


def test_a_new_kind_is_flat_until_it_registers_a_display():
    r = _TableRange("t", 3, 9)
    assert offsets_json([r], "end") == {"table:t": 9}
    assert range_display(r.kind).position_row("table:t", Position(9))["source"] == r.kind

    class _Grouped(RangeDisplay):
        kind = _TableRange.kind

        def progress_group(self, r: SourceRange) -> Optional[Tuple[str, str]]:
            return ("tables", r.position_key)

    register_range_display(_Grouped())
    try:
        assert offsets_json([r], "end") == {"tables": {"table:t": 9}}
    finally:
        register_range_display(RangeDisplay(_TableRange.kind))
