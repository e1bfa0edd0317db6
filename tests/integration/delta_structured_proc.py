"""A Structured Streaming query from Spark's Kafka source into the ``deo-delta`` sink, as a child driver.

``python -m tests.integration.delta_structured_proc BOOTSTRAP TOPIC STORE APP TABLE CHECKPOINT EXPECTED
CRASH_POINT CRASH_AT [MODE]``

Each record's value ``v`` becomes the row ``(v BIGINT, part INT = partition)``; at most 60 offsets a
trigger. ``MODE`` is ``append`` (the default) or ``merge`` (option ``merge_keys`` ``v``: each batch is
ONE Delta merge commit). ``CRASH_POINT`` is ``files`` (the driver's process group is SIGKILLed in the
sink's commit of Spark batch ``CRASH_AT`` after the store's ``pending`` record, before its Delta
commit: the tasks' files are written), ``table`` (after that batch's Delta commit, before the
store's) or ``none``. Prints ``DONE`` once the table holds ``EXPECTED`` rows.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any, List, Optional

from dstream_exactly_once.structured._spark_delta_sink import DeltaSinkDataSource, DeltaStreamWriter


class CrashingWriter(DeltaStreamWriter):
    """The sink's writer, SIGKILLing the driver's process group at one point of one batch's commit."""

    def __init__(self, base: DeltaStreamWriter, point: str, at: int, pgid: int) -> None:
        super().__init__(base.opts, base.schema)
        self.point, self.at, self.pgid = point, at, pgid

    def _kill(self) -> None:
        print(f"CRASH: SIGKILL of process group {self.pgid}", flush=True)
        os.killpg(self.pgid, signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)  # a Python worker outside the driver's group dies with it

    def commit(self, messages: List[Optional[Any]], batchId: int) -> None:  # noqa: N803
        from dstream_exactly_once.structured import _delta_sink as delta_sink

        if batchId == self.at and self.point == "files":  # after the store's pending record, before the table
            from dstream_exactly_once.sinks.delta._table import DeltaTarget

            def table_commit(*args: Any, **kwargs: Any) -> Any:
                self._kill()

            DeltaTarget.commit = table_commit  # type: ignore[method-assign]
            DeltaTarget.merge = table_commit  # type: ignore[method-assign]
        if batchId == self.at and self.point == "table":
            def store_commit(*args: Any, **kwargs: Any) -> Any:
                self._kill()

            delta_sink.commit_batch = store_commit  # type: ignore[assignment]
        super().commit(messages, batchId)


class CrashingDeltaSink(DeltaSinkDataSource):
    @classmethod
    def name(cls) -> str:
        return "deo-delta-crashing"

    def streamWriter(self, schema: Any, overwrite: bool) -> DeltaStreamWriter:  # noqa: N802
        options = {k: v for k, v in self.options.items() if not k.lower().startswith("crash.")}
        point, at, pgid = self.options["crash.point"], int(self.options["crash.at"]), int(self.options["crash.pgid"])
        self.options = options
        return CrashingWriter(super().streamWriter(schema, overwrite), point, at, pgid)


def main(bootstrap: str, topic: str, store: str, app: str, table: str, checkpoint: str, expected: int,
         crash_point: str, crash_at: int, mode: str = "append") -> None:
    import deltalake

    from dstream_exactly_once.structured import delta_sink_options

    from .structured_sink_proc import kafka_query_session

    spark = kafka_query_session("delta-sink")
    spark.dataSource.register(CrashingDeltaSink)
    rows = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic).option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", 60)
            .option("failOnDataLoss", "true").load()
            .selectExpr("CAST(CAST(value AS STRING) AS BIGINT) AS v", "partition AS part"))
    merge_keys = ["v"] if mode == "merge" else None
    query = (rows.writeStream.format("deo-delta-crashing")
             .options(**delta_sink_options(store, app, table, merge_keys=merge_keys))
             .option("crash.point", crash_point).option("crash.at", str(crash_at))
             .option("crash.pgid", str(os.getpgid(0))).option("checkpointLocation", checkpoint)
             .trigger(processingTime="200 milliseconds").start())
    print("STARTED", flush=True)
    while not (deltalake.DeltaTable.is_deltatable(table) and deltalake.DeltaTable(table).count() >= expected):
        if query.exception() is not None:
            raise SystemExit(f"query failed: {query.exception()}")
        time.sleep(0.3)
    query.stop()
    print("DONE", flush=True)


if __name__ == "__main__":
    a = sys.argv[1:]
    if len(a) not in (9, 10):
        sys.exit(f"want: BOOTSTRAP TOPIC STORE APP TABLE CHECKPOINT EXPECTED CRASH_POINT CRASH_AT [MODE]; got {a!r}")
    main(a[0], a[1], a[2], a[3], a[4], a[5], int(a[6]), a[7], int(a[8]), *a[9:])
