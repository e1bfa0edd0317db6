"""B11 first committed micro-batch after ``start()``: ``python3 -m bench.ss_first [--connect] …``.

Not a test: it prints a table and writes JSON. A topic of ``--records`` records (4 partitions, keys and
headers) is read from ``earliest`` by the ``deo-kafka`` source (the default trigger) into each sink, and
into a ``foreachBatch`` writer of the same rows to the same kind of target without exactly-once:

==========  ==========================================  =============================================
sink        rows (the same for both peers)               ``foreachBatch`` peer ("plain")
==========  ==========================================  =============================================
store       ``incr`` of ``length(value)`` per partition  collect, fold per key, ONE SQLite transaction
            key, ``deo-store`` on SQLite                 of upserts (table created if missing)
kafka       ``key``, ``value`` → a new 4-partition       collect, a kafka-python producer
            topic, ``deo-kafka`` sink (transactions)     (``acks=all``), send all, flush
doris       ``partition``, ``offset``, ``value`` as      collect, ONE Stream Load without a label
            csv → ``deo-doris`` (two-phase)              (the library's Doris client)
delta       ``partition``, ``offset``, ``value`` →       ``deltalake.write_deltalake(toArrow(),
            ``deo-delta`` (one Delta commit)             mode="append")``
==========  ==========================================  =============================================

Every query gets a fresh checkpoint and a fresh target (SQLite file, output topic, Doris table, Delta
directory; the Doris target is the package's protocol double, :class:`DorisProtocolDouble`, in the
session's process). Time: from the call of ``start()`` to the first appearance of batch 0 in the
query's ``recentProgress`` (polled every 20 ms; Spark reports a batch after the sink's commit and the
commit-log entry), with the CPU of the Spark side (driver, JVM, Python workers) meanwhile. All peers
run in ONE session per mode (a persistent process, :mod:`bench.ss_child`): one untimed warm-up query
per peer, then ``--rounds`` rounds running every (mode, sink, peer) once in an order rotated each
round. Per sink and mode: seconds to the first commit, median and spread; the ratio sink / plain
per round; with ``--connect`` also Connect / classic per peer. What each output holds after the first
batch is checked (the query is stopped first).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sqlite3
import sys
from contextlib import ExitStack
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from .common import RECORD_BYTES, log
from .ss_common import (
    Child,
    case_order,
    connect_ratios,
    header,
    pair_ratios,
    produce_topic,
    save,
    start_kafka,
    summarize_runs,
    values_of,
    workdir,
)

SINKS = ("store", "kafka", "doris", "delta")
PEERS = ("sink", "plain")


# ------------------------------------------------------------------------------------------ per sink (in ss_child)
def _store_plain(db_path: str) -> Callable[[Any, int], None]:
    def write(df: Any, _batch_id: int) -> None:
        totals: Dict[Tuple[str, str], int] = {}
        for r in df.collect():
            totals[(r["namespace"], r["key"])] = totals.get((r["namespace"], r["key"]), 0) + int(r["value"])
        con = sqlite3.connect(db_path)
        try:
            with con:
                con.execute("CREATE TABLE IF NOT EXISTS totals (ns TEXT, k TEXT, v INTEGER NOT NULL, "
                            "PRIMARY KEY (ns, k))")
                con.executemany("INSERT INTO totals (ns, k, v) VALUES (?, ?, ?) ON CONFLICT (ns, k) DO UPDATE "
                                "SET v = v + excluded.v", [(ns, k, v) for (ns, k), v in totals.items()])
        finally:
            con.close()

    return write


def _kafka_plain(bootstrap: str, topic: str) -> Callable[[Any, int], None]:
    def write(df: Any, _batch_id: int) -> None:
        from kafka import KafkaProducer

        producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", client_id="deo-bench-ss-plain")
        try:
            for r in df.collect():
                producer.send(topic, key=None if r["key"] is None else bytes(r["key"]), value=bytes(r["value"]))
            producer.flush()
        finally:
            producer.close()

    return write


def _doris_plain(fe: str, table: str, password: str) -> Callable[[Any, int], None]:
    def write(df: Any, _batch_id: int) -> None:
        from dstream_exactly_once.sinks.doris._client import DorisStreamLoadClient

        DorisStreamLoadClient(fe, "bench", table, password=password).load(None, [tuple(r) for r in df.collect()])

    return write


def _delta_plain(path: str) -> Callable[[Any, int], None]:
    def write(df: Any, _batch_id: int) -> None:
        from deltalake import write_deltalake

        write_deltalake(path, df.toArrow(), mode="append")

    return write


def prepare(spark: Any, spec: Dict[str, Any], req: Dict[str, Any], records: Any, work: str,
            targets: Any) -> Tuple[Any, Callable[[], Dict[str, Any]]]:
    """The DataStreamWriter of ``req`` (sink or plain peer of ``req['sink']``) and a check of its output."""
    from dstream_exactly_once.stores import open_store
    from dstream_exactly_once.structured import (
        delta_sink_options,
        doris_sink_options,
        kafka_sink_options,
        store_sink_options,
    )

    from .ss_child import DORIS_PASSWORD, _end_offsets, new_name

    sink, plain, total = req["sink"], req["peer"] == "plain", int(req["total"])
    url, app = f"sqlite:///{work}/store.db", new_name("ss-first")
    if sink == "store":
        rows = records.selectExpr("'bench' AS namespace", "CONCAT('p', CAST(partition AS STRING)) AS key",
                                  "'incr' AS op", "CAST(length(value) AS BIGINT) AS value")
        db = os.path.join(work, "plain.db")
        writer = (rows.writeStream.foreachBatch(_store_plain(db)) if plain else
                  rows.writeStream.format("deo-store").options(**store_sink_options(url, app)))

        def check() -> Dict[str, Any]:
            if plain:
                con = sqlite3.connect(db)
                got = int(con.execute("SELECT COALESCE(SUM(v), 0) FROM totals").fetchone()[0])
                con.close()
            else:
                with open_store(url, app) as store:
                    got = sum(int(v) for v in store.get_values("bench").values())
            return {"value_bytes": got, "ok": got == total * RECORD_BYTES}
        return writer, check
    if sink == "kafka":
        rows = records.selectExpr("key", "value")
        out = targets.new_topic(new_name("ss-first-out"), 4)
        params = {"bootstrap.servers": spec["bootstrap"]}
        writer = (rows.writeStream.foreachBatch(_kafka_plain(spec["bootstrap"], out)) if plain else
                  rows.writeStream.format("deo-kafka").options(**kafka_sink_options(url, app, out, params)))

        def check() -> Dict[str, Any]:  # a transactional topic also holds one commit marker per transaction
            got = sum(_end_offsets(spec["bootstrap"], out).values())
            return {"end_offsets": got, "ok": got >= total}
        return writer, check
    rows = records.selectExpr("CAST(partition AS STRING) AS p", "CAST(offset AS STRING) AS o",
                              "CAST(value AS STRING) AS v")
    if sink == "doris":
        doris, table = targets.doris(), new_name("t").replace("-", "_")
        writer = (rows.writeStream.foreachBatch(_doris_plain(doris.fe_url, table, DORIS_PASSWORD)) if plain else
                  rows.writeStream.format("deo-doris").options(
                      **doris_sink_options(url, app, doris.fe_url, "bench", table, password=DORIS_PASSWORD)))

        def check() -> Dict[str, Any]:
            got = len(doris.rows("bench", table))
            return {"rows": got, "ok": got == total}
        return writer, check
    if sink == "delta":
        path = os.path.join(work, "table")
        rows = records.selectExpr("partition AS p", "offset AS o", "CAST(value AS STRING) AS v")
        writer = (rows.writeStream.foreachBatch(_delta_plain(path)) if plain else
                  rows.writeStream.format("deo-delta").options(**delta_sink_options(url, app, path)))

        def check() -> Dict[str, Any]:
            from deltalake import DeltaTable

            got = int(DeltaTable(path).to_pyarrow_dataset().count_rows())
            return {"rows": got, "ok": got == total}
        return writer, check
    raise ValueError(f"unknown sink {sink!r}; allowed: {', '.join(SINKS)}")


# ------------------------------------------------------------------------------------------ the parent
def table(modes: Sequence[str], sinks: Sequence[str], runs: Dict[Tuple[str, ...], List[Dict[str, Any]]]
          ) -> List[str]:
    lines = ["| mode | sink | peer | first commit s, median [min, max] | trigger ms p50 | start→trigger ms p50 "
             "| Spark CPU s p50 | runs | output checked | flags |", "|---|---|---|---|---:|---:|---:|---:|---|---|"]
    for mode in modes:
        for sink in sinks:
            for peer in PEERS:
                s = summarize_runs(runs.get((mode, sink, peer), []), "first_s")
                lines.append(f"| {mode} | {sink} | {'deo-' + sink if peer == 'sink' else 'foreachBatch'} | "
                             f"{s['text']} | {s['trigger_ms']} | {s['start_ms']} | {s['cpu']} | {s['n']} | "
                             f"{s['checked']} | {s['flags']} |")
    return lines


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m bench.ss_first", description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=10_000, help="records in the input topic (default 10,000)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--sinks", default=",".join(SINKS))
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--connect", action="store_true", help="also run every case through Spark Connect")
    ap.add_argument("--results", default=os.path.join("bench", "results", "ss_first.json"))
    args = ap.parse_args(argv)
    sinks = [s for s in args.sinks.split(",") if s]
    for s in sinks:
        if s not in SINKS:
            ap.error(f"--sinks: unknown sink {s!r}; allowed: {', '.join(SINKS)}")
    if args.rounds < 1 or args.records < 4:
        ap.error(f"--rounds must be >= 1 and --records >= 4, got {args.rounds} and {args.records}")
    notes: List[str] = []
    if "delta" in sinks and importlib.util.find_spec("deltalake") is None:
        sinks.remove("delta")
        notes.append("deo-delta left out: deltalake is not installed (pip install 'dstream-exactly-once[delta]')")
    modes = ["classic", "connect"] if args.connect else ["classic"]
    data: Dict[str, Any] = {"bench": "B11", "args": vars(args), "notes": notes, **header()}
    runs: Dict[Tuple[str, ...], List[Dict[str, Any]]] = {}
    with ExitStack() as stack:
        kafka = start_kafka(stack)
        topic = produce_topic(kafka, "ss-first-in", args.records)
        work = workdir(stack, "deo-bench-ss-first-")
        children = {m: stack.enter_context(Child(m, kafka, args.master, work)) for m in modes}
        cases = [(m, s, p) for m in modes for s in sinks for p in PEERS]

        def run(case: Tuple[str, str, str]) -> Dict[str, Any]:
            mode, sink, peer = case
            return children[mode].request({"op": "first", "sink": sink, "peer": peer, "topic": topic.name,
                                           "total": topic.total})
        for case in cases:  # equal warm-up: one untimed query per peer, in the session it is timed in
            log(f"B11 warm-up {'/'.join(case)}")
            data.setdefault("warmup", {})["/".join(case)] = run(case)
        for r in range(args.rounds):
            for case in case_order(cases, r):
                out = run(case)
                log(f"B11 round {r + 1}/{args.rounds} {'/'.join(case)}: "
                    + (out.get("error") or f"{out['first_s']:.2f} s"))
                runs.setdefault(case, []).append(out)
    report = [f"B11 first committed micro-batch after start(): {topic.total:,} records over 4 partitions, "
              f"source deo-kafka from earliest, {args.master}, one session per mode shared by every peer, "
              f"{args.rounds} rounds after one warm-up query per peer", "", *table(modes, sinks, runs), "",
              "| mode | sink | deo sink / foreachBatch, first commit (per round) |", "|---|---|---|"]
    for mode in modes:
        for sink in sinks:
            ratio = pair_ratios(values_of(runs.get((mode, sink, "sink"), []), "first_s"),
                                values_of(runs.get((mode, sink, "plain"), []), "first_s"))
            report.append(f"| {mode} | {sink} | {ratio['text']} |")
            data.setdefault("ratios", {})[f"{mode}/{sink}"] = ratio
    if args.connect:
        report += ["", "| sink | peer | Connect / classic, first commit (per round) |", "|---|---|---|"]
        for sink in sinks:
            for peer in PEERS:
                ratio = connect_ratios(runs, (sink, peer), "first_s")
                report.append(f"| {sink} | {peer} | {ratio['text']} |")
                data.setdefault("connect_ratios", {})[f"{sink}/{peer}"] = ratio
    report += [f"note: {n}" for n in notes]
    print("\n".join(report))
    data["runs"] = {"/".join(k): v for k, v in runs.items()}
    save(args.results, data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
