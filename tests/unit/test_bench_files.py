"""The file benchmark's cases count the same lines on a small input (no timing asserted, no Spark)."""

from __future__ import annotations

from pathlib import Path

from bench.file_cases import count_bare, count_reader, generate, plan_ranges


def test_generated_lines_are_log_like_with_multibyte_utf8(tmp_path: Path) -> None:
    data = generate(str(tmp_path), n_files=3, bytes_per_file=20_000)
    assert len(data.paths) == 3
    assert 100 <= data.bytes / data.lines <= 210
    assert 0 < data.multibyte_lines < data.lines
    assert data.chars < data.bytes - data.lines  # multi-byte characters: fewer characters than bytes
    for p in data.paths:
        assert Path(p).read_bytes().endswith(b"\n")


def test_bare_loop_and_file_source_count_and_decode_the_same_lines(tmp_path: Path) -> None:
    data = generate(str(tmp_path), n_files=3, bytes_per_file=20_000)
    assert count_bare(data.paths) == data.lines
    assert count_reader(data.glob) == data.lines
    ranges, reader = plan_ranges(data.glob)
    assert len(ranges) == 3
    assert sorted(r.path for r in ranges) == sorted(data.paths)
    for r in ranges:  # the same str lines, file by file (ranges come in identity order, not path order)
        with open(r.path, encoding="utf-8", newline="\n") as f:
            assert list(reader.read(r)) == [line[:-1] for line in f]
    assert sum(len(x) for r in ranges for x in reader.read(r)) == data.chars


def _samples(busy: dict) -> dict:
    """Two rounds per case: 1 s of wall time each, ``busy[case]`` CPU seconds charged to it."""
    from bench.cpu import CpuSample

    out = {}
    for case, cpu in busy.items():
        if case in ("A", "B"):  # charged the driver alone; the tree also holds an idle JVM
            out[case] = [CpuSample(wall=1.0, ours=cpu + 0.05, broker=0.0, machine=2.0, driver=cpu)] * 2
        else:
            out[case] = [CpuSample(wall=1.0, ours=cpu, broker=0.0, machine=2.0, driver=0.1)] * 2
    return out


def test_b6_ratio_needing_more_cores_than_the_machine_has_is_flagged_not_passed(tmp_path: Path) -> None:
    from bench.common import Results
    from bench.file_read import summarize

    data = generate(str(tmp_path), n_files=1, bytes_per_file=2_000)
    res = Results()
    # equal wall time, but A was busy 0.2 cores and B 1.0: B / A's parallelism part is 5x on 2 cores
    summarize(res, _samples({"A": 0.2, "B": 1.0, "C": 1.5, "D": 1.5}), data, cores=2)
    checks = {c.what: c for c in res.checks}
    wall = next(c for w, c in checks.items() if w.startswith("B / A") and "wall" in w)
    cpu = next(c for w, c in checks.items() if w.startswith("B / A") and "CPU" in w)
    assert wall.status == "FLAGGED invalid" and wall.passed is None and "5.00x parallelism" in wall.invalid
    assert cpu.value == 0.2 and cpu.status == "FAIL"  # B used 5x A's CPU per line: a real, valid miss
    same = [c for w, c in checks.items() if w.startswith("C / D")]
    assert [c.status for c in same] == ["PASS", "PASS"]
    ratio = next(m for m in res.of("B6") if m.extra.get("pair") == "B/A")
    assert ratio.extra["valid"] is False and "FLAGGED" in ratio.detail
    assert any(n.startswith("FLAG: B / A") for n in res.notes["B6"])
    rows = [m for m in res.of("B6") if "case_id" in m.extra]
    assert [m.extra["case_id"] for m in rows] == ["A", "B", "C", "D"] and rows[0].value == data.lines


def test_b6_case_busier_than_its_cores_invalidates_its_targets(tmp_path: Path) -> None:
    from bench.common import Results
    from bench.file_read import summarize

    data = generate(str(tmp_path), n_files=1, bytes_per_file=2_000)
    res = Results()
    summarize(res, _samples({"A": 1.0, "B": 1.0, "C": 1.0, "D": 3.0}), data, cores=2)  # D: 3 cores on 2
    for c in (c for c in res.checks if c.what.startswith("C / D")):
        assert c.status == "FLAGGED invalid" and "CPU accounting wrong" in c.invalid
    assert [c.status for c in res.checks if c.what.startswith("B / A")] == ["PASS", "PASS"]


def test_bench_files_is_the_harness_with_only_b6() -> None:
    from bench.cli import ALL, RUN_ORDER
    from bench.files import harness_argv

    assert harness_argv(["--quick", "--mb", "8", "--no-charts"]) == ["--only", "B6", "--quick", "--file-mb", "8",
                                                                      "--no-charts"]
    assert harness_argv(["--mb=8"]) == ["--only", "B6", "--file-mb=8"]
    assert "B6" in ALL and RUN_ORDER[0] == "B6"  # before any service starts: C/D's process tree is Spark's alone
