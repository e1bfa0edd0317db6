"""Node-local files on a two-host standalone cluster: option ``hosts``, planned and read on each host.

Two Spark workers bind to 127.0.0.1 and 127.0.0.2 — two "hosts" for Spark's scheduler. Each runs in
its own mount namespace (``unshare -m``, as root) where its own directory is bind-mounted at the
same path, so the two hosts see *different* files at the same path and the driver sees none there:
every byte must be planned and read on its host. The driver runs in a subprocess
(``files_cluster_job.py``; one SparkContext per process).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from pyspark.streaming import StreamingContext

from dstream_exactly_once import ConfigurationError, FileUtils
from dstream_exactly_once.core._tasks import TaskOptions
from dstream_exactly_once.files import FileRange, FileRangeReader
from dstream_exactly_once.files._hosts import HostCheckedReader
from dstream_exactly_once.files.spark._utils import FileRDD, _file_rdd
from dstream_exactly_once.stores import open_store
from dstream_exactly_once.streaming._pinned import pinned_rdd, preferred_locations
from dstream_exactly_once.testing import LocalSparkCluster
from dstream_exactly_once.testing._process import ManagedProcess, free_port, wait_until
from dstream_exactly_once.testing._spark import spark_env, spark_home

from ..helpers import eventually

JOB = Path(__file__).with_name("files_cluster_job.py")
HOSTS = {"A": "127.0.0.1", "B": "127.0.0.2"}
MOUNT = "mount --bind \"$1\" \"$2\" && shift 2 && exec \"$@\""


def _append(path: Path, tag: str, numbers: range) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write("".join(f"{tag}-{n}\n" for n in numbers))


def _committed_lines(url: str, app: str) -> int:
    """Distinct lines the job has committed so far (read-only)."""
    with open_store(url, app) as store:
        return len(store.get_values("lines"))


def _worker(master_url: str, host: str, source: Path, mount_point: Path) -> ManagedProcess:
    w = ManagedProcess(f"files-worker-{host}")
    env = {**spark_env(), "SPARK_NO_DAEMONIZE": "1", "SPARK_LOCAL_IP": host,
           "SPARK_WORKER_DIR": str(w.workdir / "work")}
    w.spawn(["unshare", "-m", "--propagation", "private", "sh", "-c", MOUNT, "sh", str(source), str(mount_point),
             str(spark_home() / "bin" / "spark-class"), "org.apache.spark.deploy.worker.Worker",
             "--host", host, "--cores", "1", "--memory", "1g", "--webui-port", str(free_port()),
             "--work-dir", str(w.workdir / "work"), master_url], env=env)
    return w


def test_pinned_rdd_has_the_preferred_locations(sc):
    rdd = pinned_rdd(sc, [({"i": 0}, ["127.0.0.1"]), ({"i": 1}, ["127.0.0.2", "node3"]), ({"i": 2}, [])])
    assert rdd.getNumPartitions() == 3
    assert preferred_locations(rdd) == [["127.0.0.1"], ["127.0.0.2", "node3"], []]
    assert rdd.mapPartitionsWithIndex(lambda i, it: [(i, x) for x in it]).collect() == [
        (0, {"i": 0}), (1, {"i": 1}), (2, {"i": 2})]  # one pickled value per partition, in order


def test_file_rdd_prefers_each_range_host_and_a_misplaced_task_fails(sc, tmp_path):
    log = tmp_path / "a.log"
    log.write_text("1\n2\n")
    st = log.stat()
    here = FileRange("f1", str(log), 0, 4, dev=st.st_dev, inode=st.st_ino, host="127.0.0.1")
    reader = HostCheckedReader(FileRangeReader(f"{tmp_path}/*.log"))
    rdd = _file_rdd(sc, [here], reader, TaskOptions())
    assert isinstance(rdd, FileRDD) and rdd.offsetRanges() == [here]
    assert preferred_locations(rdd.map(lambda x: x)) == [["127.0.0.1"]]  # what the scheduler follows
    assert rdd.collect() == ["1", "2"]  # local mode: the executor is on 127.0.0.1 (SPARK_LOCAL_IP)
    elsewhere = FileRange("f1", str(log), 0, 4, dev=st.st_dev, inode=st.st_ino, host="10.255.0.1")
    with pytest.raises(Exception, match=r"must run on host '10\.255\.0\.1'.*runs on \['127\.0\.0\.1'\]"):
        _file_rdd(sc, [elsewhere], reader, TaskOptions()).collect()
    no_host = FileRange("f1", str(log), 0, 4)
    assert preferred_locations(_file_rdd(sc, [no_host], reader, TaskOptions())) == [[]]


def test_hosts_option_is_checked_before_anything_runs(sc, tmp_path):
    ssc = StreamingContext(sc, 1)
    db = tmp_path / "s.db"
    with pytest.raises(ConfigurationError, match=r"'shared\.filesystem'=true and 'hosts'='n1,n2' contradict"):
        FileUtils.createExactlyOnceFileStream(ssc, f"{tmp_path}/*.log",
                                              {"hosts": "n1,n2", "shared.filesystem": True},
                                              store=f"sqlite:///{db}", app_id="h")
    with pytest.raises(ConfigurationError, match=r"option 'hosts' must name one or more hosts.*got 'n1,,n2'"):
        FileUtils.createDirectFileStream(ssc, f"{tmp_path}/*.log", {"hosts": "n1,,n2"})
    with pytest.raises(ConfigurationError, match=r"option 'spark\.aof\.hosts' must be a comma-separated"):
        FileUtils.createExactlyOnceFileStream(ssc, f"{tmp_path}/*.log", {"spark.aof.hosts": 5},
                                              store=f"sqlite:///{db}", app_id="h")
    assert not db.exists()


@pytest.mark.slow
def test_node_local_files_on_two_hosts_counted_exactly_once(tmp_path, monkeypatch):
    began = time.monotonic()
    monkeypatch.setenv("SPARK_DAEMON_JAVA_OPTS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
    mount_point = tmp_path / "node-logs"  # empty for the driver; each worker mounts its host's dir here
    mount_point.mkdir()
    sources = {tag: tmp_path / f"host-{tag}" for tag in HOSTS}
    for tag, d in sources.items():
        d.mkdir()
        _append(d / "service.log", tag, range(0, 150))
        _append(d / "other.log", tag, range(1000, 1050))
    expected = {f"{tag}-{n}" for tag in HOSTS for n in [*range(0, 300), *range(1000, 1050)]}
    url, app = f"sqlite:///{tmp_path}/files.db", f"files-cluster-{uuid.uuid4().hex[:6]}"

    cluster = LocalSparkCluster(workers=0)
    workers = []
    driver = None
    try:
        cluster.start(timeout=60)
        workers = [_worker(cluster.master_url, host, sources[tag], mount_point) for tag, host in HOSTS.items()]
        for w in workers:
            wait_until(lambda w=w: "Successfully registered with master" in w.log_path.read_text(errors="replace"),
                       timeout=60, what=w.name, proc=w.proc, log=w.log_path)
        driver = subprocess.Popen([sys.executable, str(JOB), cluster.master_url, url, app,
                                   f"{mount_point}/*.log", ",".join(HOSTS.values()), str(len(expected))],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        # the files grow while the stream runs: after it has committed every line written so far
        eventually(lambda: _committed_lines(url, app) >= len(HOSTS) * 200, "the first 200 lines of each host", 120,
                   proc=driver, detail=lambda: driver.stderr.read() if driver.poll() is not None else "",
                   ignore=(Exception,))  # the store exists once the driver took its first epoch
        for tag, d in sources.items():
            _append(d / "service.log", tag, range(150, 300))
        out, err = driver.communicate(timeout=max(10.0, 170 - (time.monotonic() - began)))
    finally:
        if driver is not None and driver.poll() is None:
            os.killpg(driver.pid, 9)
            driver.wait(10)
        for w in workers:
            w.stop()
        cluster.stop()
    lines = [line for line in out.splitlines() if line.startswith("RESULT ")]
    assert driver.returncode == 0 and lines, f"driver failed ({driver.returncode}):\n{out[-3000:]}\n{err[-5000:]}"
    result = json.loads(lines[-1][len("RESULT "):])
    with open_store(url, app) as store:
        counted = store.get_values("lines")
        readers = store.get_values("readers")
    assert set(counted) == expected and set(counted.values()) == {1}, "every line of both hosts exactly once"
    # each host's lines were read by that host's executor, none by the other
    assert readers == {"A@127.0.0.1": 350, "B@127.0.0.2": 350}, readers
    assert result["hosts"] == list(HOSTS.values())
    assert result["counters"]["losses"] == 0
    tracked = result["tracked"]
    assert len(tracked) == 4 and {p for _, p, _ in tracked.values()} == {f"{mount_point}/service.log",
                                                                        f"{mount_point}/other.log"}
    assert time.monotonic() - began < 180
