"""One driver of the teaching demo: both pipelines over the same topic in one StreamingContext.

``python -m dstream_exactly_once.teaching._driver --bootstrap … --topic … --out DIR --run R
--kill-point P`` runs until both pipelines have read the whole topic (prints ``DONE``) or kills
itself — driver, its JVM and, for ``mid-output``, the executor's Python workers — with SIGKILL at
crash point ``P`` in batch :data:`~._points.KILL_TICK` of this run. Output operations per batch, in
this order (:mod:`._points`): at-least-once output, exactly-once batch, at-least-once offsets.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple

from .._command_line import int_at_least, non_empty
from ..stores._base import PlannedBatch, Writes
from ._plain_store import PlainSumStore
from ._points import CRASH_POINTS, KILL_TICK, Trace, check_point

APP_ID = "demo"


def store_url(out: Path) -> str:
    """The exactly-once pipeline's store (SQLite) in the demo's directory."""
    return f"sqlite:///{Path(out).resolve() / 'exactly_once.db'}"


def plain_store_path(out: Path) -> Path:
    """The at-least-once pipeline's store in the demo's directory."""
    return Path(out) / "at_least_once.db"


class RunState:
    """Where this driver run is: its batch count and whether its kill is still to come."""

    def __init__(self, run: int, kill_point: str, trace: Trace, totals: Any) -> None:
        self.run = run
        self.kill_point = kill_point
        self.tick = 0
        self.trace = trace
        self.totals = totals  # () -> dict of both running totals
        self.done = threading.Event()
        self.last_eo_batch: Optional[int] = None

    def armed(self, point: str) -> bool:
        """Whether the kill of this run happens at ``point`` in the current batch."""
        return self.kill_point == point and self.tick == KILL_TICK

    def record(self, event: str, **extra: Any) -> None:
        self.trace.append({"event": event, "run": self.run, "tick": self.tick, **self.totals(), **extra})

    def kill(self, point: str) -> None:
        """Trace the kill, then SIGKILL this driver's process group (the driver and its JVM)."""
        self.record("kill", point=point)
        print(f"KILL {point} run={self.run} batch={self.tick}", flush=True)
        os.killpg(os.getpgrp(), signal.SIGKILL)


def _sum_records(records: Iterable[Tuple[Any, Any]]) -> Iterator[Tuple[int, int]]:
    total = count = 0
    for _key, value in records:
        total += int(value)
        count += 1
    yield total, count


def _add(a: Tuple[int, int], b: Tuple[int, int]) -> Tuple[int, int]:
    return a[0] + b[0], a[1] + b[1]


