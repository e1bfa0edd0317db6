"""``kafkaParams``: the Kafka client settings the Kafka source and sinks check (Kafka's own names)."""

from __future__ import annotations

from ..core._options import REQUIRED, Option
from . import EntryPoint

_I32 = 2**31 - 1
_I64 = 2**63 - 1


def _int(key: str, doc: str, low: int, high: int = _I32, default: object = None) -> Option:
    return Option(key, "int", default, doc, low=low, high=high)


def _str(key: str, doc: str, *aliases: str, secret: bool = False) -> Option:
    return Option(key, "str", None, doc, aliases=aliases, secret=secret)


KAFKA_PARAMS = EntryPoint("kafkaParams", "options", "Kafka client settings (Spark 2.4's and 0-10's key names)", (
    Option("bootstrap.servers", "str", REQUIRED, "host:port[,host:port…] (str or list), port 1..65535",
           aliases=("metadata.broker.list",)),
    Option("auto.offset.reset", "enum", "latest", "where a partition without an explicit or stored offset starts",
           allowed=("earliest", "smallest", "latest", "largest", "none")),
    _str("group.id", "the group commitAsync commits to; never used for reading"),
    Option("isolation.level", "enum", "read_uncommitted", "read_committed: the log end is the last stable "
           "offset and aborted records are skipped", allowed=("read_uncommitted", "read_committed")),
    Option("enable.auto.commit", "enum", "false", "true is refused: only the driver decides offsets",
           allowed=("false",)),
    _str("client.id", "passed to kafka-python"),
    _str("client.rack", "passed to kafka-python"),
    _int("request.timeout.ms", "passed to kafka-python", 1, default=30000),
    _int("fetch.max.bytes", "executor fetch sizing", 0),
    _int("fetch.min.bytes", "executor fetch sizing", 0),
    _int("fetch.max.wait.ms", "executor fetch sizing", 0, default=500),
    _int("max.partition.fetch.bytes", "executor fetch sizing", 0),
    _int("max.poll.records", "passed to kafka-python", 1),
    _int("receive.buffer.bytes", "-1: the OS default", -1),
    _int("send.buffer.bytes", "-1: the OS default", -1),
    _int("connections.max.idle.ms", "passed to kafka-python", 0, _I64, default=540000),
    _int("reconnect.backoff.ms", "passed to kafka-python", 0, _I64),
    _int("reconnect.backoff.max.ms", "passed to kafka-python", 0, _I64),
    _int("retry.backoff.ms", "passed to kafka-python", 0, _I64),
    _int("metadata.max.age.ms", "passed to kafka-python", 0, _I64),
    Option("check.crcs", "bool", None, "passed to kafka-python"),
    Option("security.protocol", "enum", "PLAINTEXT", "SASL settings need SASL_*, SSL settings SSL or SASL_SSL",
           allowed=("plaintext", "ssl", "sasl_plaintext", "sasl_ssl")),
    Option("sasl.mechanism", "str", None, "a mechanism the installed kafka-python knows (PLAIN, SCRAM-SHA-256, "
           "SCRAM-SHA-512, GSSAPI, …); OAUTHBEARER is refused"),
    _str("sasl.plain.username", "SASL user", "sasl.username"),
    _str("sasl.plain.password", "SASL password", "sasl.password", secret=True),
    Option("sasl.jaas.config", "str", None, "the PLAIN login module's form: username=\"…\" password=\"…\"",
           secret=True),
    _str("sasl.kerberos.service.name", "GSSAPI service name"),
    _str("ssl.ca.location", "CA file (path)", "ssl.cafile"),
    _str("ssl.certificate.location", "client certificate (path)", "ssl.certfile"),
    _str("ssl.key.location", "client key (path)", "ssl.keyfile"),
    _str("ssl.key.password", "the key's password", secret=True),
    _str("ssl.crl.location", "certificate revocation list (path)"),
    _str("ssl.cipher.suites", "comma- or colon-separated OpenSSL cipher names"),
    Option("ssl.endpoint.identification.algorithm", "enum", "https", "'' turns the host-name check off",
           allowed=("https", "")),
), ignored=("zookeeper.connect", "zookeeper.connection.timeout.ms", "zookeeper.session.timeout.ms",
            "session.timeout.ms", "heartbeat.interval.ms", "max.poll.interval.ms", "auto.commit.interval.ms",
            "partition.assignment.strategy", "key.deserializer.encoding", "value.deserializer.encoding"))
