"""Structured Streaming queries from Spark's Kafka source into the ``deo-delta`` sink, in one child driver.

``python -m tests.integration.delta_structured_proc BOOTSTRAP TOPIC EXPECTED BARRIER
STORE APP TABLE CHECKPOINT MODE CRASH [STORE APP TABLE CHECKPOINT MODE CRASH …]``

One SparkSession runs one query per ``STORE APP TABLE CHECKPOINT`` group (each its own store,
table and checkpoint, all reading ``TOPIC``), so one JVM start serves every store of a run. Each
record's value ``v`` becomes the row ``(v BIGINT, part INT = partition)``; at most 60 offsets a
trigger. ``MODE`` is ``append`` or ``merge`` (option ``merge_keys`` ``v``: each batch is ONE Delta
merge commit). ``CRASH`` is ``files:N`` (the query stops in the sink's commit of Spark batch ``N``
after the store's ``pending`` record, before its Delta commit: the tasks' files are written),
``table:N`` (after that batch's Delta commit, before the store's) or ``none``. A query at its crash
point waits there until every crashing query of the run is at its own (each marks its arrival in
the directory ``BARRIER``); then the driver's process group is SIGKILLed, so one kill stops every
store at its own point. Prints ``DONE`` once every table holds ``EXPECTED`` rows.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any, List, Optional, Sequence, Tuple

from dstream_exactly_once.structured._spark_delta_sink import DeltaSinkDataSource, DeltaStreamWriter

from .faults import restartable


class CrashingWriter(DeltaStreamWriter):
    """The sink's writer, SIGKILLing the driver's process group at one point of one batch's commit."""

    def __init__(self, base: DeltaStreamWriter, point: str, at: int, pgid: int, barrier: str, parties: int) -> None:
        super().__init__(base.opts, base.schema)
        self.point, self.at, self.pgid = point, at, pgid
        self.barrier, self.parties = barrier, parties

    def _kill(self) -> None:
        os.makedirs(self.barrier, exist_ok=True)
        with open(os.path.join(self.barrier, self.opts.app), "w") as f:
            f.write(f"{self.point}:{self.at}")
        deadline = time.monotonic() + 300
        while len(os.listdir(self.barrier)) < self.parties and time.monotonic() < deadline:
            time.sleep(0.05)  # the other crashing queries are not at their points yet
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
        point, at = self.options["crash.point"], int(self.options["crash.at"])
        pgid, barrier, parties = int(self.options["crash.pgid"]), self.options["crash.barrier"], \
            int(self.options["crash.parties"])
        self.options = options
        return CrashingWriter(super().streamWriter(schema, overwrite), point, at, pgid, barrier, parties)


Query = Tuple[str, str, str, str, str, str]  # store, app, table, checkpoint, mode, crash


def main(bootstrap: str, topic: str, expected: int, barrier: str, queries: Sequence[Query]) -> None:
    import deltalake

    from dstream_exactly_once.structured import delta_sink_options

    from .structured_sink_proc import kafka_query_session

    spark = kafka_query_session("delta-sink")
    spark.dataSource.register(CrashingDeltaSink)
    rows = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic).option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", 60)
            .option("failOnDataLoss", "true").load()
            .selectExpr("CAST(CAST(value AS STRING) AS BIGINT) AS v", "partition AS part"))
    parties = sum(crash != "none" for *_, crash in queries)

    def start(store: str, app: str, table: str, checkpoint: str, mode: str, crash: str) -> Any:
        point, _, at = crash.partition(":")  # "none": no crash
        merge_keys = ["v"] if mode == "merge" else None
        return (rows.writeStream.format("deo-delta-crashing")
                .options(**delta_sink_options(store, app, table, merge_keys=merge_keys))
                .option("crash.point", point).option("crash.at", at or "0")
                .option("crash.pgid", str(os.getpgid(0))).option("crash.barrier", barrier)
                .option("crash.parties", str(parties)).option("checkpointLocation", checkpoint)
                .trigger(processingTime="200 milliseconds").start())

    started = [start(*query) for query in queries]
    print("STARTED", flush=True)
    tables = [table for _, _, table, *_ in queries]
    while not all(deltalake.DeltaTable.is_deltatable(t) and deltalake.DeltaTable(t).count() >= expected
                  for t in tables):
        for i, query in enumerate(started):
            failure = query.exception()
            if restartable(failure):
                print(f"RESTARTED {queries[i][1]} {str(failure)[:200]!r}", flush=True)
                started[i] = start(*queries[i])
            elif failure is not None:
                raise SystemExit(f"query failed: {failure}")
        time.sleep(0.3)
    for query in started:
        query.stop()
    print("DONE", flush=True)


if __name__ == "__main__":
    a = sys.argv[1:]
    groups = a[4:]
    if len(a) < 4 or not groups or len(groups) % 6:
        sys.exit("want: BOOTSTRAP TOPIC EXPECTED BARRIER STORE APP TABLE CHECKPOINT MODE CRASH [...]; "
                 f"got {a!r}")
    main(a[0], a[1], int(a[2]), a[3], [tuple(groups[i:i + 6]) for i in range(0, len(groups), 6)])  # type: ignore[misc]
