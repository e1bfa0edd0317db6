"""The Structured Streaming benchmarks' arithmetic (bench/ss_*.py): no Spark, no Kafka, nothing timed."""

from __future__ import annotations

import pytest

from bench.ss_common import Topic, case_order, connect_ratios, flags, invalid, pair_ratios, summarize_runs
from bench.ss_read import check_sums, expected_sums, rates, table


def _run(records=1000, wall=2.0, cpu=1.0, **extra):
    return {"records": records, "wall": wall, "cpu": cpu, "broker_cpu": 0.1, "others_cpu": 0.0, "batches": 1,
            **extra}


def test_every_case_runs_first_in_some_round_and_each_round_runs_every_case_once():
    cases = [("classic", "jvm"), ("classic", "deo"), ("connect", "jvm")]
    orders = [case_order(cases, r) for r in range(4)]
    assert [o[0] for o in orders[:3]] == cases and orders[3] == orders[0]
    assert all(sorted(o) == sorted(cases) for o in orders)
    assert case_order([], 3) == []


def test_ratios_pair_the_same_rounds_and_leave_out_failed_ones():
    r = pair_ratios([2.0, None, 6.0, 3.0], [1.0, 5.0, 2.0, 0.0])
    assert r["values"] == [2.0, 3.0] and r["median"] == 2.5 and (r["min"], r["max"]) == (2.0, 3.0)
    assert r["text"] == "2.50 [2.00, 3.00] n=2x"
    assert pair_ratios([None], [1.0])["text"].startswith("n/a")


def test_connect_over_classic_uses_the_round_of_each_mode():
    runs = {("connect", "jvm"): [_run(wall=3.0), _run(wall=8.0)], ("classic", "jvm"): [_run(wall=1.5), _run(wall=2.0)]}
    assert connect_ratios(runs, ("jvm",), "wall")["values"] == [2.0, 4.0]
    assert connect_ratios(runs, ("jvm",), "wall", invert=True)["values"] == [0.5, 0.25]
    assert connect_ratios(runs, ("deo",), "wall")["values"] == []


def test_cpu_above_the_machine_or_below_the_clock_is_flagged_and_kept_out_of_the_rates():
    assert invalid(_run(wall=1.0, cpu=2.5), cores=2) == "2.50 cores of CPU on a 2-core machine"
    assert "below the clock" in invalid(_run(cpu=0.0), cores=2)
    assert invalid(_run(wall=1.0, cpu=1.9), cores=2) == ""
    assert flags(_run(wall=1.0, cpu=3.0), cores=2)[0].startswith("FLAGGED invalid")
    assert flags(_run(wall=2.0, cpu=1.0, others_cpu=1.5), cores=2) == ["busy machine: others used 0.75 cores"]
    runs = [_run(wall=2.0, cpu=1.0), {"error": "boom"}, _run(wall=1.0, cpu=0.0)]
    assert rates(runs, "cpu") == [1000.0, None, None] and rates(runs, "wall") == [500.0, None, None]


def test_the_aggregate_is_checked_against_the_topic_and_the_other_peers():
    topic = Topic("ss-read", {0: 3, 1: 3, 2: 2, 3: 2}, 0.0)
    exp = expected_sums(topic)
    assert exp == {"n": 10, "key_chars": 60, "value_chars": 1000, "topic_chars": 70, "partition_sum": 3 + 4 + 6,
                   "offset_sum": 3 + 3 + 1 + 1, "type_sum": 0}
    good = {**exp, "timestamp_chars": 230, "header_chars": 90}
    assert check_sums({"sums": good}, exp, good) == []
    wrong = check_sums({"sums": {**good, "offset_sum": 7, "header_chars": 80}}, exp, good)
    assert wrong == ["offset_sum 7 != 8", "header_chars 80 != 90 (other peer)"]


def test_the_read_table_shows_rates_spread_and_failures():
    topic = Topic("t", {0: 500, 1: 500}, 0.0)
    sums = {**expected_sums(topic), "timestamp_chars": 1, "header_chars": 1}
    runs = {("classic", "jvm"): [_run(sums=sums), _run(cpu=2.0, sums=sums)],
            ("classic", "deo"): [_run(cpu=0.5, sums=sums), {"error": "the query failed: x"}]}
    lines = table(["classic"], ["jvm", "deo"], runs, expected_sums(topic))
    assert "| classic | Spark JVM source (format kafka) | 750 [500, 1,000] n=2 |" in lines[2]
    assert "| yes |" in lines[2] and "1 failed: the query failed: x" in lines[3]


def test_first_batch_cells_say_when_an_output_is_wrong():
    rows = [{"first_s": 2.0, "trigger_ms": 500.0, "cpu": 1.0, "wall": 2.0, "check": {"ok": True}},
            {"first_s": 4.0, "trigger_ms": 700.0, "cpu": 2.0, "wall": 4.0, "check": {"ok": False}}]
    s = summarize_runs(rows, "first_s")
    assert s["text"] == "3.00 [2.00, 4.00] n=2" and s["trigger_ms"] == "600" and s["start_ms"] == "2,400"
    assert s["checked"] == "**NO** (1 of 2)" and s["n"] == 2


@pytest.mark.parametrize(("module", "argv", "message"), [
    ("bench.ss_read", ["--peers", "jvm,spark"], "unknown peer 'spark'; allowed: jvm, deo, deo-ck"),
    ("bench.ss_first", ["--sinks", "store,hive"], "unknown sink 'hive'; allowed: store, kafka, doris, delta"),
    ("bench.ss_read", ["--rounds", "0"], "--rounds must be >= 1"),
])
def test_bad_arguments_are_refused_before_anything_starts(module, argv, message, capsys):
    import importlib

    with pytest.raises(SystemExit):
        importlib.import_module(module).main(argv)
    assert message in capsys.readouterr().err
