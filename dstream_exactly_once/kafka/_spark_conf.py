"""Every Spark conf key the Kafka source reads, declared once (key, type, default, bounds).

The DStream glue (:mod:`dstream_exactly_once.kafka.spark`) reads them from the application's
SparkConf, the planner reads the rate limits, and the option reference
(:mod:`dstream_exactly_once.option_registry`) lists them from here. Nothing here imports Spark: an
:class:`~dstream_exactly_once.core._options.Option` reads any mapping-like conf.
"""

from __future__ import annotations

from ..core._options import Option

__all__ = ["FAIL_ON_DATA_LOSS", "KAFKA_CONF_PREFIX", "NETWORK_TIMEOUT", "PACK_KEY", "POLL_MS", "RATE_OPTIONS",
           "READER_KEY", "TASKS_PACK", "TASKS_SPLIT_SIZE", "TASKS_TARGET_COUNT", "TASKS_TARGET_SIZE"]

#: the prefix of the Kafka source's own Spark conf keys
KAFKA_CONF_PREFIX = "spark.streaming.kafka."

#: the rate limits' Spark conf keys
RATE_OPTIONS = (
    Option("spark.streaming.kafka.maxRatePerPartition", "int", 0,
           "records per second per partition (0: no limit)", low=0),
    Option("spark.streaming.kafka.minRatePerPartition", "int", 1, "the per-batch floor per partition", low=0),
)

#: the SparkConf key naming the executor reader
READER_KEY = "spark.streaming.kafka.reader"

#: the Spark conf keys the executor reads follow
POLL_MS = Option("spark.streaming.kafka.consumer.poll.ms", "int", None, "executor poll timeout in ms", low=1)
NETWORK_TIMEOUT = Option("spark.network.timeout", "duration", 120.0,
                         "the poll timeout when consumer.poll.ms is unset", low=0)
FAIL_ON_DATA_LOSS = Option("spark.streaming.kafka.failOnDataLoss", "bool", True,
                           "whether offsets gone from the log stop the stream")
#: the task planner's Spark conf keys for Kafka streams (sizes in records)
TASKS_PACK = Option("spark.streaming.kafka.tasks.pack", "bool", None,
                    "plan tasks (pack small ranges, split large ones): default false for createDirectStream "
                    "and createRDD, true for exactly-once streams")
TASKS_TARGET_COUNT = Option("spark.streaming.kafka.tasks.target.count", "int", None,
                            "the number of tasks a batch aims at (default sc.defaultParallelism)", low=1)
TASKS_TARGET_SIZE = Option("spark.streaming.kafka.tasks.target.size", "int", None,
                           "the most records a packed task reads", low=1)
TASKS_SPLIT_SIZE = Option("spark.streaming.kafka.tasks.split.size", "int", None,
                          "a range of more records is read in pieces (0: never split)", low=0)

#: The Spark conf key that chooses planned tasks (``true``) or one task per range (``false``) for Kafka streams.
PACK_KEY = TASKS_PACK.key
