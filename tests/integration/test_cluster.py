"""KafkaUtils.createRDD on a real Spark standalone cluster: master + 2 workers, separate JVMs.

The session ``sc`` fixture may already hold a local SparkContext in this process and PySpark
allows one per process, so the driver runs in a subprocess (``cluster_job.py``) that prints JSON.
Everything started here (master, workers, executors, the driver and its JVM) is stopped in
``finally`` blocks, also when the test fails or times out.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Callable

import pytest

from dstream_exactly_once.testing import LocalSparkCluster

from ..helpers import eventually

pytestmark = pytest.mark.slow

JOB = Path(__file__).with_name("cluster_job.py")
BUDGET_S = 90.0


def run_driver(argv: list[str], timeout: float, sample: Callable[[], None]) -> subprocess.CompletedProcess[str]:
    """Run the driver script in its own session, calling ``sample()`` about every 0.3 s while it
    runs; on timeout kill its whole group (and its JVM)."""
    proc = subprocess.Popen([sys.executable, str(JOB), *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                out, err = proc.communicate(timeout=0.3)  # may be called again after a timeout
                break
            except subprocess.TimeoutExpired:
                if time.monotonic() > deadline:
                    pytest.fail(f"the cluster driver did not finish within {max(timeout, 0):.0f}s "
                                f"(the test's budget is {BUDGET_S:.0f}s)")
                sample()
    finally:
        # Kill the driver's whole session, including a py4j gateway JVM that outlived the driver.
        # After the leader is reaped its id still names the group while members are left, and
        # cannot be a new process' PID then; if /proc shows that PID, it was reused: leave it.
        if proc.poll() is None or not os.path.exists(f"/proc/{proc.pid}"):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        proc.wait(10)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_create_rdd_on_standalone_cluster(kafka, topic_name, monkeypatch):
    began = time.monotonic()
    # Master and workers are short-lived JVMs: C1 only + serial GC halves their start on a busy box
    # (bin/spark-class passes SPARK_DAEMON_JAVA_OPTS to them; the helpers inherit os.environ).
    monkeypatch.setenv("SPARK_DAEMON_JAVA_OPTS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
    kafka.create_topic(topic_name, 3)
    n = 300
    kafka.produce(topic_name, range(n), partitions=3)  # value i -> partition i % 3, offset i // 3
    cluster = LocalSparkCluster(workers=2, cores_per_worker=1, memory_per_worker="1g")
    try:
        cluster.start(timeout=45)
        worker_pids = cluster.worker_pids()
        assert len(worker_pids) == 2
        seen_executors: set[int] = set()
        done = run_driver([cluster.master_url, kafka.bootstrap, topic_name, "3"],
                          timeout=BUDGET_S - (time.monotonic() - began),
                          sample=lambda: seen_executors.update(cluster.executor_pids()))
        # the app is over: the workers end its executors
        eventually(lambda: not cluster.executor_pids(), "the workers to end the app's executors", 10)
        live_executors = cluster.executor_pids()
    finally:
        cluster.stop()
    assert live_executors == []

    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, (
        f"driver failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}")
    result = json.loads(lines[-1][len("RESULT "):])

    assert result["master"] == cluster.master_url
    assert result["ranges"] == [[topic_name, p, 0, n // 3] for p in range(3)]
    records = result["records"]
    coords = Counter((p, o) for p, o, *_ in records)
    assert len(records) == n and set(coords.values()) == {1}, "every offset read exactly once"
    assert sorted(int(v) for _, _, v, *_ in records) == list(range(n))
    assert all(int(v) == 3 * o + p for p, o, v, *_ in records)

    driver_pid = result["driver_pid"]
    python_pids = {r[3] for r in records}
    executor_jvms = {r[4] for r in records}
    launched_by = {r[5] for r in records}
    assert driver_pid not in python_pids and os.getpid() not in python_pids
    assert -1 not in executor_jvms, "a record was not read under an executor JVM"
    assert driver_pid not in executor_jvms
    assert launched_by <= set(worker_pids), "executors must be children of the standalone workers"
    assert executor_jvms <= seen_executors and len(seen_executors) == 2, (executor_jvms, seen_executors)

    # nothing the test started is left running
    def gone(pid: int) -> bool:
        try:
            return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] in ("Z", "X")
        except OSError:
            return True

    leftovers = set(worker_pids) | executor_jvms | python_pids
    eventually(lambda: all(gone(pid) for pid in leftovers), "every worker, executor and Python worker to exit", 10,
               detail=lambda: f"left: {[pid for pid in leftovers if not gone(pid)]}")
    assert time.monotonic() - began < BUDGET_S + 15
