"""The DStream API's entry points: the stream factories, the output calls, the file options, the task
planner's options and the Spark conf keys the library reads."""

from __future__ import annotations

from dataclasses import replace
from typing import Dict, Tuple

from ..core._options import REQUIRED, Option
from ..core._tasks import SPLIT_SIZE, TARGET_COUNT, TARGET_SIZE
from ..files._deployment import DEPLOYMENT_OPTIONS
from ..files._options import OPTIONS as FILE_OPTIONS
from ..kafka._reader_choice import DEFAULT_READER, READERS
from ..kafka._spark_conf import (
    FAIL_ON_DATA_LOSS,
    NETWORK_TIMEOUT,
    POLL_MS,
    RATE_OPTIONS,
    READER_KEY,
    TASKS_PACK,
    TASKS_SPLIT_SIZE,
    TASKS_TARGET_COUNT,
    TASKS_TARGET_SIZE,
)
from ..streaming._backpressure import CATCH_UP
from . import EntryPoint
from ._kafka import KAFKA_PARAMS

_INT_MAX = 2**31 - 1

# ------------------------------------------------------------------ arguments several factories share
_SSC = Option("ssc", "object", REQUIRED, "the StreamingContext (checked: a StreamingContext)")
_KAFKA_PARAMS = Option("kafkaParams", "mapping", REQUIRED, "Kafka client settings (see kafkaParams below)")
_TOPICS = Option("topics", "list", REQUIRED, "the topics to read")
_DECODERS = (Option("keyDecoder", "callable", "utf8_decoder", "decodes keys (None stays None)"),
             Option("valueDecoder", "callable", "utf8_decoder", "decodes values (None stays None)"))
_HANDLER = Option("messageHandler", "callable", None, "(KafkaMessageAndMetadata) -> record, replacing (key, value)",
                  nullable=True)
_FAIL = Option("failOnDataLoss", "bool", None, "True: a range whose records are gone fails the batch; False: "
               "what exists is read and the loss counted (None: spark.streaming.kafka.failOnDataLoss)", nullable=True)
_POLL = Option("poll_timeout_ms", "int", None, "how long an executor waits for a range's records, in ms (None: "
               "spark.streaming.kafka.consumer.poll.ms, else spark.network.timeout)", low=1, nullable=True)
_DISCOVERY = Option("discovery_interval_s", "float", 5.0, "least seconds between looks for new partitions",
                    low=0)
_STRATEGY = Option("strategy", "object", None, "Subscribe, SubscribePattern or Assign instead of topics "
                   "(checked: a consumer strategy)", nullable=True)
_STORE = Option("store", "url", REQUIRED, "a store URL (sqlite:///…, postgresql://…, redis://…, "
                "redis+cluster://…) or an opened TransactionalStore")
_APP_ID = Option("app_id", "str", None, "the application in the store; required with a URL; 1-200 of "
                 "A-Z a-z 0-9 . _ : -", nullable=True)
_MONITOR = Option("monitor_group", "str", None, "after each store commit, the offsets are also committed "
                  "(best effort) to this consumer group for lag tools", nullable=True)
_RETAIN = Option("retain_batches", "int", 100, "committed batches kept in the offset and commit logs", low=1)
_RETRY = Option("store_retry", "object", None, "a RetryPolicy: how long store operations are retried "
                "while the store is unreachable (None: RetryPolicy())", nullable=True)
_PATH = Option("path", "str", REQUIRED, "an absolute glob, or with path.syntax=regex /literal/dir/<regex>")
_FILE_OPTIONS = Option("options", "mapping", None, "file options (below), over Spark conf spark.aof.<name>",
                       nullable=True)