def attach(ssc: Any, params: Dict[str, Any], topic: str, plain: PlainSumStore, eo_store: Any,
           state: RunState, target: Dict[Any, int]) -> Any:
    """Create both streams and their three output operations (in the order of :mod:`._points`).

    The exactly-once stream plans each batch when its output job runs (``plan_on_generate=False``),
    not when Spark generates the batch as ``createExactlyOnceStream`` does: so its planning, too, lies
    between the at-least-once output and its offset write, and ``before-planning`` is a kill before
    the batch is planned."""
    from ..core._retry import check_retry_policy
    from ..engine._committer import BatchCommitter
    from ..kafka._offsets import utf8_decoder
    from ..kafka.spark._direct import build_direct_batches
    from ..kafka.spark._utils import KafkaUtils
    from ..streaming._exactly_once import ExactlyOnceDStream

    from_offsets = plain.offsets() or None
    alo = KafkaUtils.createDirectStream(ssc, [topic], params, fromOffsets=from_offsets, poll_timeout_ms=30000)
    # createExactlyOnceStream(ssc, params, [topic], store=eo_store, failOnDataLoss=True, poll_timeout_ms=30000)
    batches = build_direct_batches(ssc, [topic], params, fromOffsets=None, keyDecoder=utf8_decoder,
                                   valueDecoder=utf8_decoder, messageHandler=None, strategy=None,
                                   failOnDataLoss=True, poll_timeout_ms=30000, discovery_interval_s=5.0)
    committer = BatchCommitter(eo_store, batches, app_id=APP_ID, retain_batches=100, retry=check_retry_policy(None),
                               start=False, close_source=batches.close)
    eo = ExactlyOnceDStream(ssc, committer, batches.rdd, tasks=batches.exactly_once_tasks(), plan_on_generate=False)
    has_data = {"alo": False}

    def alo_output(rdd: Any) -> None:  # 1. at-least-once: the output, a plain write
        has_data["alo"] = any(r.count() for r in rdd.offsetRanges())
        if not has_data["alo"]:
            return
        state.tick += 1
        total, count = rdd.mapPartitions(_sum_records).fold((0, 0), _add)
        plain.add(total, count)
        if state.armed("before-planning"):
            state.kill("before-planning")

    def eo_output(batch: PlannedBatch, rdd: Any) -> Writes:  # 2. exactly-once: one transaction
        if state.armed("after-offset-log"):
            state.kill("after-offset-log")
        mid = state.armed("mid-output")
        driver_group = os.getpgrp()

        def summed(index: int, records: Iterable[Tuple[Any, Any]]) -> Iterator[Tuple[int, int]]:
            # the batch's first task dies halfway through its records (a task may hold several ranges:
            # its own records, not a range's, say where halfway is; the planner makes no empty task)
            victim = mid and index == 0
            rows = list(records) if victim else records
            stop_after = max(1, len(rows) // 2) if isinstance(rows, list) else 0
            total = count = 0
            for _key, value in rows:
                total += int(value)
                count += 1
                if victim and count == stop_after:  # an executor task dies mid-output
                    os.killpg(driver_group, signal.SIGKILL)
                    os.killpg(0, signal.SIGKILL)  # and the executor's Python workers with it
            yield total, count

        if mid:
            state.record("kill", point="mid-output")  # nothing commits during the job below
            print(f"KILL mid-output run={state.run} batch={state.tick}", flush=True)
        total, count = rdd.mapPartitionsWithIndex(summed).fold((0, 0), _add)
        if state.armed("after-output-before-commit"):
            state.kill("after-output-before-commit")
        return (Writes().incr("totals", "sum", total).incr("totals", "count", count)
                .put_batch_rows("batches", [{"batch_id": batch.batch_id, "count": count, "sum": total}]))

    def alo_offsets(rdd: Any) -> None:  # 3. at-least-once: the offsets, a second write
        if state.armed("after-commit"):
            state.kill("after-commit")
        if state.kill_point != "none" and state.tick == KILL_TICK:  # the point did not come up (no data)
            state.kill(state.kill_point + " (late)")
        if has_data["alo"]:
            plain.store_offsets({r.topicPartition(): r.untilOffset for r in rdd.offsetRanges()})
        eo_batch = eo_store.last_committed_batch_id()
        if has_data["alo"] or eo_batch != state.last_eo_batch:
            state.last_eo_batch = eo_batch
            state.record("batch")
        if plain.offsets() == target and eo_store.load_offsets() == target:
            state.done.set()

    alo.foreachRDD(alo_output)
    eo.commit_each_batch(eo_output)
    alo.foreachRDD(alo_offsets)
    return eo


def run(args: argparse.Namespace) -> int:
    """Run one driver until both pipelines are complete (exit 0) or the planned SIGKILL."""
    from pyspark.streaming import StreamingContext

    from ..kafka._metadata import KafkaMetadata
    from ..kafka._offsets import TopicAndPartition
    from ..kafka._params import parse_kafka_params
    from ..stores import open_store
    from ..testing._child_driver import run_until_done
    from ..testing._spark import make_spark_context

    out = Path(args.out)
    params = {"bootstrap.servers": args.bootstrap, "auto.offset.reset": "smallest"}
    md = KafkaMetadata(parse_kafka_params(params))
    try:
        parts = md.partitions([args.topic])[args.topic]
        target = md.latest([TopicAndPartition(args.topic, p) for p in parts])
    finally:
        md.close()
    plain = PlainSumStore(plain_store_path(out))
    eo_store = open_store(store_url(out), APP_ID)
    reader = open_store(store_url(out), APP_ID)  # reads the totals for the trace

    def totals() -> Dict[str, int]:
        alo_sum, alo_count, _ = plain.totals()
        return {"alo_sum": alo_sum, "alo_count": alo_count,
                "eo_sum": int(reader.get_value("totals", "sum") or 0),
                "eo_count": int(reader.get_value("totals", "count") or 0)}

    state = RunState(args.run, args.kill_point, Trace(out / "trace.jsonl"), totals)
    sc = make_spark_context(args.master, f"deo-teaching-demo-run{args.run}",
                            {"spark.streaming.kafka.maxRatePerPartition": args.rate})
    ssc = StreamingContext(sc, args.batch_seconds)
    eo = attach(ssc, params, args.topic, plain, eo_store, state, target)
    eo.progress_to(str(out / "progress.jsonl"))  # one JSON line per batch, for dstream-eo chart
    eo.committer.start()  # the epoch now (ssc.start() would take it): the line below reports it
    print(f"STARTED at-least-once resumes from {len(plain.offsets())} stored offsets; exactly-once takes epoch "
          f"{eo.epoch}, replays {len(eo_store.pending_batches())} logged batch(es)", flush=True)
    return run_until_done(ssc, state.done.is_set)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m dstream_exactly_once.teaching._driver",
                                description="one driver of the teaching demo (both pipelines)")
    p.add_argument("--bootstrap", required=True, type=non_empty)
    p.add_argument("--topic", required=True, type=non_empty)
    p.add_argument("--out", required=True, type=non_empty, help="the demo's directory (stores, trace)")
    p.add_argument("--run", type=int_at_least(1), default=1)
    p.add_argument("--kill-point", type=check_point, default="none",
                   help=f"one of {', '.join(CRASH_POINTS)} or none")
    p.add_argument("--rate", type=int_at_least(1), default=250, help="maxRatePerPartition (records/s)")
    p.add_argument("--batch-seconds", type=int_at_least(1), default=1)
    p.add_argument("--master", type=non_empty, default="local[2,4]")
    return p


def main(argv: Optional[List[str]] = None) -> int:
    return run(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
