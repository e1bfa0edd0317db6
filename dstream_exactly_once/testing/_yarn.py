"""LocalYarnCluster: Hadoop's YARN mini-cluster from Maven Central jars, for ``--master yarn`` tests.

One JVM runs a ResourceManager and NodeManager(s) (``MiniYARNCluster``, started through the
``org.apache.hadoop.mapreduce.MiniHadoopClusterManager`` main class of ``hadoop-minicluster``)
without HDFS: the default file system is the local one, which is enough when the client, the
ApplicationMaster and the executors share one machine. The jars are resolved by Maven through
``jvm/yarn-pom.xml`` at the Hadoop version of the client jars inside the installed PySpark.

The cluster writes its full configuration to ``conf_dir/yarn-site.xml``; point ``HADOOP_CONF_DIR``
there (:meth:`LocalYarnCluster.env`) and submit with the settings of
:meth:`LocalYarnCluster.spark_conf`. Containers run as children of the NodeManager in their own
sessions, under the cluster's work dir; :meth:`LocalYarnCluster.stop` kills what is left of them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import tempfile
import urllib.request
from pathlib import Path
from typing import Any, Dict, List, Optional

from ..errors import ServiceError
from . import _reaper
from ._maven import maven_classpath
from ._process import ManagedProcess, free_port, port_open, wait_until
from ._spark import spark_home

POM = Path(__file__).with_name("jvm") / "yarn-pom.xml"
MAIN = "org.apache.hadoop.mapreduce.MiniHadoopClusterManager"


def hadoop_version() -> str:
    """The Hadoop version of PySpark's own client jars (``jars/hadoop-client-api-<v>.jar``)."""
    jars = spark_home() / "jars"
    for jar in sorted(jars.glob("hadoop-client-api-*.jar")):
        m = re.fullmatch(r"hadoop-client-api-(.+)\.jar", jar.name)
        if m:
            return m.group(1)
    raise ServiceError(f"no hadoop-client-api-<version>.jar in {jars}: cannot tell which Hadoop this Spark uses")


def yarn_classpath(version: Optional[str] = None) -> str:
    """The mini-cluster classpath for Hadoop ``version`` (default: PySpark's), resolved by Maven once."""
    return maven_classpath(POM, "hadoop-minicluster", {"hadoop.version": version or hadoop_version()})


