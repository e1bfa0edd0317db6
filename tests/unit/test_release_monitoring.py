"""Spark's Streaming tab descriptions of batch ranges, and the one data-loss shape of every stream kind."""

from __future__ import annotations

import os
from datetime import datetime, timezone

import pytest

from dstream_exactly_once import OffsetRange
from dstream_exactly_once.core._loss import DataLoss
from dstream_exactly_once.core._loss_totals import DataLossTotals
from dstream_exactly_once.core._progress import ProgressTracker
from dstream_exactly_once.files import FileRange
from dstream_exactly_once.stores._writes import PlannedBatch
from dstream_exactly_once.streaming._input_info import describe_ranges, jvm_safe


def test_kafka_ranges_are_records_described_as_sparks_direct_stream():
    ranges = [OffsetRange("t", 0, 10, 15), OffsetRange("t", 1, 0, 0), OffsetRange("t", 2, 100, 150)]
    records, text = describe_ranges(ranges)
    assert records == 55
    # largest first, empty ranges left out, Spark's own format
    assert text.split("\n") == ["topic: t\tpartition: 2\toffsets: 100 to 150",
                                "topic: t\tpartition: 0\toffsets: 10 to 15"]


def test_file_ranges_are_bytes_and_say_so():
    ranges = [FileRange("f1", "/var/log/a.log", 0, 200, fingerprint="ab" * 16, dev=5, inode=7),
              FileRange("f2", "/var/log/b.log", 40, 40)]
    records, text = describe_ranges(ranges)
    assert records == 200
    lines = text.split("\n")
    assert lines[0].startswith("records counted in bytes")
    assert lines[1:] == ["file: /var/log/a.log\tidentity: file:f1 fingerprint abababababababab dev/inode 5/7\t"
                         "bytes: 0 to 200"]


def test_a_file_name_that_is_not_utf8_reaches_the_jvm_as_escapes():
    odd = os.fsdecode(b"/var/log/service.log.\xff")  # how Python names it: a lone surrogate
    _, text = describe_ranges([FileRange("f1", odd, 0, 10)])
    with pytest.raises(UnicodeEncodeError):
        text.encode("utf-8")  # what py4j does with it, which breaks its connection
    safe = jvm_safe(text)
    assert "file: /var/log/service.log.\\xff\t" in safe and safe.encode("utf-8")
    assert jvm_safe("\ud800 plain") == "\\ud800 plain" and jvm_safe("tab\tü") == "tab\tü"


def test_an_empty_batch_is_zero_records():
    assert describe_ranges([]) == (0, "")


def test_data_loss_totals_shape_and_refusals():
    totals = DataLossTotals("bytes", 3, 4)
    assert totals.total == 7
    assert totals.to_json() == {"unit": "bytes", "planned": 3, "read": 4, "total": 7}
    with pytest.raises(ValueError, match=r"unit must be one of \('offsets', 'bytes'\), got 'lines'"):
        DataLossTotals("lines")
    with pytest.raises(ValueError, match=r"read must be an int >= 0, got -1"):
        DataLossTotals("offsets", 0, -1)


@pytest.mark.parametrize("unit", ["offsets", "bytes"])
def test_progress_records_and_the_accessor_share_one_shape_per_source(unit):
    planned = [5]
    tracker = ProgressTracker("app", "src", data_loss_skips=lambda: planned[0], data_loss_unit=unit)
    assert tracker.data_loss_totals() == DataLossTotals(unit, 5, 0)
    batch = PlannedBatch(0, int(datetime(2024, 1, 1, tzinfo=timezone.utc).timestamp() * 1000),
                         (OffsetRange("t", 0, 0, 100),))
    loss = DataLoss("t/0", 0, 100, 0, 30, unit, "t-0", "deleted (log start 30)")
    record = tracker.finished(batch, "applied", sink="commit_each_batch", losses=[loss])
    assert record["dataLossTotals"] == {"unit": unit, "planned": 5, "read": 30, "total": 35}
    planned[0] = 8
    assert tracker.data_loss_totals() == DataLossTotals(unit, 8, 30)
