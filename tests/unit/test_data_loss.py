"""The data-loss policy's pieces: loss reports, incident records, the fail-policy error, progress fields."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from dstream_exactly_once import DataLossError, OffsetRange, OutputError, Writes
from dstream_exactly_once.core._loss import DataLoss, loss_cause, loss_error, loss_summary, record_losses
from dstream_exactly_once.core._progress import ProgressTracker
from dstream_exactly_once.stores import PostgresStore
from dstream_exactly_once.stores._writes import RESERVED_NAMESPACE, PlannedBatch, incident_key
from dstream_exactly_once.streaming._data_loss import _LargestPerRange, loss_failure


def _loss(start, end, key="t/0", rs=0, re=100, unit="offsets"):
    return DataLoss(key, rs, re, start, end, unit, key.replace("/", "-"), "deleted (log start 30)")


def test_record_losses_writes_one_incident_per_range_with_every_part():
    w = Writes().incr("n", "count", 1)
    docs = record_losses(w, 7, [_loss(0, 10), _loss(20, 30), _loss(0, 10), _loss(5, 9, key="u/1", rs=5, re=9)])
    assert set(docs) == {"t/0", "u/1"}
    t0 = w.puts[(RESERVED_NAMESPACE, incident_key("loss", 7, "t/0"))]
    assert '"lost":20' in t0 and '"range":[0,100]' in t0 and '"parts":[[0,10,' in t0
    assert docs["t/0"] == {"batch": 7, "key": "t/0", "where": "t-0", "unit": "offsets", "range": [0, 100], "lost": 20,
                           "parts": [[0, 10, "deleted (log start 30)"], [20, 30, "deleted (log start 30)"]]}
    assert docs["u/1"]["lost"] == 4
    assert loss_summary([_loss(0, 10), _loss(0, 10), _loss(0, 3, unit="bytes")]) == {"offsets": 10, "bytes": 3}


def test_the_fail_error_names_batch_ranges_command_and_hides_the_password():
    ranges = [OffsetRange("t", 0, 50, 100), OffsetRange("t", 1, 7, 9)]
    err = loss_error(3, ranges, "offsets [50, 80) of t-0 were deleted", store_url="redis://:***@db:6379/0",
                     app_id="orders", policy_hint="failOnDataLoss=False")
    text = str(err)
    assert isinstance(err, DataLossError) and err.batch == 3 and err.offset_ranges == ranges  # type: ignore[attr-defined]
    assert "batch 3 cannot be read" in text and "[50, 80)" in text and "t-0" in text and "t-1" in text
    assert "dstream-eo batches skip --store redis://:***@db:6379/0 --app orders --batch 3 --execute" in text
    assert "failOnDataLoss=False" in text


SPARK_REPORT = """An error occurred while calling o12.collectAndServe.
org.apache.spark.api.python.PythonException: Traceback (most recent call last):
  File "reader.py", line 80, in locate
dstream_exactly_once.errors.DataLossError: cannot read /var/log/a.log (file:ab) [10 -> 20): gone
\tat org.apache.spark.api.python.BasePythonRunner"""


def test_an_executor_data_loss_becomes_the_batch_error_and_other_errors_pass():
    assert loss_cause(SPARK_REPORT) == "cannot read /var/log/a.log (file:ab) [10 -> 20): gone"
    assert loss_cause("ValueError: nope") is None
    store = PostgresStore("postgresql://u:s3cret@db/x", "logs")  # not connected: only its URL and app id are read
    batch = PlannedBatch(4, 0, (OffsetRange("t", 0, 0, 5),))
    spark_error = RuntimeError(SPARK_REPORT)
    wrapped = OutputError("output of batch 4 failed")
    wrapped.__cause__ = spark_error
    err = loss_failure(wrapped, batch, store)
    assert err is not None and "batch 4 cannot be read" in str(err) and "[10 -> 20)" in str(err)
    assert "s3cret" not in str(err) and "--app logs --batch 4 --execute" in str(err)
    assert loss_failure(RuntimeError("boom"), batch, store) is None
    assert loss_failure(err, batch, store) is None  # already names its batch: passed on as it is
    direct = loss_failure(DataLossError("offsets [0, 5) of t-0 were deleted"), batch, store)
    assert direct is not None and "failOnDataLoss=False" in str(direct)


def test_reports_of_one_range_read_twice_count_once():
    merge = _LargestPerRange()
    a = {("t/0", 0, 100): (_loss(0, 10),)}
    b = {("t/0", 0, 100): (_loss(0, 30),), ("t/1", 0, 5): (_loss(0, 5, key="t/1", re=5),)}
    out = merge.addInPlace(merge.addInPlace(merge.zero({}), a), b)
    assert out[("t/0", 0, 100)] == (_loss(0, 30),) and len(out) == 2
    assert merge.addInPlace(out, a)[("t/0", 0, 100)] == (_loss(0, 30),)


@pytest.mark.parametrize("kind", ["kafka", "file"])
def test_progress_counts_losses_and_input_rows_read(kind):
    planner_skips = [5]
    unit = "offsets" if kind == "kafka" else "bytes"
    tracker = ProgressTracker("app", "src", data_loss_skips=lambda: planner_skips[0], data_loss_unit=unit)
    r = OffsetRange("t", 0, 0, 100)
    batch = PlannedBatch(0, int(datetime(2024, 1, 1, tzinfo=timezone.utc).timestamp() * 1000), (r,))
    first = tracker.finished(batch, "applied", sink="commit_each_batch", losses=[_loss(0, 30, unit=unit)])
    assert first["dataLoss"] == [{"key": "t/0", "where": "t-0", "unit": unit, "start": 0, "end": 30, "lost": 30}]
    if kind == "kafka":
        assert first["numDataLossSkippedOffsets"] == 35 and first["numDataLossSkippedBytes"] == 0
        assert first["numInputRows"] == 70  # only what was read
    else:
        assert first["numDataLossSkippedBytes"] == 35 and first["numDataLossSkippedOffsets"] == 0
    second = tracker.finished(PlannedBatch(1, batch.batch_time_ms + 1000, (OffsetRange("t", 0, 100, 110),)),
                              "applied", sink="commit_each_batch")
    assert second["dataLoss"] == [] and second[f"numDataLossSkipped{'Offsets' if kind == 'kafka' else 'Bytes'}"] == 35