KAFKA_FACTORIES: Tuple[EntryPoint, ...] = (
    EntryPoint("KafkaUtils.createDirectStream", "keywords",
               "a direct Kafka stream (Spark 2.4's signature); at-least-once across driver restarts",
               (_SSC, _TOPICS, _KAFKA_PARAMS,
                Option("fromOffsets", "mapping", None, "{TopicAndPartition: first offset}; then exactly those "
                       "partitions are read", nullable=True),
                *_DECODERS, _HANDLER, _STRATEGY, _FAIL, _POLL, _DISCOVERY)),
    EntryPoint("KafkaUtils.createExactlyOnceStream", "keywords",
               "a direct Kafka stream whose outputs commit results and offsets in one store transaction",
               (_SSC, _KAFKA_PARAMS,
                Option("topics", "object", REQUIRED, "topic names, or {TopicAndPartition: first offset}; "
                       "offsets in the store win"),
                _HANDLER, _STORE, _APP_ID, *_DECODERS, _STRATEGY, _FAIL, _POLL, _DISCOVERY, _MONITOR, _RETAIN,
                _RETRY)),
    EntryPoint("KafkaUtils.createRDD", "keywords", "an RDD of the given offset ranges, checked against the brokers",
               (Option("sc", "object", REQUIRED, "the SparkContext (checked: a SparkContext)"), _KAFKA_PARAMS,
                Option("offsetRanges", "object", REQUIRED, "a list of OffsetRange: one RDD partition each"),
                Option("leaders", "object", None, "{TopicAndPartition: Broker} or a location strategy; "
                       "validated only", nullable=True),
                *_DECODERS, _HANDLER, _FAIL, _POLL)),
    EntryPoint("exactly_once", "keywords", "converts a createDirectStream stream before any output is attached",
               (Option("stream", "object", REQUIRED, "the stream createDirectStream returned"), _STORE, _APP_ID,
                _MONITOR, _RETAIN, _RETRY)),
)

FILE_FACTORIES: Tuple[EntryPoint, ...] = (
    EntryPoint("FileUtils.createDirectFileStream", "keywords",
               "a direct stream of lines appended to files; at-least-once across driver restarts",
               (_SSC, _PATH, _FILE_OPTIONS)),
    EntryPoint("FileUtils.createExactlyOnceFileStream", "keywords",
               "a file stream whose outputs commit results and byte positions in one store transaction",
               (_SSC, _PATH, _FILE_OPTIONS, _STORE, _APP_ID, _RETAIN, _RETRY)),
)

OUTPUT_CALLS: Tuple[EntryPoint, ...] = (
    EntryPoint("commit_each_batch", "keywords", "one store transaction per batch: results and positions",
               (Option("func", "callable", REQUIRED, "(batch, rdd) -> Writes"),
                Option("offset_log", "enum", "ahead", "ahead: the batch enters the offset log before it runs; "
                       "in_commit: the commit transaction writes it (one store transaction per batch; then this "
                       "must be the stream's only output)", allowed=("ahead", "in_commit")))),
    EntryPoint("commit_each_partition", "keywords", "one store transaction per task",
               (Option("func", "callable", REQUIRED, "(records, offset_range, batch) -> Writes"),
                Option("pack", "bool", False, "False: one task per range with data, func(records, offset_range, "
                       "batch); True: small ranges share a task as the task planner packs them, func gets the "
                       "tuple of its task's ranges and one transaction commits them all (never split)"))),
    EntryPoint("foreach_batch", "keywords", "a BatchIdSink, or (batch_id, rdd) -> Writes, once per batch",
               (Option("sink", "callable", REQUIRED, "a BatchIdSink or a function (batch_id, rdd)"),)),
    EntryPoint("write_each_partition", "keywords", "a sink with write_partition() and recover(), per range",
               (Option("sink", "object", REQUIRED, "a sink with write_partition() and recover()"),
                Option("rows", "callable", None, "(records) -> rows before the sink gets them", nullable=True))),
)

_TASKS = (
    Option(TARGET_COUNT, "int", None, "the number of tasks a batch aims at (default sc.defaultParallelism)", low=1),
    Option(TARGET_SIZE, "int", None, "the most a packed task reads; a larger range is a task of its own "
           "(default the batch's size / tasks.target.count)", low=1),
    Option(SPLIT_SIZE, "int", None, "a larger range is read in pieces of at most this size (0: never split)",
           low=0),
)

