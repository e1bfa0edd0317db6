"""scripts/run-tests.sh (`make test`'s pytest step): both halves run, each with its own --basetemp, and
either one failing fails the run. A stub stands in for ``python -m pytest``."""

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
  *"-m slow"*) echo "slow half output"; exit "$SLOW_RC";;
  *) exit "$REST_RC";;
esac
"""


def run(tmp_path: Path, rest_rc: int, slow_rc: int, *args: str) -> subprocess.CompletedProcess[str]:
    stub = tmp_path / "python"
    stub.write_text(STUB)
    stub.chmod(0o755)
    env = {**os.environ, "PYTHON": str(stub), "CALLS": str(tmp_path / "calls"), "TMPDIR": str(tmp_path),
           "REST_RC": str(rest_rc), "SLOW_RC": str(slow_rc)}
    return subprocess.run(["bash", str(ROOT / "scripts" / "run-tests.sh"), *args], env=env, capture_output=True,
                          text=True, timeout=60)


@pytest.mark.parametrize(("rest_rc", "slow_rc", "want"), [(0, 0, 0), (0, 1, 1), (2, 0, 2), (0, 5, 5), (1, 3, 1)])
def test_both_halves_run_and_either_failure_fails(tmp_path, rest_rc, slow_rc, want):
    out = run(tmp_path, rest_rc, slow_rc)
    assert out.returncode == want, out.stdout + out.stderr
    calls = sorted((tmp_path / "calls").read_text().splitlines())
    assert len(calls) == 2
    assert calls[0].startswith("-m not slow --durations=25 --basetemp=")
    assert calls[1].startswith("-m slow --durations=25 --basetemp=")
    temps = {c.split("--basetemp=")[1] for c in calls}
    assert len(temps) == 2 and all(t.startswith(str(tmp_path)) for t in temps)
    assert "slow half output" in out.stdout  # the slow half's log is shown


def test_arguments_run_one_ordinary_pytest(tmp_path):
    out = run(tmp_path, 4, 0, "-k", "foo")
    assert out.returncode == 4
    assert (tmp_path / "calls").read_text().splitlines() == ["-k foo"]
