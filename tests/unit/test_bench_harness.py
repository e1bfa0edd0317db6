"""The benchmark harness's bookkeeping (bench/): no benchmark runs here and nothing is timed."""

from __future__ import annotations

import os


def test_process_tree_follows_children_and_skips_strangers():
    from bench.cpu import _tree

    procs = {1: (0, 0.0, 0.0), 10: (1, 1.0, 0.0), 11: (10, 2.0, 0.5), 12: (11, 3.0, 0.0), 20: (1, 9.0, 0.0)}
    assert _tree(procs, [10]) == {10, 11, 12}
    assert _tree(procs, [10, 20, 99]) == {10, 11, 12, 20}  # a root that is gone is ignored


def test_own_process_is_read_from_proc():
    from bench.cpu import _stat

    st = _stat(os.getpid())
    assert st is not None and st[0] == os.getppid() and st[1] >= 0.0
    assert _stat(2 ** 22 + 12345) is None  # no such pid


def test_others_cpu_never_goes_negative():
    from bench.cpu import CpuSample

    sample = CpuSample(wall=2.0, ours=1.5, broker=0.2, machine=1.2)
    assert sample.others == 0.0 and sample.cores_used == 0.75
    assert CpuSample(wall=2.0, ours=1.0, broker=0.0, machine=3.0).others_cores == 1.0


def test_an_invalid_measurement_is_flagged_not_passed():
    from bench.common import Results

    res = Results()
    ok = res.check("B5", "scaling", 1.9, ">=", 1.8, "x")
    flagged = res.check("B5", "scaling", 3.06, ">=", 1.8, "x", invalid="above the core count")
    assert (ok.status, ok.passed) == ("PASS", True)
    assert (flagged.status, flagged.passed) == ("FLAGGED invalid", None)


def test_spread_names_median_range_and_iqr():
    from bench.common import spread

    text = spread([5.0, 1.0, 3.0, 2.0, 4.0], "{:.1f}")
    assert text == "median 3.0 [min 1.0, max 5.0; IQR 2.0–4.0; n=5]"


def test_plain_baseline_runs_the_stores_own_statement_on_its_own_table(tmp_path):
    from bench.pipeline import PLAIN_TABLE, SQLitePlain

    plain = SQLitePlain(str(tmp_path / "plain.db"))
    try:
        assert "deo_values" not in plain.sql and PLAIN_TABLE in plain.sql and "json_each" in plain.sql
        plain.write({"a": 2, "b": 1})
        plain.write({"a": 3})
        assert plain.values() == {"a": 5, "b": 1}
    finally:
        plain.close()
