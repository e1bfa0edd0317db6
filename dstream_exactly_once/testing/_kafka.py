"""LocalKafka: a real single-node KRaft Apache Kafka broker for tests, demos and benchmarks.

The broker jars come from Maven Central through the small pom in ``jvm/pom.xml``; Maven caches them
in the local repository, so only the first start downloads anything. The Kafka version is the pom's
(4.x) unless ``LocalKafka(version=…)`` or the environment variable ``DEO_KAFKA_VERSION`` names
another release of ``org.apache.kafka:kafka_2.13`` that runs KRaft (3.3 and later; the tests run
:data:`KAFKA_3_VERSION` beside the default). The broker runs with ``java``
on free loopback ports in a temp dir and is killed (process group) on :meth:`LocalKafka.stop`.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence, Tuple

from ..errors import ConfigurationError, ServiceError
from ..kafka._offsets import to_bytes
from ._maven import maven_classpath
from ._process import LocalService, ManagedProcess, free_port, port_open, wait_until

POM = Path(__file__).with_name("jvm") / "pom.xml"

#: the environment variable that picks the broker's Kafka version (default: the pom's)
VERSION_ENV = "DEO_KAFKA_VERSION"

#: the 3.x KRaft broker the tests run beside the default 4.x one
KAFKA_3_VERSION = "3.9.1"

_VERSION = re.compile(r"\d+\.\d+\.\d+")

LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.file.ref = file
logger.kafka.name = kafka
logger.kafka.level = info
"""


def kafka_version(version: Optional[str] = None) -> Optional[str]:
    """The Kafka release to run: ``version``, else ``$DEO_KAFKA_VERSION``, else ``None`` (the pom's).

    Refused (naming the value): anything but a ``MAJOR.MINOR.PATCH`` string, or a release before
    3.3 (no production-ready KRaft mode, which the broker runs in).
    """
    where = "version"
    if version is None:
        version, where = os.environ.get(VERSION_ENV) or None, f"${VERSION_ENV}"
    if version is None:
        return None
    allowed = "a Kafka release MAJOR.MINOR.PATCH of 3.3 or later (e.g. '3.9.1', '4.1.1')"
    if not isinstance(version, str) or not _VERSION.fullmatch(version):
        raise ConfigurationError(f"{where} must be {allowed}; got {version!r}")
    if tuple(int(p) for p in version.split(".")[:2]) < (3, 3):
        raise ConfigurationError(f"{where} must be {allowed}; got {version!r}")
    return version


def kafka_classpath(version: Optional[str] = None) -> str:
    """The broker classpath (``version`` as in :func:`kafka_version`), resolving the jars with Maven on
    first use (idempotent, cached)."""
    chosen = kafka_version(version)
    return maven_classpath(POM, "kafka", {"kafka.version": chosen} if chosen else None)


