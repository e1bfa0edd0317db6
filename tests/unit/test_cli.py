"""``dstream-eo``: program name, ``--version``, one-line usage errors with status 2, no pyspark needed.

Every test runs a real subprocess; ``sys.modules['pyspark'] = None`` makes any pyspark import fail,
as on a machine where pyspark is not installed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

from dstream_exactly_once import __version__

ROOT = str(Path(__file__).resolve().parents[2])
NO_SPARK = "import sys; sys.modules['pyspark'] = None; "
CONSOLE = NO_SPARK + "sys.argv[0] = 'dstream-eo'; from dstream_exactly_once.cli import main; sys.exit(main())"


def run(args: List[str], timeout: float = 60) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=ROOT, env=env,
                          timeout=timeout)


def console(*args: str) -> subprocess.CompletedProcess:
    """The ``dstream-eo`` console script (setup.py: ``dstream_exactly_once.cli:main``), pyspark blocked."""
    return run(["-c", CONSOLE, *args])


def test_help_names_the_program_and_needs_no_pyspark():
    out = console("--help")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage: dstream-eo "), out.stdout
    assert "demo" in out.stdout and "--version" in out.stdout
    assert out.stderr == ""


def test_demo_help_lists_the_ranges():
    out = console("demo", "--help")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage: dstream-eo demo "), out.stdout
    assert "N >= 1" in out.stdout


def test_version():
    out = console("--version")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"dstream-eo {__version__}"


def test_python_dash_m_package_runs_the_cli():
    out = run(["-m", "dstream_exactly_once", "--version"])
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"python -m dstream_exactly_once {__version__}"
    out = run(["-m", "dstream_exactly_once", "demo", "--n", "0"])
    assert out.returncode == 2 and "--n" in out.stderr and "'0'" in out.stderr, out.stderr


@pytest.mark.parametrize(("args", "words"), [
    (["demo", "--n", "0"], ["argument --n", "integer >= 1", "'0'"]),
    (["demo", "--n", "-5"], ["argument --n", "integer >= 1", "'-5'"]),
    (["demo", "--n", "ten"], ["argument --n", "integer >= 1", "'ten'"]),
    (["demo", "--crashes", "-1"], ["argument --crashes", "integer >= 0", "'-1'"]),
    (["demo", "--rate", "0"], ["argument --rate", "integer >= 1", "'0'"]),
    (["demo", "--seed", "x"], ["argument --seed", "'x'"]),
    (["demo", "--bogus"], ["unrecognized arguments: --bogus"]),
    (["bogus"], ["invalid choice: 'bogus'", "demo"]),
    ([], ["required", "COMMAND"]),
])
def test_usage_errors_are_one_line_and_exit_2(args, words):
    """Refused before anything starts (``--n 0`` used to loop forever): one line, no traceback."""
    out = console(*args)
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert out.stdout == ""
    lines = out.stderr.splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("dstream-eo"), lines[0]
    assert "error:" in lines[0] and "Traceback" not in out.stderr
    for word in words:
        assert word in lines[0], lines[0]


@pytest.mark.parametrize(("option", "value", "allowed"), [
    ("--crash-prob", "1.5", "[0, 1]"),
    ("--crash-prob", "nan", "[0, 1]"),
    ("--rate", "0", "integer >= 1"),
    ("--batch-seconds", "0", "integer >= 1"),
    ("--topic", "", "non-empty"),
])
def test_pipeline_usage_errors(option, value, allowed):
    base = {"--bootstrap": "localhost:1", "--topic": "t", "--store": "sqlite:///x.db", "--app-id": "a"}
    base[option] = value
    argv = ["pipeline"] + [x for kv in base.items() for x in kv]
    out = run(["-c", NO_SPARK + "from dstream_exactly_once.demo import main; sys.exit(main())", *argv])
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert len(out.stderr.splitlines()) == 1 and allowed in out.stderr and repr(value) in out.stderr, out.stderr


def test_core_imports_work_without_pyspark():
    code = NO_SPARK + ("import dstream_exactly_once.stores; "
                       "from dstream_exactly_once import OffsetRange, open_store, Writes; "
                       "print(OffsetRange('t', 0, 1, 2).count(), callable(open_store), Writes.__name__)")
    out = run(["-c", code])
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1", "True", "Writes"]


def test_spark_names_fail_clearly_without_pyspark():
    """The lazy Spark names are the only part that needs pyspark (proves the block is effective)."""
    out = run(["-c", NO_SPARK + "from dstream_exactly_once import KafkaUtils"])
    assert out.returncode != 0 and "pyspark" in out.stderr


def test_batches_skip_arguments_and_the_listing_without_a_store(tmp_path: Path) -> None:
    out = console("batches")
    assert out.returncode == 2 and "--store, --app" in out.stderr and out.stderr.count("\n") == 1, out.stderr
    out = console("batches", "skip", "--store", f"sqlite:///{tmp_path}/x.db", "--app", "a")
    assert out.returncode == 2 and "--batch" in out.stderr, out.stderr
    out = console("batches", "skip", "--store", f"sqlite:///{tmp_path}/x.db", "--app", "a", "--batch", "-1")
    assert out.returncode == 2 and "'-1'" in out.stderr, out.stderr
    out = console("batches", "skip", "--help")
    assert out.returncode == 0 and "--execute" in out.stdout and "--reason" in out.stdout
    # nothing matched: one line naming the batch and the pending ids (none), and no file created
    out = console("batches", "skip", "--store", f"sqlite:///{tmp_path}/x.db", "--app", "a", "--batch", "3",
                  "--execute", "--force")
    assert out.returncode == 1 and "batch 3 is not in the offset log" in out.stderr and "none" in out.stderr
    assert out.stderr.count("\n") == 1 and list(tmp_path.iterdir()) == []