class LocalYarnCluster:
    """A YARN ResourceManager + ``nodemanagers`` NodeManagers on 127.0.0.1, in one JVM, no HDFS.

    ``nodemanager_memory_mb`` is what each NodeManager offers to containers (a Spark application
    with the defaults of :meth:`spark_conf` takes about 1.5 GB: AM 256m and one 512m executor,
    each plus 384m overhead). Memory limits are not enforced (no vmem/pmem checks).
    """

    def __init__(self, *, nodemanagers: int = 1, nodemanager_memory_mb: int = 4096, heap: str = "512m",
                 hadoop: Optional[str] = None, workdir: Optional[Path] = None) -> None:
        if nodemanagers < 1:
            raise ValueError(f"nodemanagers must be >= 1, got {nodemanagers!r}")
        self.nodemanagers = nodemanagers
        self.nodemanager_memory_mb = nodemanager_memory_mb
        self.heap = heap
        self.hadoop = hadoop
        self._own_dir = workdir is None
        self._proc = ManagedProcess("yarn", Path(workdir or tempfile.mkdtemp(prefix="deo-yarn-")))
        if self._own_dir:
            _reaper.reap_dir(str(self.workdir))
        self.rm_port = 0
        self.webapp_port = 0

    @property
    def workdir(self) -> Path:
        return self._proc.workdir

    @property
    def conf_dir(self) -> Path:
        """The directory to use as ``HADOOP_CONF_DIR`` (holds the cluster's ``yarn-site.xml``)."""
        return self.workdir / "conf"

    @property
    def rm_address(self) -> str:
        return f"127.0.0.1:{self.rm_port}"

    def env(self) -> Dict[str, str]:
        """Environment for ``spark-submit --master yarn`` (and a Python driver started with it)."""
        return {"HADOOP_CONF_DIR": str(self.conf_dir), "YARN_CONF_DIR": str(self.conf_dir)}

    def spark_conf(self, executors: int = 1) -> Dict[str, str]:
        """Spark settings for this cluster: Spark's jars from the local install (nothing uploaded),
        small containers, staging under the work dir."""
        return {
            "spark.yarn.jars": f"local:{spark_home() / 'jars'}/*",
            "spark.yarn.stagingDir": (self.workdir / "staging").as_uri(),
            "spark.yarn.am.memory": "256m",
            "spark.executor.memory": "512m",
            "spark.executor.cores": "1",
            "spark.executor.instances": str(executors),
            "spark.dynamicAllocation.enabled": "false",
            "spark.ui.enabled": "false",
        }

    def start(self, timeout: float = 120.0) -> LocalYarnCluster:
        try:
            self._start(timeout)
        except BaseException:
            self.stop()  # no JVM or container outlives a failed start
            raise
        return self

    def _start(self, timeout: float) -> None:
        cp = yarn_classpath(self.hadoop)
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        details = self.workdir / "details.json"
        self.rm_port, self.webapp_port = free_port(), free_port()
        # Fixed ports everywhere: with ephemeral ones the written configuration keeps "localhost:0"
        # for the ResourceManager, and the job history server would take its default 10020/10033/19888.
        ports = {
            "yarn.resourcemanager.address": self.rm_port,
            "yarn.resourcemanager.scheduler.address": free_port(),
            "yarn.resourcemanager.resource-tracker.address": free_port(),
            "yarn.resourcemanager.admin.address": free_port(),
            "yarn.resourcemanager.webapp.address": self.webapp_port,
            "yarn.nodemanager.localizer.address": free_port(),
            "yarn.nodemanager.webapp.address": free_port(),
            "mapreduce.jobhistory.admin.address": free_port(),
            "mapreduce.jobhistory.webapp.address": free_port(),
        }
        settings: Dict[str, Any] = {
            "yarn.minicluster.fixed.ports": "true",
            "yarn.resourcemanager.hostname": "localhost",
            **{k: f"localhost:{v}" for k, v in ports.items()},
            "yarn.nodemanager.address": "localhost:0",
            "yarn.nodemanager.resource.memory-mb": self.nodemanager_memory_mb,
            "yarn.scheduler.minimum-allocation-mb": 128,
            "yarn.nodemanager.vmem-check-enabled": "false",
            "yarn.nodemanager.pmem-check-enabled": "false",
            "yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage": "99",
        }
        argv = ["java", f"-Xmx{self.heap}", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", cp, MAIN,
                "-nodfs", "-nodemanagers", str(self.nodemanagers), "-rmport", str(self.rm_port),
                "-jhsport", str(free_port()),
                "-writeConfig", str(self.conf_dir / "yarn-site.xml"), "-writeDetails", str(details)]
        for k, v in settings.items():
            argv += ["-D", f"{k}={v}"]
        self._proc.spawn(argv)
        wait_until(lambda: details.exists() and details.stat().st_size > 2 and port_open(self.rm_port),
                   timeout=timeout, what="YARN mini-cluster", proc=self._proc.proc, log=self._proc.log_path)
        wait_until(lambda: self._active_nodes() >= self.nodemanagers, timeout=timeout,
                   what="YARN NodeManager registration", proc=self._proc.proc, log=self._proc.log_path)

    def _rest(self, path: str) -> Any:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.webapp_port}/ws/v1/cluster/{path}",
                                    timeout=5) as resp:
            return json.load(resp)

    def _active_nodes(self) -> int:
        return int(self._rest("metrics")["clusterMetrics"]["activeNodes"])

    def applications(self) -> List[Dict[str, Any]]:
        """The ResourceManager's applications (REST ``/ws/v1/cluster/apps``): id, name, state, finalStatus…"""
        apps = (self._rest("apps").get("apps") or {}).get("app") or []
        return list(apps)

    def container_pids(self) -> List[int]:
        """PIDs of processes working under this cluster's dir: the containers (AMs, executors, Python workers)."""
        root = str(self.workdir.resolve()) + os.sep
        pids: List[int] = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                if os.readlink(entry / "cwd").startswith(root):
                    pids.append(int(entry.name))
            except OSError:
                continue  # exited while we looked, or not ours to read
        return sorted(pids)

    def stop(self) -> None:
        """Stop the cluster JVM, SIGKILL any container left under the work dir, remove the dir."""
        self._proc.stop(cleanup=False)
        for pid in self.container_pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self._own_dir:
            shutil.rmtree(self.workdir, ignore_errors=True)
            _reaper.forget_dir(str(self.workdir))

    def __enter__(self) -> LocalYarnCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
