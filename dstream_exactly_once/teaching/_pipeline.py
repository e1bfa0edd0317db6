"""The exactly-once demonstration: sum 1..N through Kafka and Spark, crash the driver, check.

``python -m dstream_exactly_once.teaching._pipeline pipeline …`` runs one driver of the pipeline
(the fault-injection tests SIGKILL it at random moments, or it kills itself at its crash points
with ``--crash-prob``); ``dstream-eo demo`` is the two-pipeline teaching demo in :mod:`._show`.

The pipeline reads integers from a topic and commits, per application:
- ``totals/sum`` and ``totals/count`` (increments),
- ``words/w<d>`` counts of each value's last digit (per-key word counts),
- one time-keyed row per batch (or per batch partition) in ``batches`` with its count and sum.
With ``--pattern batch`` results are aggregated on the driver and committed with the batch; with
``--pattern partition`` each executor task commits its own range's results.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sys
from typing import Any, Dict, Iterable, List, Optional, Tuple, Union

from .._command_line import OneLineParser, int_at_least, non_empty, probability
from ..kafka._offsets import OffsetRange, TopicAndPartition
from ..stores._base import PlannedBatch, Writes


def _crash(point: str, prob: float) -> None:
    if prob > 0 and random.random() < prob:
        print(f"CRASH at {point}", flush=True)
        os.killpg(os.getpgrp(), signal.SIGKILL)


def summarize(values: Iterable[int]) -> Dict[str, Any]:
    total = count = 0
    words: Dict[str, int] = {}
    for v in values:
        total += v
        count += 1
        w = f"w{v % 10}"
        words[w] = words.get(w, 0) + 1
    return {"sum": total, "count": count, "words": words}


def to_writes(summary: Dict[str, Any], row: Dict[str, Any]) -> Writes:
    w = Writes().incr("totals", "sum", summary["sum"]).incr("totals", "count", summary["count"])
    for word, n in summary["words"].items():
        w.incr("words", word, n)
    return w.put_batch_rows("batches", [{**row, "count": summary["count"], "sum": summary["sum"]}])


def _crashing_store(store: Any, prob: float) -> Any:
    """Wrap ``store`` (instance attributes, driver side only) with crash points around the log and
    commits; ``store.on_commit`` is called after each successful commit."""
    log_batch, commit, mark = store.log_batch, store.commit, store.mark_committed
    store.on_commit = lambda: None

    def crashing_log_batch(epoch: int, batch: PlannedBatch) -> None:
        log_batch(epoch, batch)
        _crash("after-offset-log", prob)

    def crashing_commit(*a: Any, **kw: Any) -> Any:
        _crash("before-commit", prob)
        out = commit(*a, **kw)
        _crash("after-commit", prob)
        store.on_commit()
        return out

    def crashing_mark(*a: Any, **kw: Any) -> Any:
        _crash("before-commit-log", prob)
        out = mark(*a, **kw)
        _crash("after-commit", prob)
        store.on_commit()
        return out

    store.log_batch, store.commit, store.mark_committed = crashing_log_batch, crashing_commit, crashing_mark
    return store


def _attach_output(stream: Any, pattern: str, args: argparse.Namespace, params: Dict[str, Any],
                   executor_prob: float) -> None:
    if pattern == "batch":
        def per_batch(batch: PlannedBatch, rdd: Any) -> Writes:
            def values(it: Iterable[Any]) -> Iterable[Dict[str, Any]]:
                vals = []
                for _k, v in it:
                    vals.append(int(v))
                    _crash("executor-mid-batch", executor_prob / 1000)
                yield summarize(vals)

            merged = summarize([])
            for s in rdd.mapPartitions(values).collect():
                merged["sum"] += s["sum"]
                merged["count"] += s["count"]
                for w, n in s["words"].items():
                    merged["words"][w] = merged["words"].get(w, 0) + n
            return to_writes(merged, {"batch_id": batch.batch_id, "part": "all"})

        stream.commit_each_batch(per_batch, offset_log=args.offset_log)
    elif pattern == "doris":
        from ..sinks import DorisSink, DorisStreamLoadClient

        client = DorisStreamLoadClient(args.doris_fe, "demo", "numbers", user="root",
                                       password=os.environ.get("DEO_DORIS_PASSWORD", ""), format="json",
                                       backoff_s=0.05, max_backoff_s=0.5)

        def rows(records: Iterable[Any]) -> Iterable[Dict[str, int]]:
            for _k, v in records:
                _crash("executor-mid-batch", executor_prob / 1000)
                yield {"v": int(v)}

        stream.write_each_partition(DorisSink(client), rows)
    elif pattern == "kafka":
        from ..sinks import KafkaTransactionalSink

        def out_rows(records: Iterable[Any]) -> Iterable[Any]:
            for _k, v in records:
                _crash("executor-mid-batch", executor_prob / 1000)
                yield (None, v)

        stream.write_each_partition(KafkaTransactionalSink(params, args.out_topic), out_rows)
    else:
        def per_partition(records: Iterable[Any], r: Union[OffsetRange, Tuple[OffsetRange, ...]],
                          batch: PlannedBatch) -> Writes:
            vals = []
            for _k, v in records:
                vals.append(int(v))
                _crash("executor-mid-batch", executor_prob / 1000)
            _crash("executor-before-commit", executor_prob)
            ranges = r if isinstance(r, tuple) else (r,)  # a packed task holds several ranges
            part = ",".join(f"{x.topic}/{x.partition}" for x in ranges)
            return to_writes(summarize(vals), {"batch_id": batch.batch_id, "part": part})

        stream.commit_each_partition(per_partition)


def run_pipeline(args: argparse.Namespace) -> int:
    from pyspark.streaming import StreamingContext

    from ..kafka._metadata import KafkaMetadata
    from ..kafka._params import parse_kafka_params
    from ..kafka.spark._utils import KafkaUtils
    from ..stores import open_store
    from ..testing._child_driver import run_until_done
    from ..testing._spark import make_spark_context

    if len(args.store) > 1 and args.pattern in ("doris", "kafka"):
        raise SystemExit(f"--pattern {args.pattern} writes one output: give one --store, got {len(args.store)}")
    random.seed(args.seed if args.seed is not None else os.getpid())
    params = {"bootstrap.servers": args.bootstrap, "auto.offset.reset": "earliest"}
    md = KafkaMetadata(parse_kafka_params(params))
    parts = md.partitions([args.topic])[args.topic]
    target = md.latest([TopicAndPartition(args.topic, p) for p in parts])
    md.close()
    sc = make_spark_context(args.master, f"deo-pipeline-{args.app_id}",
                            {"spark.streaming.kafka.maxRatePerPartition": args.rate})
    ssc = StreamingContext(sc, args.batch_seconds)
    prob = args.crash_prob
    executor_prob = prob / 20
    # pattern "both": two applications in one driver, one per output pattern, so a kill hits both;
    # several --store: the application(s) once per store, all in this driver
    per_store = ([(f"{args.app_id}-batch", "batch"), (f"{args.app_id}-partition", "partition")]
                 if args.pattern == "both" else [(args.app_id, args.pattern)])
    apps = [(url, app, pattern) for url in args.store for app, pattern in per_store]
    stores = [_crashing_store(open_store(url, app), prob) for url, app, _ in apps]
    done = {"flag": False}

    def check_done() -> None:
        done["flag"] = all(st.load_offsets() == target for st in stores)

    for st in stores:
        st.on_commit = check_done  # type: ignore[attr-defined]
    check_done()
    if done["flag"]:
        print("DONE (already complete)", flush=True)
        return 0
    for st, (_url, _app, pattern) in zip(stores, apps, strict=True):
        stream = KafkaUtils.createExactlyOnceStream(ssc, params, [args.topic], store=st,
                                                    failOnDataLoss=True, poll_timeout_ms=30000)
        _attach_output(stream, pattern, args, params, executor_prob)
        pending = len(st.pending_batches())
        stream.committer.start()  # the epoch now (ssc.start() would take it): the line below reports it
        print(f"STARTED {st.app_id} epoch={stream.epoch} pending={pending}", flush=True)

    return run_until_done(ssc, lambda: done["flag"])


def verify(store_url: str, app_id: str, n: int, pattern: str) -> List[str]:
    """Problems with the stored results of a finished pipeline over the integers 1..n."""
    from ..stores import open_store

    problems = []
    with open_store(store_url, app_id) as store:
        s, c = store.get_value("totals", "sum"), store.get_value("totals", "count")
        if s != n * (n + 1) // 2:
            problems.append(f"sum is {s}, expected {n * (n + 1) // 2}")
        if c != n:
            problems.append(f"count is {c}, expected {n}")
        expected_words = summarize(range(1, n + 1))["words"]
        words = store.get_values("words")
        if words != expected_words:
            problems.append(f"word counts {words} != {expected_words}")
        rows = store.get_batch_rows("batches")
        total_rows = sum(r["count"] for batch_rows in rows.values() for r in batch_rows)
        if total_rows != n:
            problems.append(f"time-keyed rows count {total_rows} records, expected {n}")
        last = store.last_committed_batch_id()
        if last is None or sorted(rows) != [b for b in range(last + 1) if rows.get(b)]:
            problems.append(f"batch rows ids {sorted(rows)} are not the committed batches 0..{last}")
    return problems


def add_pipeline_arguments(pipe: argparse.ArgumentParser) -> None:
    """The internal ``pipeline`` subcommand's options (one driver of the demo pipeline)."""
    pipe.add_argument("--bootstrap", required=True, type=non_empty)
    pipe.add_argument("--topic", required=True, type=non_empty)
    pipe.add_argument("--store", required=True, type=non_empty, action="append",
                      help="store URL; repeated: the same application(s) on each store, in this one driver")
    pipe.add_argument("--app-id", required=True, type=non_empty)
    pipe.add_argument("--pattern", choices=["batch", "partition", "both", "doris", "kafka"], default="batch")
    pipe.add_argument("--offset-log", choices=["ahead", "in_commit"], default="ahead",
                      help="commit_each_batch's offset_log mode (pattern batch)")
    pipe.add_argument("--out-topic", default=None, help="output topic (pattern kafka)")
    pipe.add_argument("--doris-fe", default=None, help="Doris FE URL (pattern doris)")
    pipe.add_argument("--rate", type=int_at_least(1), default=2000, help="maxRatePerPartition (records/s)")
    pipe.add_argument("--batch-seconds", type=int_at_least(1), default=1)
    pipe.add_argument("--master", default="local[2,4]", type=non_empty)  # local[N] never retries a task
    pipe.add_argument("--crash-prob", type=probability, default=0.0)
    pipe.add_argument("--seed", type=int, default=None)


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``python -m dstream_exactly_once.teaching._pipeline pipeline …``."""
    parser = OneLineParser(prog="python -m dstream_exactly_once.teaching._pipeline",
                           description="One driver of the exactly-once sum pipeline (crash points optional).")
    sub = parser.add_subparsers(dest="cmd", required=True, metavar="COMMAND", parser_class=OneLineParser)
    add_pipeline_arguments(sub.add_parser("pipeline", help="run one driver of the exactly-once sum pipeline"))
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    """Run one pipeline driver with ``argv`` (``sys.argv[1:]`` when None); return its exit status."""
    return run_pipeline(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
