"""Merging position-log entries (``stores/_position_log.py``): an entry is its batch's ranges as the
offset log encodes them; ranges with data set, empty ranges initialise; documents; the order."""

from __future__ import annotations

import json
from typing import Any

import pytest

from dstream_exactly_once.core._ranges import Position, SourceRange
from dstream_exactly_once.errors import StoreError
from dstream_exactly_once.files._ranges import FileRange
from dstream_exactly_once.kafka._offsets import OffsetRange
from dstream_exactly_once.stores import PlannedBatch, Writes
from dstream_exactly_once.stores._commit_rules import plan_commit
from dstream_exactly_once.stores._position_log import apply, entry_text, merge, supersedes


def entry(*ranges: SourceRange) -> str:
    return PlannedBatch(1, 1_000, ranges).ranges_json()


def r(p: str, start: int, end: int) -> OffsetRange:
    return OffsetRange("t", int(p), start, end)


def file_range(file_id: str, start: int, end: int, **kw: Any) -> FileRange:
    return FileRange(file_id=file_id, path=f"/logs/{file_id}.log", from_byte=start, until_byte=end, **kw)


def test_ranges_with_data_set_and_empty_ranges_initialise_the_last_set_wins() -> None:
    merged = merge("app", [
        entry(r("0", 0, 1), r("1", 5, 5), r("2", 2, 2)),
        entry(r("0", 1, 2), r("1", 5, 6), r("2", 9, 9), r("3", 1, 1)),
        entry(r("0", 100, 100), r("4", 3, 3)),
    ])
    assert merged == ({"t/0": 2, "t/1": 6}, {}, {"t/2": 2, "t/3": 1, "t/4": 3}, {})


def test_documents_follow_the_range_that_set_or_initialised_the_key() -> None:
    a1, a2 = file_range("a", 0, 10, tail="ab"), file_range("a", 10, 20, tail="cd")
    b0 = file_range("b", 0, 0)
    merged = merge("app", [entry(a1, b0), entry(a2, file_range("b", 7, 7))])
    doc = json.dumps(a2.position_meta(), separators=(",", ":"), sort_keys=True)
    assert merged.set_pos == {a2.position_key: 20} and merged.set_doc == {a2.position_key: doc}
    assert merged.init_pos == {b0.position_key: 0}
    assert json.loads(merged.init_doc[b0.position_key]) == b0.position_meta()


def test_merged_entries_apply_over_the_rows() -> None:
    rows = {"t/0": Position(0, {"old": 1}), "t/2": Position(7, {"kept": 1})}
    merged = merge("app", [entry(r("0", 0, 4), r("2", 1, 1), r("5", 2, 2))])
    assert apply("app", rows, merged) == {"t/0": Position(4), "t/2": Position(7, {"kept": 1}), "t/5": Position(2)}


def test_an_entry_is_the_offset_log_text_made_once_per_batch() -> None:
    batch = PlannedBatch(3, 4_000, (r("0", 0, 4), r("1", 2, 2)))
    plan = plan_commit(1, batch, Writes(), None, True)
    assert entry_text(plan) is batch.ranges_json() is entry_text(plan)  # encoded once, shared
    assert PlannedBatch.from_json(batch.to_json()) == batch
    assert plan.moved == {"t/0"}


def test_an_entry_supersedes_the_log_only_when_it_sets_every_known_key() -> None:
    plan = plan_commit(1, PlannedBatch(3, 4_000, (r("0", 0, 4), r("1", 2, 3), r("2", 5, 5))), Writes(), None, True)
    assert supersedes(plan, frozenset({"t/0", "t/1"}))
    assert not supersedes(plan, frozenset({"t/0", "t/2"}))  # t/2 only initialised: its earlier entry counts
    assert not supersedes(plan, None)


def test_nothing_to_merge() -> None:
    assert merge("app", []) == ({}, {}, {}, {})
    assert merge("app", ["[]"]) == ({}, {}, {}, {})


@pytest.mark.parametrize("text", ['{"kind": "kafka", "many": [["t", [0], [1, 2], [0]]]}', "{not json", '{"kind": 1}'])
def test_a_damaged_entry_is_a_store_error_naming_the_app(text: str) -> None:
    with pytest.raises(StoreError, match="app 'app': a position-log entry is damaged"):
        merge("app", [text])