#: the reference's fuller lines for the file source's own options (its table keeps one short line each)
_FILE_DOCS: Dict[str, str] = {
    "starting.offsets": "files present at the first start: from byte 0, or after their last complete line",
    "bytes.max": "most bytes read from one file in one batch",
    "md5.check.enabled": "identify files by a content fingerprint (off: by device/inode only)",
    "md5.sample.length": "bytes the fingerprint covers (BLAKE2b-128; the names are kept from the ss-aof design)",
    "path.syntax": "glob: the whole absolute path; regex: a Python regular expression over the file names of "
                   "the literal directory before the last /",
    "exclude": "comma-separated globs (str or list): files whose name or path matches one are ignored",
    "exclude.regex": "a regular expression: files whose path it finds are ignored",
    "line.decoding": "UTF-8 (an undecodable line fails the task naming file and byte), U+FFFD replacement, or "
                     "raw bytes records",
    "line.max.bytes": "longest record in bytes, without its newline; less than bytes.max (with only bytes.max "
                      "set: max(4, min(1048576, bytes.max - 1)))",
    "line.overflow": "a longer line is split into records of at most line.max.bytes (never inside a UTF-8 "
                     "character), or stops the stream naming file and byte offset",
    "include.file.name": "records carry the file's path",
    "include.byte.offset": "records carry the byte offset of their first byte",
    "fail.on.data.loss": "bytes gone when a planned range is read: true stops the stream with DataLossError naming "
                         "the batch, the range and the command that continues; false commits what still exists "
                         "and records the loss beside the commit",
}

FILE_OPTION_ENTRIES: Tuple[EntryPoint, ...] = (
    EntryPoint("file options", "options",
               "a file stream's options mapping (also as Spark conf spark.aof.<name>; the mapping wins)",
               (*(replace(o, doc=_FILE_DOCS.get(o.key, o.doc)) for o in FILE_OPTIONS.values()),
                *DEPLOYMENT_OPTIONS.values(),
                *_TASKS)),
)

_B = "spark.streaming.backpressure."
#: the Kafka task planner's conf keys, each with its short name in the task planner's table
_KAFKA_TASKS = {TARGET_COUNT: TASKS_TARGET_COUNT, TARGET_SIZE: TASKS_TARGET_SIZE, SPLIT_SIZE: TASKS_SPLIT_SIZE}
SPARK_CONF: Tuple[EntryPoint, ...] = (
    EntryPoint("SparkConf", "conf", "the Spark conf keys the library reads (Kafka streams; catchUp: every "
               "exactly-once stream)", (
        *RATE_OPTIONS,
        replace(POLL_MS, doc="default of poll_timeout_ms"),
        replace(NETWORK_TIMEOUT, doc="read only to compute the poll timeout"),
        replace(FAIL_ON_DATA_LOSS, doc="default of failOnDataLoss"),
        Option(READER_KEY, "enum", DEFAULT_READER, "the executor reader", allowed=READERS),
        replace(TASKS_PACK, doc="plan tasks with the task planner (default false for createDirectStream and "
                "createRDD, true for exactly-once streams)"),
        *(replace(_KAFKA_TASKS[o.key], doc=o.doc + " (records)") for o in _TASKS),
        Option(_B + "enabled", "bool", False, "a PID rate estimator sets each batch's size"),
        Option(_B + "rateEstimator", "enum", "pid", "the rate estimator", allowed=("pid",)),
        Option(_B + "initialRate", "float", 0.0, "records/s before the first estimate (0: no limit)", low=0),
        Option(_B + "pid.proportional", "float", 1.0, "PID gain", low=0),
        Option(_B + "pid.integral", "float", 0.2, "PID gain", low=0),
        Option(_B + "pid.derived", "float", 0.0, "PID gain", low=0),
        Option(_B + "pid.minRate", "float", 100.0, "lowest estimated rate (records/s)", low=0),
        CATCH_UP,
    )),
)

ENTRY_POINTS: Tuple[EntryPoint, ...] = (*KAFKA_FACTORIES, *FILE_FACTORIES, *OUTPUT_CALLS, *FILE_OPTION_ENTRIES,
                                        KAFKA_PARAMS, *SPARK_CONF)
