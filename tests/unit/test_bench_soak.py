"""The soak harness's arithmetic (``bench/soak_report.py``): slopes per hour, windows, flat verdicts."""

from __future__ import annotations

import pytest

from bench.soak import parse
from bench.soak_report import slope_per_hour, slopes, windows


def test_slope_is_least_squares_per_hour():
    assert slope_per_hour([(0, 10.0), (1800, 15.0), (3600, 20.0)]) == pytest.approx(10.0)
    assert slope_per_hour([(0, 1.0), (60, 3.0), (120, 1.0), (180, 3.0)]) == pytest.approx(24.0)
    assert slope_per_hour([(5, 1.0)]) is None and slope_per_hour([(5, 1.0), (5, 2.0)]) is None


def test_windows_and_flat_verdicts():
    lat = [(t, 100.0 + (900.0 if t % 30 == 0 else 0.0)) for t in range(0, 120)]
    samples = [{"t": t, "batches": 2 * t, "store_bytes": 1000 * t, "rss_python_mib": 100.0,
                "rss_jvm_mib": 300.0 + t, "tracked_files": 4} for t in range(0, 120, 5)]
    w = windows(lat, samples, 60.0, 120.0)
    assert [x["batches"] for x in w] == [60, 60]
    assert w[0]["latency_p50_ms"] == 100.0 and w[0]["latency_p99_ms"] > 100.0
    assert w[1]["store_bytes_per_1k_batches"] == pytest.approx(1000 / 2 / 1024 * 1000)
    result = slopes(samples, w, warmup_s=60.0)
    assert result["rss_python_mib"]["flat"] is True and result["tracked_files"]["flat"] is True
    assert result["rss_jvm_mib"]["flat"] is False  # +1 MiB per second is 3,600 MiB per hour
    assert result["latency_p99_ms"]["flat"] is None  # one window after the warm-up: no slope


@pytest.mark.parametrize("argv", [["--minutes", "0"], ["--rate", "-1"], ["--store", "mysql"],
                                  ["--full-gc-seconds", "-5"]])
def test_bad_flags_are_refused(argv, capsys):
    with pytest.raises(SystemExit):
        parse(argv)
    assert "--" in capsys.readouterr().err


def test_the_jvm_leak_check_is_the_lowest_retained_heap_of_each_window():
    # a sawtooth: the heap grows between collections and falls back to what the program keeps (100 MiB)
    saw = [{"t": t, "batches": t, "jvm_retained_mib": 100.0 + (t % 60) * 5.0} for t in range(0, 600, 5)]
    w = windows([], saw, 120.0, 600.0)
    assert [x["jvm_retained_low_mib"] for x in w] == [100.0] * 5
    assert slopes(saw, w, warmup_s=120.0)["jvm_retained_low_mib"]["flat"] is True
    leak = [{**s, "jvm_retained_mib": s["jvm_retained_mib"] + s["t"] * 0.05} for s in saw]  # +180 MiB / hour
    w = windows([], leak, 120.0, 600.0)
    assert slopes(leak, w, warmup_s=120.0)["jvm_retained_low_mib"]["flat"] is False
