"""Merging position-log entries (``stores/_position_log.py``): the order of sets and inits, documents."""

from __future__ import annotations

import json

import pytest

from dstream_exactly_once.core.ranges import Position
from dstream_exactly_once.errors import StoreError
from dstream_exactly_once.stores._position_log import apply, merge


def entry(sets: dict, inits: dict, docs: dict) -> str:
    return json.dumps([list(sets), list(sets.values()), list(inits), list(inits.values()), docs])


def test_the_last_set_wins_and_an_init_counts_only_for_a_key_not_seen_before() -> None:
    merged = merge("app", [
        entry({"a": 1}, {"b": 5, "c": 2}, {"a": '{"x":1}', "c": '{"c":1}'}),
        entry({"a": 2, "b": 6}, {"c": 9, "d": 1}, {"b": '{"b":6}', "c": '{"ignored":1}'}),
        entry({}, {"a": 100, "e": 3}, {"a": '{"ignored":1}'}),
    ])
    assert merged == ({"a": 2, "b": 6}, {"b": '{"b":6}'}, {"c": 2, "d": 1, "e": 3}, {"c": '{"c":1}'})


def test_merged_entries_apply_over_the_rows() -> None:
    rows = {"a": Position(0, {"old": 1}), "c": Position(7, {"kept": 1})}
    merged = merge("app", [entry({"a": 4}, {"c": 1, "n": 2}, {"n": '{"n":2}'})])
    assert apply("app", rows, merged) == {"a": Position(4), "c": Position(7, {"kept": 1}), "n": Position(2, {"n": 2})}


def test_nothing_to_merge() -> None:
    assert merge("app", []) == ({}, {}, {}, {})


def test_a_damaged_entry_is_a_store_error_naming_the_app() -> None:
    with pytest.raises(StoreError, match="app 'app': a position-log entry is damaged"):
        merge("app", ['[["a"], [1, 2], [], [], {}]'])
