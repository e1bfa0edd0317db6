"""PySpark's Python Data Source classes of the ``deo-kafka`` sink (the Spark-free logic is in
:mod:`~dstream_exactly_once.structured.kafka_sink`)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Iterator, List, Optional, Tuple

try:
    from pyspark.sql.datasource import DataSource, DataSourceStreamWriter, WriterCommitMessage
except ImportError:  # PySpark 3.5 and older: said by name
    from ...structured._requires import require_data_source_api

    require_data_source_api("the deo-kafka Structured Streaming sink")
    raise

from ...structured._sink_runs import task_run
from ...structured._store_sink import task_batch
from ._sink import (
    KAFKA_SINK_NAME,
    KafkaPartitionCommit,
    KafkaSinkOptions,
    check_kafka_schema,
    check_output_topic,
    commit_kafka_batch,
    write_partition,
)

__all__ = ["KafkaCommitMessage", "KafkaSinkDataSource", "KafkaStreamWriter"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class KafkaCommitMessage(WriterCommitMessage):
    """What one task's Kafka transaction did."""

    commit: KafkaPartitionCommit


class KafkaStreamWriter(DataSourceStreamWriter):
    """One Kafka transaction per partition on executors; the batch id recorded in the store on the driver."""

    def __init__(self, opts: KafkaSinkOptions, columns: Tuple[str, ...]) -> None:
        self.opts = opts
        self.columns = columns

    def write(self, iterator: Iterator[Any]) -> KafkaCommitMessage:
        partition, batch = task_batch(f"deo-kafka app {self.opts.app}")
        run = task_run(f"deo-kafka app {self.opts.app} batch {batch} partition {partition}")
        return KafkaCommitMessage(write_partition(self.opts, batch, partition, iterator, self.columns, run))

    def commit(self, messages: List[Optional[WriterCommitMessage]], batchId: int) -> None:  # noqa: N803
        commit_kafka_batch(self.opts, [m.commit if isinstance(m, KafkaCommitMessage) else None for m in messages],
                           batchId)

    def abort(self, messages: List[Optional[WriterCommitMessage]], batchId: int) -> None:  # noqa: N803
        """Nothing to undo: partitions that committed their Kafka transaction are recognised by their
        markers when Spark runs the batch again; the others aborted theirs."""
        done = sum(1 for m in messages if isinstance(m, KafkaCommitMessage))
        log.warning("deo-kafka app %s batch %d failed; %d partition(s) committed to Kafka and are skipped when the "
                    "batch runs again", self.opts.app, batchId, done)


class KafkaSinkDataSource(DataSource):
    """``writeStream.format("deo-kafka")``: see :mod:`dstream_exactly_once.structured.kafka_sink`."""

    @classmethod
    def name(cls) -> str:
        return KAFKA_SINK_NAME

    def streamWriter(self, schema: Any, overwrite: bool) -> KafkaStreamWriter:  # noqa: N802
        """The writer of a micro-batch (``overwrite``, output mode ``complete``, writes each batch's whole
        result table, as Spark's Kafka sink does)."""
        opts = KafkaSinkOptions.parse(self.options)
        columns = check_kafka_schema([(f.name, f.dataType.simpleString()) for f in schema.fields])
        check_output_topic(opts)
        return KafkaStreamWriter(opts, columns)
