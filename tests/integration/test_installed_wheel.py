"""The wheel as a user gets it: built from the tracked files, installed with the documented extras
``[spark,test]`` into a fresh virtualenv outside the checkout, and run from there with no PYTHONPATH:
the command line answers, the package is the installed one, and the exactly-once example counts a
bounded input exactly against a real broker and a SQLite store."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from dstream_exactly_once import __version__, open_store
from dstream_exactly_once.testing._process import wait_until

from .faults import kill_group

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "exactly_once_wordcount.py"
INSTALL_TIMEOUT_S = 600.0  # the [spark,test] extras on a cold pip cache; about 45 s on a warm one
START_TIMEOUT_S = 240.0  # JVM start + the first batches on a small, busy machine
STOP_TIMEOUT_S = 120.0


def build_wheel(tmp: Path) -> Path:
    """``pip wheel --no-deps`` from a copy of the tracked files (a checkout's leftovers stay out)."""
    src = tmp / "src"
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    for f in tracked.split():
        if (ROOT / f).is_file():
            (src / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / f, src / f)
    out = tmp / "dist"
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(src)],
                          capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S)
    assert proc.returncode == 0, f"pip wheel failed:\n{proc.stderr[-4000:]}"
    (wheel,) = out.glob("*.whl")
    return wheel


def install_into_fresh_venv(venv: Path, wheel: Path) -> Path:
    """A plain virtualenv (no system site-packages) with the wheel and its ``[spark,test]`` extras."""
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True, timeout=120)
    python = venv / "bin" / "python"
    # --no-compile: byte-compiling PySpark's tree takes longer than installing it. The user's environment
    # (no PYTHONPATH) and a cwd outside the checkout: pip would take a checkout it can import, or the
    # egg-info of an editable install there, for the package already installed and install only the
    # dependencies.
    proc = subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-compile", "--disable-pip-version-check",
                           f"{wheel}[spark,test]"], capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S,
                          cwd=venv.parent, env=venv_env(venv))
    assert proc.returncode == 0, f"installing {wheel.name}[spark,test] failed:\n{proc.stderr[-4000:]}"
    assert (venv / "bin" / "dstream-eo").exists(), f"pip installed no dstream-eo script:\n{proc.stdout[-2000:]}"
    return python


def venv_env(venv: Path) -> dict:
    """The environment of a user who activated the virtualenv: no PYTHONPATH, no other Spark."""
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "PYTHONHOME", "SPARK_HOME"}}
    python = str(venv / "bin" / "python")
    env.update({
        "VIRTUAL_ENV": str(venv),
        "PATH": os.pathsep.join([str(venv / "bin"), env.get("PATH", "")]),
        "PYSPARK_PYTHON": python,
        "PYSPARK_DRIVER_PYTHON": python,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYTHONUNBUFFERED": "1",
        "PYSPARK_SUBMIT_ARGS": "--master local[2] --conf spark.ui.enabled=false pyspark-shell",
    })
    return env


def test_installed_wheel_runs_outside_the_checkout(kafka, topic_name, tmp_path):
    wheel = build_wheel(tmp_path / "build")
    assert wheel.name == f"dstream_exactly_once-{__version__}-py3-none-any.whl"
    venv = tmp_path / "venv"
    started = time.monotonic()
    python = install_into_fresh_venv(venv, wheel)
    print(f"venv with {wheel.name}[spark,test] installed in {time.monotonic() - started:.0f}s")
    run_dir = tmp_path / "user"
    run_dir.mkdir()
    assert not run_dir.resolve().is_relative_to(ROOT) and not venv.resolve().is_relative_to(ROOT)
    env = venv_env(venv)

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(args, cwd=run_dir, env=env, capture_output=True, text=True, timeout=120)

    version = run(str(venv / "bin" / "dstream-eo"), "--version")
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip().endswith(__version__) and __version__ == "0.2.0", version.stdout
    demo_help = run(str(venv / "bin" / "dstream-eo"), "demo", "--help")
    assert demo_help.returncode == 0, demo_help.stderr
    assert "usage: dstream-eo demo" in demo_help.stdout
    where = run(str(python), "-c", "import dstream_exactly_once, pyspark, sys; "
                "print(dstream_exactly_once.__file__); print(pyspark.__file__); print(sys.prefix)")
    assert where.returncode == 0, where.stderr
    package_file, pyspark_file, prefix = (Path(line) for line in where.stdout.split())
    assert package_file.is_relative_to(venv) and pyspark_file.is_relative_to(venv), where.stdout
    assert prefix == venv

    # The exactly-once example, copied out of the checkout, over a bounded input it counts exactly.
    script = run_dir / EXAMPLE.name
    shutil.copy2(EXAMPLE, script)
    db = run_dir / "wc.db"
    url = f"sqlite:///{db}"
    kafka.create_topic(topic_name, 2)
    text = ["to be or not to be"] * 40 + ["that is the question"] * 25
    kafka.produce(topic_name, text, partitions=2)
    expected = Counter(" ".join(text).split())
    log = run_dir / "example.log"
    with open(log, "wb") as out:
        example = subprocess.Popen([str(python), str(script), kafka.bootstrap, topic_name, url, "wheel"],
                                   cwd=run_dir, env=env, stdout=out, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    try:
        def counted_all() -> bool:
            if not db.exists():  # not created by the poll: the example makes it
                return False
            with open_store(url, "wheel") as store:
                return sum(store.get_values("words").values()) >= sum(expected.values())

        wait_until(counted_all, timeout=START_TIMEOUT_S, what="the example's word counts", proc=example, log=log,
                   interval=1.0)
        os.kill(example.pid, signal.SIGTERM)  # the driver stops gracefully: the batch in flight commits
        assert example.wait(STOP_TIMEOUT_S) == 0, log.read_text(errors="replace")[-4000:]
    finally:
        kill_group(example)  # whatever is left of its group: python, spark-submit, the JVM
    with open_store(url, "wheel") as store:
        assert Counter(store.get_values("words")) == expected
        assert store.pending_batches() == []
    output = log.read_text(errors="replace")
    assert "batch " in output and "ranges" in output
