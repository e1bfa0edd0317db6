"""The exactly-once stream on a real Spark standalone cluster (master + two worker JVMs), both
output patterns, under the failures a cluster has: an executor JVM SIGKILLed while it is inside a
batch, a worker (machine) lost and restarted, the driver SIGKILLed and restarted by a supervisor.

Driver recovery "the Spark way" (``spark-submit --deploy-mode cluster --supervise``) is refused by
Spark for Python applications on standalone clusters; the test checks that refusal and then does
what ``--supervise`` would: a supervisor loop restarts the killed driver, which resumes from the
store. Every process started here is stopped in ``finally`` blocks.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

import pytest

from dstream_exactly_once.kafka._offsets import TopicAndPartition
from dstream_exactly_once.stores import open_store
from dstream_exactly_once.teaching._pipeline import verify
from dstream_exactly_once.testing import LocalSparkCluster
from dstream_exactly_once.testing._spark import spark_home

from ..helpers import eventually

pytestmark = pytest.mark.slow

JOB = Path(__file__).with_name("cluster_eo_job.py")
FAST_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
ROOT = str(Path(__file__).resolve().parents[2])


class Supervisor:
    """Keeps one driver of ``cluster_eo_job.py`` running, like ``--supervise``: restarts it when it dies."""

    def __init__(self, argv: List[str], logdir: Path) -> None:
        self.argv = argv
        self.logdir = logdir
        self.proc: Optional[subprocess.Popen] = None
        self.starts = 0

    def ensure_running(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            self.starts += 1
            log = open(self.logdir / f"driver{self.starts}.log", "w")
            env = {**os.environ, "PYTHONUNBUFFERED": "1",
                   "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
                   "PYSPARK_SUBMIT_ARGS": f"--driver-java-options '{FAST_JVM}' pyspark-shell"}
            self.proc = subprocess.Popen([sys.executable, str(JOB), *self.argv], stdout=log, stderr=subprocess.STDOUT,
                                         env=env, start_new_session=True)
            log.close()

    def kill(self) -> None:
        """SIGKILL the driver's whole session (the Python driver and its JVM)."""
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(30)

    def log(self) -> str:
        return "\n".join(p.read_text(errors="replace")[-3000:] for p in sorted(self.logdir.glob("driver*.log")))


def committed(store_url: str, app: str) -> int:
    with open_store(store_url, app) as store:
        last = store.last_committed_batch_id()
    return -1 if last is None else last


def offsets(store_url: str, app: str) -> Dict[TopicAndPartition, int]:
    with open_store(store_url, app) as store:
        return store.load_offsets()


def caught_up(store_url: str, app: str, target: Dict[TopicAndPartition, int]) -> bool:
    """At ``target`` with every batch committed whole: per-partition commits move the positions before
    the driver marks their batch committed in the commit log."""
    with open_store(store_url, app) as store:
        return store.load_offsets() == target and store.pending_batches() == []


def test_python_cluster_deploy_mode_is_refused_on_standalone(tmp_path):
    """Why the test below supervises the driver itself: Spark's own check, not ours (no cluster needed)."""
    env = {**os.environ, "SPARK_SUBMIT_OPTS": FAST_JVM}
    out = subprocess.run([str(spark_home() / "bin" / "spark-submit"), "--master", "spark://127.0.0.1:7",
                          "--deploy-mode", "cluster", "--supervise", str(JOB)],
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode != 0
    assert ("Cluster deploy mode is currently not supported for python applications on standalone clusters"
            in out.stdout + out.stderr), out.stderr[-2000:]


def test_exactly_once_on_standalone_cluster_survives_executor_worker_and_driver_kills(
        kafka, topic_name, tmp_path, monkeypatch):
    began = time.monotonic()
    monkeypatch.setenv("SPARK_DAEMON_JAVA_OPTS", FAST_JVM)
    kafka.create_topic(topic_name, 2)
    first = 1200  # 30 batches of 2 x 20 records; more are produced after the first two faults
    kafka.produce(topic_name, range(1, first + 1), partitions=2)
    store = f"sqlite:///{tmp_path / 'state.db'}"
    apps = ["cl-batch", "cl-partition"]
    control = tmp_path / "control"
    control.mkdir()
    cluster = LocalSparkCluster(workers=2, cores_per_worker=1, memory_per_worker="1g")
    sup = Supervisor([cluster.master_url, kafka.bootstrap, topic_name, store, "cl", str(control)], tmp_path)
    try:
        cluster.start(timeout=60)
        sup.argv[0] = cluster.master_url  # the real port is known after start
        sup.ensure_running()
        alive = {"each": sup.ensure_running, "detail": sup.log}  # restart the driver, show its log
        eventually(lambda: all(committed(store, a) >= 1 for a in apps), "the first commits", 120, **alive)

        # 1. an executor JVM SIGKILLed while one of its tasks is inside a batch
        (control / "hold").touch()
        eventually(lambda: any(control.glob("inside-*")), "a task inside a batch", 60, **alive)
        victim = int(next(control.glob("inside-*")).name.split("-")[1])
        assert victim in cluster.executor_pids()
        os.kill(victim, signal.SIGKILL)
        (control / "hold").unlink()
        mark = {a: committed(store, a) for a in apps}
        eventually(lambda: all(committed(store, a) >= mark[a] + 2 for a in apps),
                   "commits after the executor kill", 90, **alive)
        assert victim not in cluster.executor_pids()

        # 2. a worker lost (its JVM and executors SIGKILLed) and restarted
        lost = cluster.kill_worker(1)
        mark = {a: committed(store, a) for a in apps}
        eventually(lambda: all(committed(store, a) >= mark[a] + 1 for a in apps),
                   "commits with one worker", 90, **alive)
        new_worker = cluster.restart_worker(1)
        assert new_worker != lost and new_worker in cluster.worker_pids()
        kafka.produce(topic_name, range(first + 1, 2 * first + 1), partitions=2)
        eventually(lambda: any(_parent(e) == new_worker for e in cluster.executor_pids()),
                   "an executor on the restarted worker", 90, **alive)

        # 3. the driver SIGKILLed mid-stream; the supervisor restarts it and it resumes from the store
        mark = {a: committed(store, a) for a in apps}
        eventually(lambda: all(committed(store, a) >= mark[a] + 1 for a in apps),
                   "commits before the kill", 90, **alive)
        sup.kill()
        target = {TopicAndPartition(topic_name, p): late for p, (_early, late) in kafka.offsets(topic_name).items()}
        assert any(offsets(store, a) != target for a in apps), "the driver was killed after the end: no recovery"
        eventually(lambda: all(caught_up(store, a, target) for a in apps), "both apps to catch up", 150, **alive)
        assert sup.starts == 2
    finally:
        sup.kill()
        cluster.stop()

    n = 2 * first
    assert verify(store, "cl-batch", n, "batch") == []
    assert verify(store, "cl-partition", n, "partition") == []
    assert "pending=" in sup.log()
    assert time.monotonic() - began < 240


def _parent(pid: int) -> int:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return -1
    return int(stat[stat.rindex(")") + 2:].split()[1])
