"""Spark helpers: a local-mode SparkContext and a real standalone cluster from the PySpark install.

The standalone cluster (one master, N workers, each a separate JVM started with
``bin/spark-class``) makes executors separate processes from the driver, which is what the
exactly-once claims must survive.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import marshal
import os
import re
import shutil
import signal
import sys
import time
import warnings
import zipfile
from pathlib import Path
from typing import Any, List, Mapping, Optional

from ..errors import ServiceError
from ._process import ManagedProcess, free_port, wait_until


def spark_home() -> Path:
    """The Spark home of these helpers: ``$SPARK_HOME``, or the PySpark install's own home seen through
    :func:`compiled_spark_home` (the same Spark, its Python workers importing PySpark from bytecode)."""
    import pyspark

    if os.environ.get("SPARK_HOME"):
        return Path(os.environ["SPARK_HOME"])
    return compiled_spark_home(Path(pyspark.__file__).parent)


def compiled_spark_home(real: Path) -> Path:
    """``real`` (a Spark home) with its ``python/lib/pyspark.zip`` replaced by a copy that also holds
    each module's bytecode, everything else linked to ``real``; made once per install and Python
    version under ``~/.cache/dstream-exactly-once/`` (``real`` itself when it has no such zip).

    Spark puts ``pyspark.zip`` first on its Python workers' path, and Python cannot cache bytecode
    for modules imported from a zip, so every worker process compiles PySpark's modules anew — about
    a second of CPU each. Workers of Python data sources are started per query and per call and have
    10 s to connect back to Spark, which a loaded test machine may miss. The bytecode is hash-based
    and unchecked (the zip's sources never change); a worker of another Python version ignores it."""
    zip_path = real / "python" / "lib" / "pyspark.zip"
    if not zip_path.is_file():
        return real
    try:
        st = zip_path.stat()
        # the install (its top-level entries too: a conf/ added later is linked) and the Python version
        key = (f"{real.resolve()}:{sorted(os.listdir(real))}:{st.st_size}:{st.st_mtime_ns}:"
               f"{sys.implementation.cache_tag}")
        cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dstream-exactly-once"
        home = cache / f"spark-home-{hashlib.sha256(key.encode()).hexdigest()[:12]}"
        if (home / _COMPLETE).exists():
            return home
        cache.mkdir(parents=True, exist_ok=True)
        with open(cache / f"{home.name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # concurrent test processes make it once
            if not (home / _COMPLETE).exists():
                shutil.rmtree(home, ignore_errors=True)
                _link_tree(real, home, keep={"python": {"lib": {"pyspark.zip": None}}})
                _compile_zip(zip_path, home / "python" / "lib" / "pyspark.zip")
                (home / _COMPLETE).touch()
        return home
    except (OSError, RuntimeError) as exc:  # no writable cache (or no home directory): Spark as installed
        warnings.warn(f"Spark's Python workers will compile PySpark anew: could not make a Spark home with "
                      f"bytecode ({exc})", RuntimeWarning, stacklevel=2)
        return real


_COMPLETE = ".deo-complete"


def _link_tree(real: Path, into: Path, keep: Mapping[str, Any]) -> None:
    """``into`` as a directory of links to ``real``'s entries, except those named in ``keep``: a
    directory there (a mapping) is made the same way one level down, a file (``None``) left out."""
    into.mkdir(parents=True, exist_ok=True)
    for entry in real.iterdir():
        if entry.name not in keep:
            (into / entry.name).symlink_to(entry)
        elif keep[entry.name] is not None:
            _link_tree(entry, into / entry.name, keep[entry.name])


def _compile_zip(source: Path, target: Path) -> None:
    """``source`` copied to ``target`` with each ``x.py`` followed by ``x.pyc`` (hash-based, unchecked),
    where Python's zip importer looks for it."""
    with zipfile.ZipFile(source) as zin, zipfile.ZipFile(target, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info)
            zout.writestr(info, data)
            if not info.filename.endswith(".py"):
                continue
            try:
                with warnings.catch_warnings():  # PySpark's own tests' warnings are not ours to show
                    warnings.simplefilter("ignore")
                    code = compile(data, f"{target}{os.sep}{info.filename}", "exec", dont_inherit=True, optimize=0)
            except (SyntaxError, ValueError):  # ValueError: a source holding a NUL byte
                continue  # left to fail (or not) where it is imported, as without bytecode
            header = importlib.util.MAGIC_NUMBER + (1).to_bytes(4, "little") + importlib.util.source_hash(data)
            zout.writestr(zipfile.ZipInfo(info.filename + "c", info.date_time), header + marshal.dumps(code))


def spark_env() -> dict[str, str]:
    """Environment for driver and executors: same Python, quiet logs, loopback only."""
    return {
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_HOME": str(spark_home()),
    }


def default_conf(app_name: str = "dstream-exactly-once", master: str = "local[2]",
                 extra: Optional[Mapping[str, Any]] = None) -> Any:
    from pyspark import SparkConf

    conf = (SparkConf().setMaster(master).setAppName(app_name)
            .set("spark.ui.enabled", "false")
            .set("spark.ui.showConsoleProgress", "false")
            .set("spark.driver.host", "127.0.0.1")
            .set("spark.driver.bindAddress", "127.0.0.1")
            .set("spark.sql.shuffle.partitions", "4")
            .set("spark.default.parallelism", "4")
            .set("spark.python.worker.reuse", "true")
            .set("spark.executorEnv.PYTHONPATH", os.pathsep.join(p for p in sys.path if p)))
    for k, v in (extra or {}).items():
        conf.set(k, str(v))
    return conf


def make_spark_context(master: str = "local[2]", app_name: str = "dstream-exactly-once",
                       conf: Optional[Mapping[str, Any]] = None) -> Any:
    """A SparkContext with loopback networking and quiet logging."""
    os.environ.update(spark_env())
    from pyspark import SparkContext

    sc = SparkContext(conf=default_conf(app_name, master, conf))
    sc.setLogLevel("ERROR")
    return sc


class LocalSparkCluster:
    """A Spark standalone master plus ``workers`` workers on 127.0.0.1 (separate JVMs)."""

    def __init__(self, workers: int = 2, cores_per_worker: int = 1, memory_per_worker: str = "1g") -> None:
        self.workers = workers
        self.cores = cores_per_worker
        self.memory = memory_per_worker
        self._master = ManagedProcess("spark-master")
        self._workers: List[ManagedProcess] = []
        self.port = 0

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _spark_class(self) -> str:
        exe = spark_home() / "bin" / "spark-class"
        if not exe.exists():
            raise ServiceError(f"{exe} not found: is pyspark installed?")
        return str(exe)

    def start(self, timeout: float = 60.0) -> LocalSparkCluster:
        try:
            self._start(timeout)
        except BaseException:
            self.stop()  # no master or worker outlives a failed start
            raise
        return self

    def _start(self, timeout: float) -> None:
        env = {**spark_env(), "SPARK_NO_DAEMONIZE": "1", "SPARK_MASTER_HOST": "127.0.0.1"}
        self.port = free_port()
        self._master.spawn([self._spark_class(), "org.apache.spark.deploy.master.Master",
                            "--host", "127.0.0.1", "--port", str(self.port), "--webui-port", str(free_port())],
                           env=env)
        wait_until(lambda: "I have been elected leader" in self._master.log_path.read_text(errors="replace"),
                   timeout=timeout, what="Spark master", proc=self._master.proc, log=self._master.log_path)
        # Spark moves to the next port when the chosen one was taken meanwhile: use the real one.
        bound = re.search(r"Starting Spark master at spark://[^:\s]+:(\d+)",
                          self._master.log_path.read_text(errors="replace"))
        if bound:
            self.port = int(bound.group(1))
        for i in range(self.workers):
            self._workers.append(ManagedProcess(f"spark-worker{i}"))
            self._spawn_worker(i, env)
        for i in range(self.workers):
            self._wait_registered(i, timeout)

    def _spawn_worker(self, i: int, env: Mapping[str, str]) -> None:
        w = self._workers[i]
        w.spawn([self._spark_class(), "org.apache.spark.deploy.worker.Worker",
                 "--host", "127.0.0.1", "--cores", str(self.cores), "--memory", self.memory,
                 "--webui-port", str(free_port()), "--work-dir", str(w.workdir / "work"), self.master_url],
                env={**env, "SPARK_WORKER_DIR": str(w.workdir / "work")})

    def _wait_registered(self, i: int, timeout: float, after: int = 0) -> None:
        w = self._workers[i]

        def registered() -> bool:
            return w.log_path.read_text(errors="replace").count("Successfully registered with master") > after

        wait_until(registered, timeout=timeout, what=f"Spark {w.name}", proc=w.proc, log=w.log_path)

    def kill_worker(self, i: int) -> int:
        """SIGKILL worker ``i``'s JVM and everything it started (its executors): a lost machine; its PID."""
        w = self._workers[i]
        if w.proc is None or not w.running:
            raise ServiceError(f"Spark worker {i} is not running")
        pid = w.proc.pid
        os.killpg(pid, signal.SIGKILL)
        w.proc.wait(10)
        return pid

    def restart_worker(self, i: int, timeout: float = 60.0) -> int:
        """Start worker ``i`` again (same work dir) and wait until the master registered it; its PID."""
        w = self._workers[i]
        if w.running:
            raise ServiceError(f"Spark worker {i} is still running")
        before = w.log_path.read_text(errors="replace").count("Successfully registered with master")
        self._spawn_worker(i, {**spark_env(), "SPARK_NO_DAEMONIZE": "1", "SPARK_MASTER_HOST": "127.0.0.1"})
        self._wait_registered(i, timeout, after=before)
        assert w.proc is not None
        return w.proc.pid

    def worker_pids(self) -> List[int]:
        """PIDs of the running worker JVMs."""
        return [w.proc.pid for w in self._workers if w.proc is not None and w.running]

    def executor_pids(self) -> List[int]:
        """PIDs of the executor JVMs the workers are running now (children of the worker JVMs).

        The worker log does not name executor PIDs, so they are found in ``/proc``.
        """
        workers = set(self.worker_pids())
        pids: List[int] = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                ppid = int(stat[stat.rindex(")") + 2:].split()[1])
                if ppid in workers and b"CoarseGrainedExecutorBackend" in (entry / "cmdline").read_bytes():
                    pids.append(int(entry.name))
            except (OSError, ValueError):
                continue  # exited while we looked
        return sorted(pids)

    def stop(self) -> None:
        for w in self._workers:
            w.stop()
        self._master.stop()
        time.sleep(0.2)

    def __enter__(self) -> LocalSparkCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
