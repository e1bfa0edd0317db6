"""The teaching demo's pieces without Spark or Kafka: schedule, trace, the plain store, table, chart."""

from __future__ import annotations

import subprocess
import sys

import pytest

from dstream_exactly_once.errors import ConfigurationError
from dstream_exactly_once.kafka._offsets import TopicAndPartition
from dstream_exactly_once.teaching import _chart as chart
from dstream_exactly_once.teaching._plain_store import PlainSumStore
from dstream_exactly_once.teaching._points import (
    CRASH_POINTS,
    EXPLAINED,
    Trace,
    batches_with_data,
    check_kills_fit,
    check_point,
    kill_schedule,
    kills_that_fit,
)
from dstream_exactly_once.teaching._show import explain, table


def test_schedule_walks_the_crash_points_in_batch_order_and_cycles():
    assert kill_schedule(5) == list(CRASH_POINTS)
    assert kill_schedule(7)[5:] == list(CRASH_POINTS[:2])
    assert kill_schedule(0) == []
    assert set(EXPLAINED) == set(CRASH_POINTS)


def test_a_seed_shuffles_the_order_reproducibly():
    assert kill_schedule(5, seed=3) == kill_schedule(5, seed=3)
    assert sorted(kill_schedule(5, seed=3)) == sorted(CRASH_POINTS)
    assert any(kill_schedule(5, seed=s) != list(CRASH_POINTS) for s in range(1, 5))


@pytest.mark.parametrize("bad", [-1, 1.5, True, "2"])
def test_schedule_refuses_bad_counts(bad):
    with pytest.raises(ConfigurationError, match=r"crashes must be an int >= 0, got " + repr(bad).replace(".", r"\.")):
        kill_schedule(bad)


def test_check_point_names_the_allowed_points():
    assert check_point("mid-output") == "mid-output" and check_point("none") == "none"
    with pytest.raises(ConfigurationError) as err:
        check_point("mid-ouput")
    assert "'mid-ouput'" in str(err.value) and all(p in str(err.value) for p in CRASH_POINTS)


def test_trace_round_trips_lines(tmp_path):
    trace = Trace(tmp_path / "t.jsonl")
    assert trace.read() == []
    trace.append({"event": "batch", "alo_sum": 3})
    trace.append({"event": "kill", "point": "after-commit", "alo_sum": 6})
    assert [e["event"] for e in trace.read()] == ["batch", "kill"]
    assert trace.read()[1]["point"] == "after-commit"


def test_plain_store_duplicates_a_batch_when_killed_between_its_two_writes(tmp_path):
    """The at-least-once loop in miniature: output, (crash), offsets — the replay adds the batch twice."""
    tp = TopicAndPartition("numbers", 0)
    store = PlainSumStore(tmp_path / "alo.db")
    store.add(6, 3)  # batch [0, 3): values 1, 2, 3
    store.close()  # "SIGKILL": the offsets were never stored
    again = PlainSumStore(tmp_path / "alo.db")
    assert again.offsets() == {}  # the restarted loop starts from the beginning again
    again.add(6, 3)
    again.store_offsets({tp: 3})
    assert again.totals() == (12, 6, 2) and again.offsets() == {tp: 3}
    again.close()


def summary(alo_sum: int, alo_count: int) -> dict:
    return {"n": 3, "expected_sum": 6, "kills": ["mid-output", "after-commit"],
            "at_least_once": {"sum": alo_sum, "count": alo_count, "duplicates": alo_count - 3},
            "exactly_once": {"sum": 6, "count": 3, "duplicates": 0}}


def test_table_lines_up_expected_and_both_pipelines():
    lines = table(summary(9, 5)).splitlines()
    assert lines[0].split() == ["expected", "at-least-once", "exactly-once"]
    assert lines[2].split()[-3:] == ["6", "9", "6"]
    assert lines[4].split() == ["duplicates", "0", "2", "0"]
    assert len({len(line) for line in lines}) == 1  # aligned columns


def test_explanation_names_each_kill_and_the_reason():
    text = explain(summary(9, 5))
    assert "2 time(s)" in text and "ONE store transaction" in text
    assert f"mid-output: {EXPLAINED['mid-output']}" in text
    # self-contained: the crash points this run did not hit are explained too, no page is named
    for point in ("before-planning", "after-offset-log", "after-output-before-commit"):
        assert f"- {point}: {EXPLAINED[point]}" in text
    assert ".md" not in text


TRACE = [{"event": "batch", "alo_sum": 10, "eo_sum": 10}, {"event": "kill", "point": "mid-output", "alo_sum": 30,
                                                           "eo_sum": 10},
         {"event": "batch", "alo_sum": 50, "eo_sum": 30}]


def test_chart_is_a_png(tmp_path):
    import matplotlib  # noqa: F401 - in the test extra: a missing one fails here, it does not skip

    assert chart.write_chart(TRACE, 30, tmp_path / "c.png") is None
    assert (tmp_path / "c.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_chart_is_skipped_with_one_note_without_matplotlib(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    note = chart.write_chart(TRACE, 30, tmp_path / "c.png")
    assert note == chart.MISSING and "[chart]" in note and "\n" not in note
    assert not (tmp_path / "c.png").exists()


def test_kills_that_fit_follow_the_batches_with_data():
    # 1..500 over 4 partitions at 250 records/s per partition: one 1 s batch, no run reaches its batch 2
    assert batches_with_data(500, 4, 250) == 1 and kills_that_fit(500, 4, 250) == 0
    # the defaults: 10 batches; kill k needs k + 1 of them
    assert batches_with_data(10000, 4, 250) == 10 and kills_that_fit(10000, 4, 250) == 9
    assert kills_that_fit(800, 4, 25) == 7 and kills_that_fit(8, 4, 1) == 1


def test_kills_that_cannot_fit_are_refused_naming_what_would_fit():
    check_kills_fit(5, 10000, 4, 250)  # the default run fits
    check_kills_fit(0, 1, 4, 250)  # no kill always fits
    with pytest.raises(ConfigurationError) as info:
        check_kills_fit(1, 500, 4, 250)
    msg = str(info.value)
    assert "--crashes 1 cannot fit" in msg and "read in 1 batch(es)" in msg and "0 kill(s) fit" in msg
    assert "--n 1001 or more" in msg and "--rate 124 or less" in msg
    # the fixes it names do fit
    check_kills_fit(1, 1001, 4, 250)
    check_kills_fit(1, 500, 4, 124)
    with pytest.raises(ConfigurationError, match="--rate 124 or less"):
        check_kills_fit(1, 500, 4, 125)


def test_demo_refuses_kills_that_cannot_fit_before_starting_anything(tmp_path):
    out = tmp_path / "demo"
    done = subprocess.run([sys.executable, "-m", "dstream_exactly_once.cli", "demo", "--n", "500", "--crashes", "1",
                           "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "error: --crashes 1 cannot fit" in done.stderr and done.stderr.count("\n") == 1
    assert "broker" not in done.stdout and not out.exists()
