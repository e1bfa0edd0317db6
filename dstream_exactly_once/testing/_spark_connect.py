"""LocalSparkConnect: a Spark Connect server from the PySpark install, on a free loopback port.

The server is Spark's own ``org.apache.spark.sql.connect.service.SparkConnectServer`` run by
``bin/spark-submit`` in the foreground (``sbin/start-connect-server.sh`` would daemonize it), with a
``local[N]`` master. Its Python workers (Python data sources, ``foreachBatch`` functions, UDFs) run
this interpreter with this process's ``sys.path`` on their ``PYTHONPATH``, so they import this
package as the client does; ``kafka=True`` puts Spark's Kafka source jars on its classpath.

Clients connect with a bearer token made for each server (``sc://localhost:PORT/;token=…``): other
users of the machine cannot use it. Needs PySpark's ``connect`` extra on both sides
(``pip install 'dstream-exactly-once[connect]'``)::

    with LocalSparkConnect(kafka=True) as server:
        spark = server.session()
        register(spark)
"""

from __future__ import annotations

import os
import re
import secrets
import sys
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from ..errors import ServiceError
from ._process import LocalService, ManagedProcess, free_port, port_open
from ._spark import spark_env, spark_home

__all__ = ["CONNECT_SERVER_CLASS", "LocalSparkConnect"]

#: The Spark Connect server's main class (``sbin/start-connect-server.sh`` runs the same one).
CONNECT_SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"

_STARTED = re.compile(r"Spark Connect server started at: \S*?:(\d+)")


class LocalSparkConnect(LocalService):
    """A Spark Connect server (``master``, default ``local[2]``) in a temp work dir.

    ``kafka``: Spark's Kafka source jars (:func:`~._spark_kafka.spark_kafka_jars`) on the server, so
    ``spark.readStream.format("kafka")`` works; ``jars``: further comma-separated jars; ``conf``: more
    Spark conf for the server; ``python_path``: the server's Python workers' import path (default:
    this process's ``sys.path``). :meth:`session` opens a client session; :meth:`kill` crashes the
    server and :meth:`start` starts it again (its sessions, and the data sources registered in
    them, do not survive that)."""

    def __init__(self, *, master: str = "local[2]", kafka: bool = False, jars: Optional[str] = None,
                 conf: Optional[Mapping[str, Any]] = None, python_path: Optional[Sequence[str]] = None,
                 workdir: Optional[Path] = None) -> None:
        self.master = master
        self.kafka = kafka
        self._jars = jars
        self._conf = dict(conf or {})
        self._python_path = list(python_path) if python_path is not None else [p for p in sys.path if p]
        self._token = secrets.token_urlsafe(24)
        self._proc = ManagedProcess("spark-connect", workdir)
        self._log_from = 0
        self.port = 0

    def __repr__(self) -> str:  # never shows the token
        return f"LocalSparkConnect(port={self.port}, master={self.master!r}, kafka={self.kafka})"

    @property
    def url(self) -> str:
        """The ``sc://`` connection string of this server, including its token (a secret)."""
        return f"sc://localhost:{self.port}/;token={self._token}"

    def session(self) -> Any:
        """A new Spark Connect session on this server: its own server-side session, so the data
        sources registered in it and its SQL conf are its own; ``.stop()`` it when done.

        Built with the Connect client's own builder (``pyspark.sql.connect.session.SparkSession``):
        ``pyspark.sql.SparkSession.builder.remote(url)`` would also mark this whole process (and the
        processes it starts) as a Spark Connect client (``SPARK_CONNECT_MODE_ENABLED``), after which
        a classic ``SparkSession.builder`` in it makes Connect sessions too."""
        from pyspark.sql.connect.session import SparkSession

        return SparkSession.builder.remote(self.url).create()

    def _spark_submit(self) -> str:
        exe = spark_home() / "bin" / "spark-submit"
        if not exe.exists():
            raise ServiceError(f"{exe} not found: is pyspark installed?")
        return str(exe)

    def _server_conf(self) -> dict[str, str]:
        work = self._proc.workdir
        python_path = os.pathsep.join(self._python_path)
        conf = {
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.local.dir": str(work / "tmp"),
            "spark.sql.warehouse.dir": str(work / "warehouse"),
            "spark.pyspark.python": sys.executable,
            "spark.pyspark.driver.python": sys.executable,
            "spark.executorEnv.PYTHONPATH": python_path,
            "spark.executorEnv.PYSPARK_PYTHON": sys.executable,
        }
        jars = [j for j in (self._spark_kafka_jars() if self.kafka else "", self._jars or "") if j]
        if jars:
            conf["spark.jars"] = ",".join(jars)
        conf.update({k: str(v) for k, v in self._conf.items()})
        return conf

    @staticmethod
    def _spark_kafka_jars() -> str:
        from ._spark_kafka import spark_kafka_jars

        return spark_kafka_jars()

    def start(self, timeout: float = 120.0) -> LocalSparkConnect:
        """Start the server and wait until it accepts connections."""
        self.port = free_port()
        conf = self._server_conf()
        for sub in ("tmp", "conf"):
            (self._proc.workdir / sub).mkdir(exist_ok=True)
        argv = [self._spark_submit(), "--class", CONNECT_SERVER_CLASS, "--name", "Spark Connect server",
                "--master", self.master]
        for key, value in conf.items():
            argv += ["--conf", f"{key}={value}"]
        env = {**spark_env(), "PYTHONPATH": os.pathsep.join(self._python_path),
               "SPARK_CONNECT_MODE": "0",  # as sbin/start-connect-server.sh: the server is a classic driver
               "SPARK_CONNECT_AUTHENTICATE_TOKEN": self._token,  # from the environment: never on a command line
               # a conf dir of its own: no spark-defaults.conf of the machine changes the server
               "SPARK_LOG_DIR": str(self._proc.workdir), "SPARK_CONF_DIR": str(self._proc.workdir / "conf")}
        log = self._proc.log_path
        self._log_from = log.stat().st_size if log.exists() else 0  # a restart appends to the same log
        self._proc.spawn(argv, env=env)
        self._await_ready(self._started, timeout, f"Spark Connect server on port {self.port}")
        return self

    def _started(self) -> bool:
        with open(self._proc.log_path, "rb") as f:
            f.seek(self._log_from)
            found = _STARTED.search(f.read().decode(errors="replace"))
        if found is None:
            return False
        if int(found.group(1)) != self.port:  # Spark moved on from a port taken meanwhile
            self.port = int(found.group(1))
        return port_open(self.port)

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` of the server's log (for a test's failure message)."""
        return self._proc.log_tail(lines)
