"""``dstream-eo demo`` end to end (small N): the at-least-once side double-counts, the exactly-once
side is exact, under the same SIGKILLs of the driver (one of them from an executor, mid-output)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from dstream_exactly_once.teaching._points import EXPLAINED, kill_schedule

pytestmark = pytest.mark.slow

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_demo_contrasts_at_least_once_with_exactly_once(tmp_path):
    n, rate, partitions = 800, 25, 4  # 8 full batches of 100 records
    # two kills, one of them an executor task dying mid-output
    seed = next(s for s in range(1, 100) if "mid-output" in kill_schedule(2, s))
    schedule = kill_schedule(2, seed)
    out = tmp_path / "demo"
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run([sys.executable, "-m", "dstream_exactly_once.cli", "demo", "--n", str(n), "--crashes", "2",
                           "--rate", str(rate), "--seed", str(seed), "--out", str(out)],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    s = json.loads((out / "summary.json").read_text())
    expected = n * (n + 1) // 2

    assert s["kills"] == schedule and s["runs"] == 3
    eo, alo = s["exactly_once"], s["at_least_once"]
    assert (eo["sum"], eo["count"], eo["duplicates"], eo["batch_rows_count"]) == (expected, n, 0, n)
    # every kill fell between the at-least-once output and its offset write: one full batch counted twice each
    assert alo["sum"] > expected
    assert alo["duplicates"] == len(schedule) * rate * partitions
    assert (out / "totals.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and s["chart"] == str(out / "totals.png")

    lines = done.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split() == ["expected", "at-least-once", "exactly-once"])
    assert lines[header + 2].split()[-3:] == [f"{expected:,}", f"{alo['sum']:,}", f"{expected:,}"]
    assert lines[header + 4].split() == ["duplicates", "0", f"{alo['duplicates']:,}", "0"]
    assert all(EXPLAINED[p] in done.stdout for p in schedule)
    assert "verified" in lines[-1]
