"""The three ways docs/deploy.md ships the package to executors, each run as the page writes it on a
standalone cluster (a master and two worker JVMs, two "hosts"): the ``<!-- test: deploy-… -->`` blocks
are taken from the page and run with bash, with only the master URL, the broker and the topic replaced.

Driver and executors run a Python in which the package is NOT installed (a fresh virtualenv, no
PYTHONPATH), unless the route itself installs it: a route that does not really ship the package fails
with ``ModuleNotFoundError`` on the driver or in every task. Each route runs the exactly-once word count
over a bounded input, is stopped with SIGTERM (graceful: the batch in flight commits) and must have
counted every word exactly once in its SQLite store.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Dict, Iterator

import pytest

from dstream_exactly_once import __version__, open_store
from dstream_exactly_once.testing import LocalSparkCluster
from dstream_exactly_once.testing._spark import spark_home

from .. import docblocks
from ..helpers import eventually
from .faults import kill_group

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "examples" / "exactly_once_wordcount.py"
FAST_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
TEXT = ["to be or not to be"] * 40 + ["that is the question"] * 25
RUN_TIMEOUT_S = 300.0  # pip installs, the driver's JVM and the first batches on a busy 2-core machine


def user_env(**extra: str) -> Dict[str, str]:
    """A user's shell: no PYTHONPATH into the checkout, loopback networking, quick JVMs."""
    env = {k: v for k, v in os.environ.items()
           if k not in {"PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYSPARK_SUBMIT_ARGS"}}
    env.update({"SPARK_LOCAL_IP": "127.0.0.1", "PYTHONUNBUFFERED": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1",
                "PIP_NO_COMPILE": "1", "SPARK_SUBMIT_OPTS": FAST_JVM, "SPARK_HOME": str(spark_home())})
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalSparkCluster]:
    """Two workers whose executors see no PYTHONPATH of this checkout (they inherit the worker's environment)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("PYTHONPATH", raising=False)
        mp.setenv("SPARK_DAEMON_JAVA_OPTS", FAST_JVM)
        spark = LocalSparkCluster(workers=2, cores_per_worker=1, memory_per_worker="1g")
        spark.start(timeout=90)
    try:
        yield spark
    finally:
        spark.stop()


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``make dist`` (the page's first block), written to a temporary directory instead of ./dist."""
    (block,) = docblocks.named("deploy-dist")
    assert block.text.split("#")[0].strip() == "make dist", block.text
    out = tmp_path_factory.mktemp("dist") / "dist"
    done = subprocess.run(["make", "-C", str(ROOT), "dist", f"DIST={out}"], capture_output=True, text=True,
                          timeout=300, env=user_env())
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    names = sorted(p.name for p in out.iterdir())
    assert names == [f"dstream_exactly_once-{__version__}-py3-none-any.whl", f"dstream_exactly_once-{__version__}.zip"]
    return out


def bare_python(where: Path) -> Path:
    """A fresh virtualenv without the package: importing it must fail there."""
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True, capture_output=True, timeout=120)
    python = where / "bin" / "python"
    probe = subprocess.run([str(python), "-c", "import dstream_exactly_once"], capture_output=True, text=True,
                           env=user_env(), cwd=where.parent)
    assert probe.returncode != 0 and "No module named 'dstream_exactly_once'" in probe.stderr, probe.stderr
    return python


