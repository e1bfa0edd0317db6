"""The exactly-once word count example on YARN: Hadoop's mini-cluster (ResourceManager +
NodeManager from Maven Central jars, no HDFS), ``--master yarn --deploy-mode client``, the package
shipped to the containers with ``--py-files``, a SQLite store on the driver.

The first driver is SIGKILLed after its first committed batch, more lines are produced while it is
down, and a second driver (a second YARN application) resumes from the store: the counts are
exact and the stored offsets are Kafka's end offsets. Every process started here is stopped in
``finally`` blocks.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Dict, List

import pytest

from dstream_exactly_once.kafka._offsets import TopicAndPartition
from dstream_exactly_once.stores import open_store
from dstream_exactly_once.testing import LocalKafka, LocalYarnCluster

from ..helpers import eventually

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "exactly_once_wordcount.py"
APP_NAME = "ExactlyOnceWordCount"  # the example's appName
WAIT_S = 120.0


def package_zip(dest: Path) -> Path:
    """``dstream_exactly_once`` as a zip for ``--py-files`` (what a user ships without installing)."""
    with zipfile.ZipFile(dest, "w") as zf:
        for path in sorted((ROOT / "dstream_exactly_once").rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                zf.write(path, path.relative_to(ROOT))
    return dest


def start_driver(yarn: LocalYarnCluster, py_files: Path, log: Path, *args: str) -> subprocess.Popen:
    """``python examples/exactly_once_wordcount.py …`` with PySpark submitting to YARN (client mode)."""
    conf = {**yarn.spark_conf(executors=1), "spark.pyspark.python": sys.executable,
            "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}
    submit = ["--master", "yarn", "--deploy-mode", "client", "--py-files", str(py_files),
              "--driver-java-options", "'-XX:TieredStopAtLevel=1 -XX:+UseSerialGC'"]
    for k, v in conf.items():
        submit += ["--conf", f"{k}={v}"]
    paths = [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env = {**os.environ, **yarn.env(), "PYTHONUNBUFFERED": "1", "PYTHONPATH": os.pathsep.join(paths),
           "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
           "PYSPARK_SUBMIT_ARGS": " ".join(submit + ["pyspark-shell"])}
    with open(log, "w") as out:
        return subprocess.Popen([sys.executable, str(EXAMPLE), *args], stdout=out, stderr=subprocess.STDOUT,
                                env=env, cwd=str(log.parent), start_new_session=True)


def counts(store_url: str, app: str) -> Dict[str, int]:
    with open_store(store_url, app) as store:
        return dict(store.get_values("words"))


def tail(log: Path, chars: int = 4000) -> str:
    return log.read_text(errors="replace")[-chars:] if log.exists() else ""


def kill_session(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass
    proc.wait(60)


def test_exactly_once_wordcount_on_yarn_survives_a_driver_kill(kafka: LocalKafka, topic_name: str, app_id: str,
                                                               tmp_path: Path) -> None:
    store_url = f"sqlite:///{tmp_path / 'wordcount.db'}"
    kafka.create_topic(topic_name, partitions=2)
    kafka.produce(topic_name, ["alpha beta beta"] * 300, partitions=2)
    py_files = package_zip(tmp_path / "dstream_exactly_once.zip")
    args = (kafka.bootstrap, topic_name, store_url, app_id)
    drivers: List[subprocess.Popen] = []
    yarn = LocalYarnCluster(nodemanager_memory_mb=4096)
    try:
        yarn.start()
        first_log = tmp_path / "driver1.log"
        drivers.append(start_driver(yarn, py_files, first_log, *args))
        eventually(lambda: counts(store_url, app_id).get("beta") == 600, "the first batch committed",
                   WAIT_S, interval=1.0, proc=drivers[0], detail=lambda: tail(first_log),
                   ignore=(Exception,))  # the store is created by the first commit
        kill_session(drivers[0], signal.SIGKILL)  # the Python driver and its JVM, mid-stream

        kafka.produce(topic_name, ["gamma alpha"] * 50, partitions=2)
        second_log = tmp_path / "driver2.log"
        drivers.append(start_driver(yarn, py_files, second_log, *args))
        eventually(lambda: counts(store_url, app_id).get("gamma") == 50, "the lines produced during the outage counted",
                   WAIT_S, interval=1.0, proc=drivers[1], detail=lambda: tail(second_log),
                   ignore=(Exception,))  # the store is created by the first commit
        drivers[1].send_signal(signal.SIGTERM)  # graceful: the batch in flight commits, exit 0
        assert drivers[1].wait(90) == 0, tail(second_log)

        assert counts(store_url, app_id) == {"alpha": 350, "beta": 600, "gamma": 50}
        with open_store(store_url, app_id) as store:
            stored = store.load_offsets()
        ends = {TopicAndPartition(topic_name, p): latest for p, (_, latest) in kafka.offsets(topic_name).items()}
        assert stored == ends and sum(ends.values()) == 350
        ran = [a for a in yarn.applications() if a["name"] == APP_NAME]
        assert len(ran) == 2, yarn.applications()  # both drivers really ran on YARN
    finally:
        for proc in drivers:
            if proc.poll() is None:
                kill_session(proc, signal.SIGKILL)
        yarn.stop()