def _cluster_id() -> str:
    """A random KRaft cluster id (base64url of a UUID) that cannot be mistaken for a command-line
    option: ids starting with '-' made ``kafka-storage format -t <id>`` fail now and then."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cid.startswith("-"):
            return cid


class LocalKafka(LocalService):
    """A single-node KRaft broker on 127.0.0.1.

    ``sasl_users`` (``{user: password}``) adds a SASL_PLAINTEXT listener with the PLAIN mechanism
    at :attr:`sasl_bootstrap`; the PLAINTEXT listener at :attr:`bootstrap` stays open.
    ``scram_users`` (``{user: password}``) enables SCRAM-SHA-512 on that listener too, the credentials
    stored in the cluster metadata when the storage is formatted (``kafka-storage format --add-scram``).
    ``tls=True`` adds an SSL listener at :attr:`ssl_bootstrap` (and, with SASL users, a SASL_SSL one at
    :attr:`sasl_ssl_bootstrap`) with a self-signed certificate for ``127.0.0.1``/``localhost``, made with
    the JDK's ``keytool``; clients trust it through :attr:`ca_file` (PEM).
    ``broker_config`` adds or overrides ``server.properties`` entries. ``version``: the Kafka release
    (``"3.9.1"``; default ``$DEO_KAFKA_VERSION``, else the pom's 4.x), checked here.
    """

    def __init__(
        self,
        *,
        sasl_users: Optional[Mapping[str, str]] = None,
        scram_users: Optional[Mapping[str, str]] = None,
        tls: bool = False,
        broker_config: Optional[Mapping[str, Any]] = None,
        heap: str = "512m",
        workdir: Optional[Path] = None,
        version: Optional[str] = None,
    ) -> None:
        #: the Kafka release this broker runs (``None``: the pom's)
        self.version = kafka_version(version)
        self._sasl_users = dict(sasl_users or {})
        self._scram_users = dict(scram_users or {})
        self._tls = bool(tls)
        self.ssl_port = 0
        self.sasl_ssl_port = 0
        self._broker_config = dict(broker_config or {})
        self._heap = heap
        self._proc = ManagedProcess("kafka", workdir)
        self.port = 0
        self.sasl_port = 0
        self._admin: Any = None
        self._cluster_id = ""
        self._cluster_password = uuid.uuid4().hex[:16]  # the throwaway keystore's password

    # ------------------------------------------------------------------ lifecycle
    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def _sasl(self) -> bool:
        return bool(self._sasl_users or self._scram_users)

    @property
    def sasl_bootstrap(self) -> str:
        if not self._sasl:
            raise ServiceError("this LocalKafka was started without sasl_users or scram_users")
        return f"127.0.0.1:{self.sasl_port}"

    @property
    def ssl_bootstrap(self) -> str:
        if not self._tls:
            raise ServiceError("this LocalKafka was started without tls=True")
        return f"127.0.0.1:{self.ssl_port}"

    @property
    def sasl_ssl_bootstrap(self) -> str:
        if not (self._tls and self._sasl):
            raise ServiceError("this LocalKafka was started without tls=True and SASL users")
        return f"127.0.0.1:{self.sasl_ssl_port}"

    @property
    def ca_file(self) -> str:
        """The broker certificate as PEM: what a client trusts (``ssl.ca.location``)."""
        if not self._tls:
            raise ServiceError("this LocalKafka was started without tls=True")
        return str(self._proc.workdir / "ca.pem")

    @property
    def running(self) -> bool:
        return self._proc.running

    def start(self, timeout: float = 90.0) -> LocalKafka:
        java = shutil.which("java")
        if java is None:
            raise ServiceError("java is needed to run the local Kafka broker (Java 17)")
        cp = kafka_classpath(self.version)
        work = self._proc.workdir
        first_start = self.port == 0
        if first_start:
            self.port, controller = free_port(), free_port()
            self.sasl_port = free_port() if self._sasl else 0
            self.ssl_port = free_port() if self._tls else 0
            self.sasl_ssl_port = free_port() if self._tls and self._sasl else 0
            self._controller_port = controller
            if self._tls:
                self._make_certificate(work)
            self._write_config(work)
            cluster_id = _cluster_id()
            self._cluster_id = cluster_id
            scram = [a for u, p in self._scram_users.items()
                     for a in ("--add-scram", f"SCRAM-SHA-512=[name={u},password={p}]")]
            fmt = subprocess.run(
                [java, "-cp", cp, f"-Dlog4j2.configurationFile={work / 'log4j2.properties'}",
                 "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(work / "server.properties"),
                 *scram],
                capture_output=True, text=True,
            )
            if fmt.returncode != 0:
                raise ServiceError(f"kafka storage format failed: {fmt.stdout}{fmt.stderr}")
        self._proc.spawn(
            [java, f"-Xmx{self._heap}", f"-Xms{self._heap}", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
             "-Djava.awt.headless=true", f"-Dlog4j2.configurationFile={work / 'log4j2.properties'}",
             "-cp", cp, "kafka.Kafka", str(work / "server.properties")],
        )
        self._await_ready(self._answers_metadata, timeout, f"Kafka broker on {self.bootstrap}", work / "server.log")
        return self


    def _write_config(self, work: Path) -> None:
        listeners = [f"PLAINTEXT://127.0.0.1:{self.port}", f"CONTROLLER://127.0.0.1:{self._controller_port}"]
        advertised = [f"PLAINTEXT://127.0.0.1:{self.port}"]
        protocol_map = ["PLAINTEXT:PLAINTEXT", "CONTROLLER:PLAINTEXT"]
        conf: dict[str, Any] = {
            "process.roles": "broker,controller",
            "node.id": 1,
            "controller.quorum.voters": f"1@127.0.0.1:{self._controller_port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": str(work / "data"),
            "num.partitions": 1,
            "offsets.topic.replication.factor": 1,
            "offsets.topic.num.partitions": 4,
            "transaction.state.log.replication.factor": 1,
            "transaction.state.log.min.isr": 1,
            "transaction.state.log.num.partitions": 4,
            "share.coordinator.state.topic.replication.factor": 1,
            "share.coordinator.state.topic.min.isr": 1,
            "group.initial.rebalance.delay.ms": 0,
            "log.retention.check.interval.ms": 1000,
            "log.cleaner.backoff.ms": 500,
            "log.flush.interval.messages": 1000000,
            "auto.create.topics.enable": "false",
            "delete.topic.enable": "true",
        }
        named = [("SASL_PLAINTEXT", self.sasl_port)] if self._sasl else []
        if self._tls:
            named += [("SSL", self.ssl_port)] + ([("SASL_SSL", self.sasl_ssl_port)] if self._sasl else [])
            conf.update({"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(work / "broker.p12"),
                         "ssl.keystore.password": self._store_password, "ssl.key.password": self._store_password})
        for name, port in named:
            listeners.append(f"{name}://127.0.0.1:{port}")
            advertised.append(f"{name}://127.0.0.1:{port}")
            protocol_map.append(f"{name}:{name}")
            if not name.startswith("SASL_"):
                continue
            mechanisms = (["PLAIN"] if self._sasl_users else []) + (["SCRAM-SHA-512"] if self._scram_users else [])
            conf["sasl.enabled.mechanisms"] = ",".join(mechanisms)
            if self._sasl_users:
                users = " ".join(f'user_{u}="{p}"' for u, p in self._sasl_users.items())
                conf[f"listener.name.{name.lower()}.plain.sasl.jaas.config"] = (
                    "org.apache.kafka.common.security.plain.PlainLoginModule required " + users + ";"
                )
            if self._scram_users:
                conf[f"listener.name.{name.lower()}.scram-sha-512.sasl.jaas.config"] = (
                    "org.apache.kafka.common.security.scram.ScramLoginModule required;"
                )
        conf["listeners"] = ",".join(listeners)
        conf["advertised.listeners"] = ",".join(advertised)
        conf["listener.security.protocol.map"] = ",".join(protocol_map)
        conf.update(self._broker_config)
        (work / "server.properties").write_text("".join(f"{k}={v}\n" for k, v in conf.items()))
        (work / "log4j2.properties").write_text(LOG4J2.format(log=work / "server.log"))

    @property
    def _store_password(self) -> str:
        return "deo-local-" + self._cluster_password

    def _make_certificate(self, work: Path) -> None:
        """A self-signed certificate for 127.0.0.1 / localhost in a PKCS12 keystore, and its PEM."""
        keytool = shutil.which("keytool")
        if keytool is None:
            raise ServiceError("keytool (from the JDK) is needed for LocalKafka(tls=True)")
        store, pem = work / "broker.p12", work / "ca.pem"
        for argv in ([keytool, "-genkeypair", "-alias", "broker", "-keyalg", "RSA", "-keysize", "2048",
                      "-validity", "3650", "-dname", "CN=localhost", "-ext", "SAN=IP:127.0.0.1,DNS:localhost",
                      "-ext", "BC=ca:true", "-keystore", str(store), "-storetype", "PKCS12",
                      "-storepass", self._store_password, "-keypass", self._store_password, "-noprompt"],
                     [keytool, "-exportcert", "-rfc", "-alias", "broker", "-keystore", str(store),
                      "-storepass", self._store_password, "-file", str(pem)]):
            done = subprocess.run(argv, capture_output=True, text=True)
            if done.returncode != 0:
                raise ServiceError(f"keytool {argv[1]} failed: {done.stdout}{done.stderr}")

    # ------------------------------------------------------------------ admin helpers
    def _answers_metadata(self) -> bool:
        # Cheap port check first: kafka-python's admin client blocks up to bootstrap_timeout_ms
        # (30 s by default) on a closed port, which hid a broker that had already exited.
        if not port_open(self.port):
            return False
        from kafka import KafkaAdminClient

        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=3000,
                                 bootstrap_timeout_ms=3000, client_id="deo-localkafka-probe")
        try:
            # Our broker, not whatever else won the race for the port free_port() picked.
            cluster_id = admin.describe_cluster().get("cluster_id")
            return not self._cluster_id or cluster_id == self._cluster_id
        finally:
            admin.close()

    def admin(self) -> Any:
        """A cached kafka-python ``KafkaAdminClient`` on the PLAINTEXT listener."""
        if self._admin is None:
            from kafka import KafkaAdminClient

            self._admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, client_id="deo-localkafka")
        return self._admin

    def _release(self) -> None:
        """Close the cached admin client before the broker stops or is killed."""
        if self._admin is not None:
            try:
                self._admin.close()
            finally:
                self._admin = None

    def create_topic(self, name: str, partitions: int = 1, config: Optional[Mapping[str, Any]] = None) -> str:
        """Create ``name`` with ``partitions`` partitions and topic ``config``; wait until usable."""
        from kafka.admin import NewTopic

        topic = NewTopic(name, partitions, 1, topic_configs={k: str(v) for k, v in (config or {}).items()})
        self.admin().create_topics([topic], wait_for_metadata=True)
        self._wait_leaders(name, partitions)
        return name

    def add_partitions(self, name: str, total: int) -> None:
        """Grow ``name`` to ``total`` partitions."""
        from kafka.admin import NewPartitions

        self.admin().create_partitions({name: NewPartitions(total_count=total)})
        self._wait_leaders(name, total)

    def delete_topic(self, name: str) -> None:
        self.admin().delete_topics([name])

    def delete_records(self, name: str, before: Mapping[int, int]) -> None:
        """Delete records below ``before[partition]`` (moves the log start offset)."""
        from kafka import TopicPartition

        self.admin().delete_records({TopicPartition(name, p): o for p, o in before.items()})

    def _wait_leaders(self, name: str, partitions: int) -> None:
        def ready() -> bool:
            got = self.offsets(name)
            return len(got) == partitions

        wait_until(ready, timeout=30, what=f"leaders of {name!r}")

    def offsets(self, name: str) -> dict[int, Tuple[int, int]]:
        """``{partition: (earliest, latest)}`` for ``name``, from the broker."""
        from kafka import TopicPartition
        from kafka.admin import OffsetSpec

        topics = self.admin().describe_topics([name])
        parts = sorted(p["partition_index"] for t in topics if t["name"] == name and not t["error_code"]
                       for p in t["partitions"] if p["leader_id"] >= 0)
        tps = [TopicPartition(name, p) for p in parts]
        early = self.admin().list_partition_offsets({tp: OffsetSpec.EARLIEST for tp in tps})
        late = self.admin().list_partition_offsets({tp: OffsetSpec.LATEST for tp in tps})
        return {tp.partition: (early[tp].offset, late[tp].offset) for tp in tps}

    # ------------------------------------------------------------------ producing
    def producer(self, **config: Any) -> Any:
        from kafka import KafkaProducer

        return KafkaProducer(bootstrap_servers=self.bootstrap, **config)

    def produce(
        self,
        topic: str,
        values: Iterable[Any],
        *,
        partition: Optional[int] = None,
        key: Any = None,
        keys: Optional[Sequence[Any]] = None,
        partitions: Optional[int] = None,
        headers: Optional[Sequence[Tuple[str, bytes]]] = None,
    ) -> int:
        """Produce ``values`` (str/bytes/int) and flush; returns how many were sent.

        Records go to ``partition`` when given; with ``partitions=N`` they are spread round-robin
        over N partitions (record i to partition i % N); otherwise Kafka's partitioner decides.
        """
        producer = self.producer(acks="all", linger_ms=5, batch_size=256 * 1024)
        n = 0
        try:
            for i, v in enumerate(values):
                k = keys[i] if keys is not None else key
                part = partition if partition is not None else (i % partitions if partitions else None)
                producer.send(topic, value=to_bytes(v, stringify=True), key=to_bytes(k, stringify=True), partition=part,
                              headers=list(headers) if headers else None)
                n += 1
            producer.flush()
        finally:
            producer.close()
        return n

    def produce_transactional(
        self, topic: str, batches: Sequence[Tuple[Sequence[Any], bool]], *, partition: int = 0,
        transactional_id: Optional[str] = None,
    ) -> None:
        """Produce each ``(values, commit)`` batch in its own transaction, committed or aborted."""
        producer = self.producer(transactional_id=transactional_id or f"deo-test-{uuid.uuid4().hex}",
                                 enable_idempotence=True, acks="all")
        try:
            producer.init_transactions()
            for values, commit in batches:
                producer.begin_transaction()
                for v in values:
                    producer.send(topic, value=to_bytes(v, stringify=True), partition=partition)
                producer.flush()
                if commit:
                    producer.commit_transaction()
                else:
                    producer.abort_transaction()
        finally:
            producer.close()