def driver_pid(session: int) -> int:
    """The Python driver spark-submit started in ``session`` (the one running app.py), 0 if none yet."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.getpgid(int(entry.name)) != session:
                continue
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, ProcessLookupError):
            continue
        if any(a.endswith(b"app.py") for a in argv) and b"org.apache.spark.deploy.SparkSubmit" not in argv:
            return int(entry.name)
    return 0


def run_route(name: str, work: Path, cluster: LocalSparkCluster, kafka, topic: str, dist: Path,
              env: Dict[str, str]) -> str:
    """Run the page's ``<!-- test: name -->`` block in ``work`` until the input is counted; stop it; check totals."""
    (block,) = docblocks.named(name)
    assert f"-{__version__}" in block.text, f"{block.where}: the commands name another version than {__version__}"
    script = docblocks.substitute(block.text, {"spark://master:7077": cluster.master_url,
                                               "broker:9092 events ": f"{kafka.bootstrap} {topic} "})
    work.mkdir()
    shutil.copytree(dist, work / "dist")
    shutil.copy2(APP, work / "app.py")
    (work / "route.sh").write_text("set -euo pipefail\n" + script)
    kafka.create_topic(topic, 2)
    kafka.produce(topic, TEXT, partitions=2)
    expected = Counter(" ".join(TEXT).split())
    db, url = work / "wordcount.db", f"sqlite:///{work / 'wordcount.db'}"
    log = work / "route.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(["bash", "route.sh"], cwd=work, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        def counted_all() -> bool:
            if not db.exists():  # the app creates it
                return False
            with open_store(url, "wordcount") as store:
                return sum(store.get_values("words").values()) >= sum(expected.values())

        eventually(counted_all, f"the {name} route's word counts", RUN_TIMEOUT_S, interval=1.0, proc=proc,
                   detail=lambda: log.read_text(errors="replace")[-6000:])
        pid = eventually(lambda: driver_pid(proc.pid), "the Python driver", 30)
        os.kill(pid, signal.SIGTERM)  # graceful stop: the app exits 0, so does spark-submit
        assert proc.wait(120) == 0, log.read_text(errors="replace")[-6000:]
    finally:
        kill_group(proc)
    with open_store(url, "wordcount") as store:
        assert Counter(store.get_values("words")) == expected
        assert store.pending_batches() == []
    output = log.read_text(errors="replace")
    assert "ModuleNotFoundError" not in output, output[-6000:]
    return output


def test_pyfiles_zip_on_a_cluster_whose_python_lacks_the_package(cluster, dist, kafka, topic_name, tmp_path):
    began = time.monotonic()
    python = bare_python(tmp_path / "node-python")
    env = user_env(PYSPARK_PYTHON=str(python), PATH=f"{python.parent}{os.pathsep}{os.environ['PATH']}")
    run_route("deploy-pyfiles", tmp_path / "job", cluster, kafka, topic_name, dist, env)
    print(f"--py-files route: {time.monotonic() - began:.0f}s")


def test_packed_virtualenv_through_archives(cluster, dist, kafka, topic_name, tmp_path):
    began = time.monotonic()
    # `python` of the page: the interpreter the nodes have at the same path (venv-pack does not copy it)
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "python").symlink_to(sys.executable)
    env = user_env(PATH=f"{shim}{os.pathsep}{os.environ['PATH']}")
    run_route("deploy-archives", tmp_path / "job", cluster, kafka, topic_name, dist, env)
    assert (tmp_path / "job" / "env.tar.gz").stat().st_size > 0
    print(f"--archives route: {time.monotonic() - began:.0f}s")


def test_installed_on_every_node(cluster, dist, kafka, topic_name, tmp_path):
    began = time.monotonic()
    python = bare_python(tmp_path / "node-python")  # `pip` of the page installs into it
    env = user_env(PYSPARK_PYTHON=str(python), PATH=f"{python.parent}{os.pathsep}{os.environ['PATH']}")
    run_route("deploy-installed", tmp_path / "job", cluster, kafka, topic_name, dist, env)
    where = subprocess.run([str(python), "-c", "import dstream_exactly_once as d; print(d.__file__)"],
                           capture_output=True, text=True, env=user_env(), cwd=tmp_path)
    assert Path(where.stdout.strip()).is_relative_to(tmp_path / "node-python"), where.stdout + where.stderr
    print(f"installed route: {time.monotonic() - began:.0f}s")
