"""The Structured Streaming entry points: the ``aof`` source, the ``deo-*`` sinks and their options
builders."""

from __future__ import annotations

from typing import Tuple

from ..core._options import REQUIRED, Option
from . import EntryPoint
from ._streams import _TASKS, FILE_OPTION_ENTRIES

_IGNORED = ("path", "checkpointLocation")
_STORE = Option("store", "url", REQUIRED, "the store URL (sqlite:///…, postgresql://…, redis://…)")
_STORE_PASSWORD = Option("store.password", "str", None, "the store's password, kept out of the URL", secret=True)
_APP = Option("app_id", "str", REQUIRED, "the application id (1-200 of A-Z a-z 0-9 . _ : -)", aliases=("app",))
_NEW_CHECKPOINT = Option("new_checkpoint", "enum", "refuse", "a query from a new checkpoint on an application with "
                         "committed batches: refuse it, or continue the application after its stored batches",
                         allowed=("refuse", "continue"))
_STORE_OPTIONS = (_STORE, _STORE_PASSWORD, _APP, _NEW_CHECKPOINT)
_ANCHOR = Option("anchor", "bool", False, "keep the deo-kafka or aof source's positions in the store with each "
                 "batch (read from the offset log of writer option checkpointLocation: an absolute local path)")
_MAX_MESSAGE = Option("max_message_bytes", "int", 16 * 1024 * 1024, "the largest commit message a task sends "
                      "to the driver (bytes)", low=1024)
_WRITES_FUNCTION = Option("writes_function", "str", None, "'package.module:function' turning a partition's rows "
                          "into Writes (default: rows of namespace, key, op, value)", nullable=True)
_KAFKA_OWN = (
    Option("topic", "str", REQUIRED, "the output topic (it must exist; it also holds the sink's markers)"),
    Option("prefix", "str", "deo", "prefix of the transactional ids and marker groups"),
    Option("transaction_timeout_ms", "int", 60000, "Kafka's transaction.timeout.ms of the sink's producers "
           "(at most the broker's transaction.max.timeout.ms)", low=1),
    Option("on_replay_mismatch", "enum", "fail", "a replayed batch whose records differ from the committed "
           "ones: fail, or keep the committed ones", allowed=("fail", "keep")),
)
_DORIS_OWN = (
    Option("fe", "url", REQUIRED, "the Doris FE URL (http://host:8030)"),
    Option("db", "str", REQUIRED, "the target database"),
    Option("table", "str", REQUIRED, "the target table"),
    Option("user", "str", "root", "the Doris user"),
    Option("doris.password", "str", None, "the Doris user's password", secret=True),
    Option("format", "enum", "csv", "the Stream Load format", allowed=("csv", "json")),
    Option("columns", "str", None, "the Stream Load columns header"),
    Option("column_separator", "str", None, "the Stream Load column separator (csv)"),
    Option("strict_labels", "bool", False, "refuse a label Doris reports in an unexpected state"),
)
_DELTA_OWN = (
    Option("table", "str", REQUIRED, "the Delta table's path or URI (created by the first batch when missing)"),
    Option("partition_by", "str", None, "the table's partition columns, comma-separated", nullable=True),
    Option("txn_app_id", "str", None, "the application transaction id in the table (default: app_id)",
           nullable=True),
    Option("merge_keys", "str", None, "merge by key (upsert): the key columns, comma-separated (unset: append)",
           nullable=True),
)
_AOF_OWN = (
    Option("max.bytes.per.trigger", "int", None, "most bytes a micro-batch reads (all files together)", low=1),
    Option("include.file.id", "bool", False, "records carry the file's identity"),
    Option("starting.positions.store", "url", None, "a store: a query without an offset log starts from the file "
           "positions committed there (deo-store sink with anchor=true, or a DStream file app)"),
    Option("starting.positions.app", "str", None, "that application's id (with starting.positions.store)"),
)

