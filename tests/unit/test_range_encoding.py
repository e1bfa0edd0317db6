"""The offset log's encoding of a batch's ranges: each range kind stores them at once, as columns
(``SourceRange.encode_many``), and entries of the per-range encoding still read."""

from __future__ import annotations

import json
from typing import Any

import pytest

from dstream_exactly_once.core._ranges import decode_ranges, encode_range, encode_ranges
from dstream_exactly_once.errors import ConfigurationError, OffsetRangeError
from dstream_exactly_once.files._ranges import FileRange
from dstream_exactly_once.kafka._offsets import OffsetRange
from dstream_exactly_once.stores import PlannedBatch


def round_trip(batch: PlannedBatch) -> None:
    """Both stored forms (SQL ranges column, Redis entry) give back exactly ``batch``, ranges in order."""
    ranges = PlannedBatch.ranges_from_json(batch.ranges_json())
    assert PlannedBatch(batch.batch_id, batch.batch_time_ms, ranges) == batch
    assert PlannedBatch.from_json(batch.to_json()) == batch


def file_range(file_id: str, start: int, end: int, **kw: Any) -> FileRange:
    return FileRange(file_id=file_id, path=f"/logs/{file_id}.log", from_byte=start, until_byte=end, **kw)


def test_kafka_ranges_are_stored_as_columns_per_topic() -> None:
    b = PlannedBatch(4, 5_000, tuple(OffsetRange("t", p, 10 * p, 10 * p + p) for p in (0, 2, 1)))
    assert json.loads(b.ranges_json()) == {"kind": "kafka", "many": [["t", [0, 2, 1], [0, 20, 10], [0, 2, 1]]]}
    round_trip(b)


def test_consecutive_partitions_are_stored_as_first_and_count() -> None:
    b = PlannedBatch(4, 5_000, tuple(OffsetRange("t", p, 10 * p, 10 * p + 3) for p in range(3, 6)))
    assert json.loads(b.ranges_json())["many"] == [["t", {"first": 3, "count": 3}, [30, 40, 50], [3, 3, 3]]]
    round_trip(b)


def test_kafka_ranges_keep_their_order_across_interleaved_topics() -> None:
    ranges = (OffsetRange("a", 1, 0, 5), OffsetRange("b", 0, 7, 7), OffsetRange("a", 0, 2, 9),
              OffsetRange("b", 3, 1, 2))
    b = PlannedBatch(0, 1, ranges)
    assert json.loads(b.ranges_json())["many"] == [["a", [1], [0], [5]], ["b", [0], [7], [0]], ["a", [0], [2], [7]],
                                                   ["b", [3], [1], [1]]]
    round_trip(b)


def test_many_kafka_ranges_round_trip() -> None:
    round_trip(PlannedBatch(9, 1, tuple(OffsetRange(f"t{p % 3}", p, p, p + p % 2) for p in range(5_000))))


def test_a_batch_without_ranges_round_trips() -> None:
    b = PlannedBatch(0, 1, ())
    assert b.ranges_json() == "[]"
    round_trip(b)


def test_file_ranges_leave_out_columns_holding_only_defaults() -> None:
    plain = (file_range("a", 0, 10), file_range("b", 5, 5))
    many = json.loads(PlannedBatch(0, 1, plain).ranges_json())["many"]
    assert many == {"n": 2, "file_id": ["a", "b"], "path": ["/logs/a.log", "/logs/b.log"], "from_byte": [0, 5],
                    "until_byte": [10, 5]}
    round_trip(PlannedBatch(0, 1, plain))


def test_file_ranges_with_every_field_round_trip() -> None:
    full = file_range("c", 0, 40, fingerprint="ab" * 16, sample_length=64, tail="cd" * 8, tail_length=16, dev=2049,
                      inode=77, host="h1", compressed=True, aliases=((1, 2, 3), (0, 9, 40)),
                      supersedes="file:b", seen_size=90)
    round_trip(PlannedBatch(3, 1, (file_range("a", 0, 10), full, file_range("b", 7, 7, host="h2"))))


def test_entries_of_the_per_range_encoding_still_read() -> None:
    kafka = (OffsetRange("t", 0, 1, 2), OffsetRange("t", 1, 0, 0))
    assert PlannedBatch.ranges_from_json(json.dumps([["t", 0, 1, 2], ["t", 1, 0, 0]])) == kafka  # layout 1
    files = (file_range("a", 0, 10, dev=3), file_range("b", 2, 2))
    assert PlannedBatch.ranges_from_json(json.dumps([encode_range(r) for r in files])) == files  # layout 2
    old = json.dumps({"batch_id": 2, "batch_time_ms": 9, "ranges": [["t", 0, 1, 2], ["t", 1, 0, 0]]})
    assert PlannedBatch.from_json(old) == PlannedBatch(2, 9, kafka)


@pytest.mark.parametrize("stored", [
    {"kind": "kafka", "many": [["t", [0, 1], [0], [1, 2]]]},  # columns of different lengths
    {"kind": "kafka", "many": [["t", {"first": 0, "count": 2}, [0, 1], [1]]]},
    {"kind": "kafka", "many": [["t", {"first": 0}, [0], [1]]]},
    {"kind": "kafka", "many": [["t", [0], [5], [-1]]]},  # until before from
    {"kind": "kafka", "many": [["t", [0], [5], [1.5]]]},
    {"kind": "kafka", "many": [["t", [0], [0]]]},
    {"kind": "kafka", "many": {"t": 1}},
    {"kind": "file", "many": {"n": 2, "file_id": ["a"], "path": ["/a", "/b"], "from_byte": [0, 0],
                              "until_byte": [1, 1]}},
    {"kind": "file", "many": {"n": 1, "file_id": ["a"], "path": ["/a"], "from_byte": [0], "until_byte": [1],
                              "colour": ["red"]}},
])
def test_damaged_columns_are_refused_naming_them(stored: Any) -> None:
    with pytest.raises((OffsetRangeError, ConfigurationError)):
        decode_ranges(stored)


def test_unknown_kinds_and_shapes_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="unknown range kind 'nope'"):
        decode_ranges({"kind": "nope", "many": []})
    with pytest.raises(ConfigurationError, match="cannot decode offset-log ranges"):
        decode_ranges({"kind": "kafka", "many": [], "extra": 1})
    with pytest.raises(ConfigurationError, match="one kind"):
        encode_ranges([OffsetRange("t", 0, 0, 1), file_range("a", 0, 1)])
