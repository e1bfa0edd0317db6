"""Progress output never stops a stream: bad paths are refused when set, run-time failures of the
progress file, of listeners and of the record itself are logged once per cause (real files)."""

from __future__ import annotations

import json
import logging
import re
import shutil

import pytest

from dstream_exactly_once.core._progress import ProgressTracker, check_progress_path
from dstream_exactly_once.errors import ConfigurationError
from dstream_exactly_once.files import FileRange
from dstream_exactly_once.stores import PlannedBatch

LOG = "dstream_exactly_once.core.progress"


def _batch(i):
    return PlannedBatch(i, 1_000 * (i + 1), (FileRange("abc", "/x/a.log", 10 * i, 10 * i + 10),))


def _warnings(caplog):
    return [r.getMessage() for r in caplog.records if r.name == LOG and r.levelno == logging.WARNING]


@pytest.mark.parametrize("bad, why", [
    (3, "got 3"), ("", "got ''"), ("   ", "got '   '"), ("/tmp/a\0b.jsonl", "NUL byte"),
])
def test_bad_progress_values_are_refused_naming_the_value(bad, why):
    with pytest.raises(ConfigurationError, match=rf"progress_path must be a path.*{re.escape(why)}"):
        check_progress_path(bad)


def test_a_directory_or_a_path_in_a_missing_directory_is_refused_when_set(tmp_path):
    tracker = ProgressTracker("app", "files")
    with pytest.raises(ConfigurationError, match=rf"'{re.escape(str(tmp_path))}' is a directory"):
        tracker.set_path(str(tmp_path))
    missing = tmp_path / "missing" / "p.jsonl"
    with pytest.raises(ConfigurationError, match=rf"directory '{re.escape(str(tmp_path / 'missing'))}' does not"):
        tracker.set_path(str(missing))
    assert tracker.progress_path is None  # nothing was set
    tracker.set_path(str(tmp_path / "p.jsonl"))
    assert tracker.progress_path == str(tmp_path / "p.jsonl")


def test_progress_file_failures_are_logged_once_per_cause_and_batches_go_on(tmp_path, caplog):
    out = tmp_path / "out"
    out.mkdir()
    path = out / "p.jsonl"
    tracker = ProgressTracker("app", "files", progress_path=str(path))
    with caplog.at_level(logging.INFO, logger=LOG):
        assert tracker.finished(_batch(0), "applied", sink="s") is not None
        shutil.rmtree(out)  # the directory goes away while the stream runs
        for i in (1, 2, 3):
            assert tracker.finished(_batch(i), "applied", sink="s")["batchId"] == i
        assert len(_warnings(caplog)) == 1 and "No such file or directory" in _warnings(caplog)[0]
        out.mkdir()  # back: appended again, and a later failure is reported again
        tracker.finished(_batch(4), "applied", sink="s")
        path.unlink()
        path.mkdir()  # now a directory where the file was
        tracker.finished(_batch(5), "applied", sink="s")
        tracker.finished(_batch(6), "applied", sink="s")
    assert len(_warnings(caplog)) == 2 and "Is a directory" in _warnings(caplog)[1]
    assert [r["batchId"] for r in tracker.recent] == list(range(7))


def test_disk_full_is_logged_once(caplog):
    tracker = ProgressTracker("app", "files")
    tracker.progress_path = "/dev/full"  # writes fail with ENOSPC
    with caplog.at_level(logging.WARNING, logger=LOG):
        for i in range(3):
            tracker.finished(_batch(i), "applied", sink="s")
    assert len(_warnings(caplog)) == 1 and "No space left on device" in _warnings(caplog)[0]


def test_a_raising_listener_is_logged_once_and_the_others_still_hear_every_batch(caplog):
    tracker = ProgressTracker("app", "files")
    heard = []

    def broken(record):
        raise RuntimeError(f"listener down at {record['batchId']}")

    tracker.add_listener(broken)
    tracker.add_listener(heard.append)
    with caplog.at_level(logging.WARNING, logger=LOG):
        for i in range(3):
            tracker.finished(_batch(i), "applied", sink="s")
    assert [r["batchId"] for r in heard] == [0, 1, 2]
    assert len(_warnings(caplog)) == 1 and "broken" in _warnings(caplog)[0]


def test_a_record_that_cannot_be_built_is_logged_and_never_raises(caplog):
    def counters():
        raise OSError("counters unavailable")

    tracker = ProgressTracker("app", "files", source_counters=counters)
    with caplog.at_level(logging.WARNING, logger=LOG):
        record = tracker.finished(_batch(0), "applied", sink="s")
        assert record is not None and "unreadable" not in record["sources"][0]["metrics"]
        assert tracker.finished(object(), "applied", sink="s") is None  # not a batch at all
    assert any("counters unavailable" in w for w in _warnings(caplog))
    assert any("could not build the progress record" in w for w in _warnings(caplog))


def test_source_counters_are_in_the_record_and_the_file(tmp_path):
    path = tmp_path / "p.jsonl"
    tracker = ProgressTracker("app", "files", progress_path=str(path),
                              source_counters=lambda: {"unreadable": 2, "losses": 0})
    tracker.finished(_batch(0), "applied", sink="s")
    metrics = json.loads(path.read_text())["sources"][0]["metrics"]
    assert metrics["unreadable"] == 2 and metrics["losses"] == 0 and metrics["maxOffsetsBehindLatest"] is None


def test_a_record_reports_the_batch_ranges_with_data_and_its_tasks():
    from dstream_exactly_once import OffsetRange

    tracker = ProgressTracker("app", "numbers")
    batch = PlannedBatch(0, 1_000, (OffsetRange("t", 0, 0, 10), OffsetRange("t", 1, 4, 4), OffsetRange("t", 2, 0, 3)))
    source = tracker.finished(batch, "applied", sink="s", num_tasks=1)["sources"][0]  # type: ignore[index]
    assert (source["numRanges"], source["numTasks"]) == (2, 1)
    assert tracker.finished(PlannedBatch(1, 2_000, ()), "applied", sink="s")["sources"][0]["numTasks"] == -1  # type: ignore[index]


def test_the_wait_between_planning_and_output_is_in_no_duration(monkeypatch):
    """A batch is planned when Spark generates it and output once the batches before it are done:
    that wait (Spark's scheduling delay) is not counted as the batch's execution."""
    clock = [100.0]
    monkeypatch.setattr("dstream_exactly_once.core._progress._time.monotonic", lambda: clock[0])
    tracker = ProgressTracker("app", "files")
    tracker.planned(0, 0.2, 0.05, {})  # planned and logged at t=100 (it took 0.25 s)
    clock[0] = 130.0  # 30 s in the job queue behind a slow batch
    tracker.output_started(0)
    clock[0] = 131.0
    tracker.commit_started(0)
    clock[0] = 131.5
    record = tracker.finished(_batch(0), "applied", sink="commit_each_batch")
    assert record is not None
    assert record["durationMs"] == {"latestOffset": 200, "walCommit": 50, "addBatch": 1000, "commitOffsets": 500,
                                    "triggerExecution": 1750}