_KAFKA_SOURCE = (
    Option("subscribe", "str", None, "topics, comma-separated (one of subscribe, subscribePattern, assign)",
           nullable=True),
    Option("subscribePattern", "str", None, "a regular expression whole topic names match", nullable=True),
    Option("assign", "str", None, 'JSON {"topic": [0, 1]}: exactly these partitions', nullable=True),
    Option("startingOffsets", "str", "latest", 'a new query\'s start: earliest, latest or JSON {"topic": {"0": 23}} '
           "(-2 earliest, -1 latest; every partition named)"),
    Option("maxOffsetsPerTrigger", "int", None, "most offsets of one micro-batch, split over the partitions by "
           "their lag", low=1, nullable=True),
    Option("minOffsetsPerTrigger", "int", None, "fewest offsets a micro-batch waits for (at most maxTriggerDelay)",
           low=1, nullable=True),
    Option("maxTriggerDelay", "duration", "15m", "longest a micro-batch waits for minOffsetsPerTrigger (a bare "
           "number is in ms)"),
    Option("failOnDataLoss", "bool", True, "offsets gone before they were read stop the query (false: logged at "
           "WARN and skipped)"),
    Option("includeHeaders", "bool", False, "a headers column (array of key string, value binary)"),
    Option("kafkaConsumer.pollTimeoutMs", "int", 120000, "how long an executor waits for a fetch (ms)", low=1),
    Option("reader", "enum", "kafka-python", "the executor reader", allowed=("kafka-python", "confluent-kafka")),
    *_TASKS,
    Option("starting.positions.store", "url", None, "a store: a query without an offset log starts from the Kafka "
           "positions committed there (deo-store sink with anchor=true, or a DStream app)", nullable=True),
    Option("starting.positions.app", "str", None, "that application's id (with starting.positions.store)",
           nullable=True),
    Option("kafka.bootstrap.servers", "str", REQUIRED, "the brokers (host:port[,host:port]); other kafka.<setting> "
           "are Kafka client settings (kafkaParams)"),
)

ENTRY_POINTS: Tuple[EntryPoint, ...] = (
    EntryPoint("aof", "options", "the Structured Streaming file source: spark.readStream.format('aof')"
               ".option(name, value).load(path); also every file option", (
                   Option("path", "str", REQUIRED, "an absolute glob, or /dir/<regex> with path.syntax=regex"),
                   *_AOF_OWN,
                   *(o for o in FILE_OPTION_ENTRIES[0].options
                     if o.key != "hosts" and not o.key.startswith("tasks.")))),
    EntryPoint("deo-store", "options", "the store sink: df.writeStream.format('deo-store')",
               (*_STORE_OPTIONS, _WRITES_FUNCTION, _MAX_MESSAGE, _ANCHOR), case_insensitive=True, ignored=_IGNORED),
    EntryPoint("deo-doris", "options", "the Doris sink: df.writeStream.format('deo-doris')",
               (*_STORE_OPTIONS, *_DORIS_OWN), case_insensitive=True, ignored=_IGNORED),
    EntryPoint("deo-kafka", "options", "the Kafka sink: df.writeStream.format('deo-kafka'); kafka.<setting> "
               "are Kafka client settings (kafkaParams)",
               (*_STORE_OPTIONS, *_KAFKA_OWN,
                Option("kafka.bootstrap.servers", "str", REQUIRED, "the brokers (host:port[,host:port])")),
               case_insensitive=True, open_keys=("kafka.",), ignored=_IGNORED),
    EntryPoint("deo-kafka source", "options", "the Kafka source: spark.readStream.format('deo-kafka'); Spark's "
               "Kafka source's option names", _KAFKA_SOURCE, case_insensitive=True, open_keys=("kafka.",),
               ignored=("path",)),
    EntryPoint("deo-delta", "options", "the Delta Lake sink: df.writeStream.format('deo-delta')",
               (*_STORE_OPTIONS, *_DELTA_OWN), case_insensitive=True, ignored=_IGNORED),
    EntryPoint("store_sink_options", "keywords", "the deo-store sink's options for one query start",
               (_STORE, _APP, _WRITES_FUNCTION, _MAX_MESSAGE, _NEW_CHECKPOINT, _ANCHOR)),
    EntryPoint("doris_sink_options", "keywords", "the deo-doris sink's options for one query start (further "
               "keywords: format, columns, column_separator, strict_labels)",
               (_STORE, _APP, *(o for o in _DORIS_OWN if o.key in ("fe", "db", "table", "user")),
                Option("password", "str", "", "the Doris user's password", secret=True),
                *(o for o in _DORIS_OWN if o.key in ("format", "columns", "column_separator", "strict_labels")),
                _NEW_CHECKPOINT)),
    EntryPoint("kafka_sink_options", "keywords", "the deo-kafka sink's options for one query start",
               (_STORE, _APP, _KAFKA_OWN[0],
                Option("kafka_params", "mapping", REQUIRED, "Kafka client settings (kafkaParams)"),
                *_KAFKA_OWN[1:], _NEW_CHECKPOINT)),
    EntryPoint("delta_sink_options", "keywords", "the deo-delta sink's options for one query start",
               (_STORE, _APP, Option("table_uri", "str", REQUIRED, _DELTA_OWN[0].doc),
                Option("partition_by", "list", None, "the table's partition columns (unset: not partitioned)",
                       nullable=True),
                _DELTA_OWN[2], _NEW_CHECKPOINT,
                Option("merge_keys", "list", None, "merge by key (upsert): the key columns (unset: append)",
                       nullable=True))),
)
