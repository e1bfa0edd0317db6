"""scripts/run-tests.sh (`make test`'s pytest step): the rest and the two shards of the slow tests run,
each with its own --basetemp, and any one failing fails the run. A stub stands in for ``python -m pytest``."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STUB = """#!/bin/bash
shift 2  # -m pytest
echo "$*" >> "$CALLS"
case "$*" in
  *"-m slow --shard 1/2"*) echo "slow part 1 output"; exit "$SLOW_RC";;
  *"-m slow --shard 2/2"*) echo "slow part 2 output"; exit "$SLOW2_RC";;
  *) exit "$REST_RC";;
esac
"""


def run(tmp_path: Path, rest_rc: int, slow_rc: int, *args: str, slow2_rc: int = 0) -> subprocess.CompletedProcess[str]:
    stub = tmp_path / "python"
    stub.write_text(STUB)
    stub.chmod(0o755)
    env = {**os.environ, "PYTHON": str(stub), "CALLS": str(tmp_path / "calls"), "TMPDIR": str(tmp_path),
           "REST_RC": str(rest_rc), "SLOW_RC": str(slow_rc), "SLOW2_RC": str(slow2_rc)}
    return subprocess.run(["bash", str(ROOT / "scripts" / "run-tests.sh"), *args], env=env, capture_output=True,
                          text=True, timeout=60)


@pytest.mark.parametrize(("rest_rc", "slow_rc", "slow2_rc", "want"),
                         [(0, 0, 0, 0), (0, 1, 0, 1), (0, 0, 3, 3), (2, 0, 0, 2), (0, 5, 0, 5), (1, 3, 4, 1)])
def test_the_rest_and_both_slow_shards_run_and_any_failure_fails(tmp_path, rest_rc, slow_rc, slow2_rc, want):
    out = run(tmp_path, rest_rc, slow_rc, slow2_rc=slow2_rc)
    assert out.returncode == want, out.stdout + out.stderr
    calls = sorted((tmp_path / "calls").read_text().splitlines())
    assert len(calls) == 3
    assert calls[0].startswith("-m not slow --durations=25 --basetemp=")
    assert calls[1].startswith("-m slow --shard 1/2 --durations=25 --basetemp=")
    assert calls[2].startswith("-m slow --shard 2/2 --durations=25 --basetemp=")
    temps = {c.split("--basetemp=")[1] for c in calls}
    assert len(temps) == 3 and all(t.startswith(str(tmp_path)) for t in temps)
    assert "slow part 1 output" in out.stdout and "slow part 2 output" in out.stdout  # both logs are shown


def test_reports_directory_gives_each_part_its_junit_file(tmp_path, monkeypatch):
    monkeypatch.setenv("DEO_TEST_REPORTS", str(tmp_path / "reports"))
    out = run(tmp_path, 0, 0)
    assert out.returncode == 0, out.stdout + out.stderr
    calls = sorted((tmp_path / "calls").read_text().splitlines())
    wanted = [f"--junitxml={tmp_path / 'reports'}/{part}.xml" for part in ("rest", "slow1", "slow2")]
    assert [c.split()[-1] for c in calls] == wanted
    assert (tmp_path / "reports").is_dir()


def test_arguments_run_one_ordinary_pytest(tmp_path):
    out = run(tmp_path, 4, 0, "-k", "foo")
    assert out.returncode == 4
    assert (tmp_path / "calls").read_text().splitlines() == ["-k foo"]
