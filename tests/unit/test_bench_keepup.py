"""The keep-up benchmark's arithmetic (``bench/keepup.py``): rows, verdicts, the measured window."""

from __future__ import annotations

import threading
import time

import pytest

from bench.cpu import CpuMeter
from bench.keepup import checks, main, summarize, table
from bench.keepup_child import Window


def _row(ms: float) -> dict:
    return {"batch_ms": ms, "plan_ms": 2, "job_ms": ms - 5, "commit_ms": 3, "tasks": 2, "records": 1000}


def test_summary_counts_batches_per_second_of_the_window():
    result = {"rows": [_row(100), _row(300), _row(200)], "first_batch_s": 4.0, "cpu_s": 3.0, "lag_records": 7}
    s = summarize(result, window_s=2.0)
    assert s["batches"] == 3 and s["batches_per_s"] == 1.5 and s["cpu_per_batch_s"] == 1.0
    assert s["batch_ms_p50"] == 200 and s["commit_ms_p50"] == 3 and s["lag_records"] == 7
    assert summarize({"error": "boom"}, 2.0) == {"error": "boom"}
    empty = summarize({"rows": [], "first_batch_s": float("nan"), "cpu_s": 0.1}, 60.0)
    assert empty["batches_per_s"] == 0 and empty["batch_ms_p50"] != empty["batch_ms_p50"]  # nan


def test_verdicts_name_the_target_and_say_when_the_jvm_peer_completed_nothing():
    ours = [summarize({"rows": [_row(300)] * 114, "first_batch_s": 5.0, "cpu_s": 30.0}, 60.0)]
    jvm_slow = [summarize({"rows": [_row(3000)] * 10, "first_batch_s": 30.0, "cpu_s": 30.0}, 60.0)]
    lines = checks(100, 0.5, {"ours": ours, "jvm": jvm_slow})
    assert lines[0].endswith("| 1.90 batches/s | >= 1.90 | PASS |")
    assert "0.10x (300 / 3,000 ms)" in lines[1] and lines[1].endswith("PASS |")
    nothing = [summarize({"rows": [], "first_batch_s": float("nan"), "cpu_s": 1.0}, 60.0)]
    lines = checks(1000, 0.5, {"ours": [summarize({"rows": [_row(900)] * 60, "first_batch_s": 5.0,
                                                             "cpu_s": 1.0}, 60.0)], "jvm": nothing})
    assert "**FAIL**" in lines[0] and "the JVM source completed no batch in its window" in lines[1]
    assert any("error: exit 1" in line for line in table(10, 0.5, {"jvm": [{"error": "exit 1"}]}))


def test_the_window_counts_batches_finished_inside_it_after_the_warmup_from_the_first_batch():
    w = Window(warm_s=0.2, window_s=0.3, first_timeout_s=5.0)

    def feed():
        time.sleep(0.1)
        for _ in range(12):  # one batch every 0.05 s from t=0.1 s to t=0.65 s
            w.add(_row(10))
            time.sleep(0.05)

    t = threading.Thread(target=feed)
    t.start()
    out = w.wait(CpuMeter())
    t.join()
    assert 0.05 < out["first_batch_s"] < 0.5
    assert 3 <= len(out["rows"]) <= 8  # those finished in [first + 0.2, first + 0.5), not the warm-up's


@pytest.mark.parametrize("argv", [["--peers", "ours,spark"]])
def test_an_unknown_peer_is_refused(argv, capsys):
    with pytest.raises(SystemExit):
        main(argv)
    assert "unknown peer 'spark'; allowed: ours, jvm, ss, floor" in capsys.readouterr().err
