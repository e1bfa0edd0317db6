"""Child driver of the ``deo-kafka`` source's SIGKILL matrix (``test_structured_kafka_source_faults.py``).

``python -m tests.integration.kafka_source_faults_proc BOOTSTRAP TOPIC CHECKPOINTS HOLD_DIR FE_URL CELLS_JSON``

One Spark driver (one JVM start) running one query per cell of ``CELLS_JSON`` (a list of
``{"sink": "anchored"|"store"|"kafka"|"doris", "store": URL, "app": APP, "out": TOPIC_OR_TABLE}``), every
query reading ``TOPIC`` with ``readStream.format("deo-kafka")`` (at most 24 offsets a trigger, tasks of
at most 8 offsets: a hot partition's range is split, the small ones are packed) on checkpoint
``CHECKPOINTS/APP``:

- ``store``: ``deo-store``, each value one ``incr`` of ``seen``;
- ``anchored``: the same with ``anchor=true``, the source starting a new checkpoint from the store's
  positions (``starting.positions.store``/``.app``);
- ``kafka``: ``deo-kafka`` into topic ``out`` (key and value: the input value);
- ``doris``: ``deo-doris`` into ``db.<out>`` of the Doris protocol double at ``FE_URL``.

Starts the queries one after the other (each once it finished a trigger, holds or failed, at most
20 s), prints ``STARTED`` once every query runs and then runs until it is killed; a query failing with a
known start-up race is started again (``RESTARTED``), any other failure ends the driver (``FAILED``,
exit 3).

Kill points (test-only; nothing of the library is changed): the formats registered here are the
library's classes with holds a test arms per query by creating a file ``HOLD_DIR/APP/<point>``:

- ``plan-offsets``: the source's ``latestOffset`` on the driver holds after planning a new
  micro-batch's end offset (Spark has not logged it);
- ``plan-tasks``: the source's ``partitions`` on the driver holds after planning a micro-batch's
  tasks (Spark logged its offset; no task ran);
- ``after-commit``: the sink's ``commit`` holds after its store transaction (and, for Doris, its
  Doris commits), before Spark's commit-log entry.

A held query writes ``HOLD_DIR/APP/held`` (``<point> <batch id or -1>``) and waits to be killed
(the other queries go on). Every sink ``commit`` also appends ``<batch id> <tasks>`` to
``HOLD_DIR/APP/tasks``: the number of Spark tasks (commit messages) of the micro-batch.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any, Dict, List, Optional

from dstream_exactly_once.kafka.structured._source_options import KafkaSourceOptions, parse_kafka_source_options
from dstream_exactly_once.kafka.structured._spark_sink import KafkaStreamWriter
from dstream_exactly_once.kafka.structured._spark_source import KafkaDataSource, KafkaSourceReader
from dstream_exactly_once.structured._spark_doris_sink import DorisSinkDataSource, DorisStreamWriter
from dstream_exactly_once.structured._spark_store_sink import StoreSinkDataSource, StoreStreamWriter

from .faults import restartable, wait_settled

#: Environment variable naming the hold directory (Spark's Python workers inherit the driver's environment).
HOLD_DIR = "KAFKA_SOURCE_FAULTS_HOLD_DIR"
#: The source option naming the query's application (for its holds); removed before the source's own checks.
HOLD_APP = "hold.app"
#: Source options of every query: the hot partition's ranges are split, the others packed.
MAX_OFFSETS, TASK_SIZE = 24, 8

def _dir(app: Optional[str]) -> str:
    return os.path.join(os.environ.get(HOLD_DIR) or "", app or "")


def _hold(app: Optional[str], point: str, batch_id: int = -1) -> None:
    """Hold here (until the process is killed) when the test armed ``point`` for ``app``."""
    directory = _dir(app)
    if not app or not os.path.exists(os.path.join(directory, point)):
        return
    with open(os.path.join(directory, "held.tmp"), "w") as f:
        f.write(f"{point} {batch_id}")
    os.replace(os.path.join(directory, "held.tmp"), os.path.join(directory, "held"))
    parent = os.getppid()
    while os.getppid() == parent:  # the test SIGKILLs the driver's process group; a worker outside it
        time.sleep(0.2)  # notices its parent's death here
    os._exit(1)


def _record_tasks(app: str, batch_id: int, messages: List[Any]) -> None:
    with open(os.path.join(_dir(app), "tasks"), "a") as f:
        f.write(f"{batch_id} {len(messages)}\n")


class HoldingKafkaSourceReader(KafkaSourceReader):
    """The ``deo-kafka`` source's reader, holding after planning an offset or a micro-batch's tasks."""

    def __init__(self, opts: KafkaSourceOptions, parallelism: Optional[int], app: Optional[str]) -> None:
        super().__init__(opts, parallelism)
        self.app = app

    def latestOffset(self, start: Optional[Dict[str, Any]] = None, limit: Any = None) -> Dict[str, Any]:  # noqa: N802
        before = start if start is not None else self.planner._doc
        end = super().latestOffset(start, limit)
        if before is not None and end != before:
            _hold(self.app, "plan-offsets")
        return end

    def partitions(self, start: Dict[str, Any], end: Dict[str, Any]) -> Any:
        tasks = super().partitions(start, end)
        _hold(self.app, "plan-tasks")
        return tasks


class HoldingKafkaWriter(KafkaStreamWriter):
    def commit(self, messages: List[Any], batchId: int) -> None:  # noqa: N803
        _record_tasks(self.opts.app, batchId, messages)
        super().commit(messages, batchId)
        _hold(self.opts.app, "after-commit", batchId)


class HoldingKafkaDataSource(KafkaDataSource):
    """``deo-kafka`` (source and sink) with the holds."""

    default_parallelism = 2

    def _source_options(self) -> KafkaSourceOptions:
        return parse_kafka_source_options({k: v for k, v in self.options.items() if k.lower() != HOLD_APP})

    def streamReader(self, schema: Any) -> HoldingKafkaSourceReader:  # noqa: N802
        base = super().streamReader(schema)
        return HoldingKafkaSourceReader(base.opts, self.default_parallelism, self.options.get(HOLD_APP))

    def streamWriter(self, schema: Any, overwrite: bool) -> HoldingKafkaWriter:  # noqa: N802
        base = super().streamWriter(schema, overwrite)
        return HoldingKafkaWriter(base.opts, base.columns)


class HoldingStoreWriter(StoreStreamWriter):
    def commit(self, messages: List[Any], batchId: int) -> None:  # noqa: N803
        _record_tasks(self.opts.app, batchId, messages)
        super().commit(messages, batchId)
        _hold(self.opts.app, "after-commit", batchId)


class HoldingStoreSink(StoreSinkDataSource):
    def streamWriter(self, schema: Any, overwrite: bool) -> HoldingStoreWriter:  # noqa: N802
        return HoldingStoreWriter(super().streamWriter(schema, overwrite).opts)


class HoldingDorisWriter(DorisStreamWriter):
    def commit(self, messages: List[Any], batchId: int) -> None:  # noqa: N803
        _record_tasks(self.opts.app, batchId, messages)
        super().commit(messages, batchId)
        _hold(self.opts.app, "after-commit", batchId)


class HoldingDorisSink(DorisSinkDataSource):
    def streamWriter(self, schema: Any, overwrite: bool) -> HoldingDorisWriter:  # noqa: N802
        return HoldingDorisWriter(super().streamWriter(schema, overwrite).opts)


def _session() -> Any:
    from pyspark.sql import SparkSession

    from dstream_exactly_once.testing._spark import spark_env

    os.environ.update(spark_env())
    spark = (SparkSession.builder.master("local[2]").appName("kafka-source-faults")
             .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1").config("spark.sql.shuffle.partitions", "2")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    for source in (HoldingKafkaDataSource, HoldingStoreSink, HoldingDorisSink):
        spark.dataSource.register(source)
    return spark


def drive(bootstrap: str, topic: str, checkpoints: str, hold_dir: str, fe_url: str, cells: List[Dict[str, str]]) -> int:
    os.environ[HOLD_DIR] = hold_dir  # before the JVM starts: its Python workers inherit it
    from dstream_exactly_once.structured import doris_sink_options, kafka_sink_options, store_sink_options

    spark = _session()

    def start(cell: Dict[str, str]) -> Any:
        sink, url, app, out = cell["sink"], cell["store"], cell["app"], cell["out"]
        reader = (spark.readStream.format("deo-kafka").option("kafka.bootstrap.servers", bootstrap)
                  .option("subscribe", topic).option("startingOffsets", "earliest").option("failOnDataLoss", "true")
                  .option("maxOffsetsPerTrigger", MAX_OFFSETS).option("tasks.target.size", TASK_SIZE)
                  .option("tasks.split.size", TASK_SIZE).option(HOLD_APP, app))
        if sink in ("store", "anchored"):
            if sink == "anchored":
                reader = reader.option("starting.positions.store", url).option("starting.positions.app", app)
            writer = (reader.load().selectExpr("'seen' AS namespace", "CAST(value AS STRING) AS key", "'incr' AS op",
                                               "CAST(1 AS BIGINT) AS value")
                      .writeStream.format("deo-store")
                      .options(**store_sink_options(url, app, anchor=sink == "anchored")))
        elif sink == "kafka":
            writer = (reader.load().selectExpr("CAST(value AS STRING) AS key", "value").writeStream.format("deo-kafka")
                      .options(**kafka_sink_options(url, app, out, {"bootstrap.servers": bootstrap},
                                                    transaction_timeout_ms=20000)))
        else:
            writer = (reader.load().selectExpr("CAST(value AS STRING) AS v").writeStream.format("deo-doris")
                      .options(**doris_sink_options(url, app, fe_url, "db", out, password="doris-pw")))
        return (writer.option("checkpointLocation", os.path.join(checkpoints, app))
                .trigger(processingTime="300 milliseconds").start())

    queries: Dict[str, Any] = {}
    for cell in cells:  # one at a time: ten Python source runners starting at once miss Spark's 10 s
        queries[cell["app"]] = query = start(cell)
        wait_settled(query, os.path.join(_dir(cell["app"]), "held"), 20.0)
    print("STARTED", flush=True)
    while True:
        for cell in cells:
            failure = queries[cell["app"]].exception()
            if restartable(failure):
                print(f"RESTARTED {cell['app']} {str(failure)[:200]!r}", flush=True)
                queries[cell["app"]] = start(cell)
            elif failure is not None:
                print(f"FAILED {cell['app']} {failure}", flush=True)
                return 3
        time.sleep(0.3)


if __name__ == "__main__":
    a = sys.argv[1:]
    if len(a) != 6:
        sys.exit(f"want: BOOTSTRAP TOPIC CHECKPOINTS HOLD_DIR FE_URL CELLS_JSON; got {a!r}")
    sys.exit(drive(a[0], a[1], a[2], a[3], a[4], json.loads(a[5])))
