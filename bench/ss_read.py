"""B10 Structured Streaming backlog read: ``python3 -m bench.ss_read [--records N] [--connect] …``.

Not a test: it prints a table and writes JSON. A backlog of ``--records`` records (4 partitions,
100-byte values, keys and one header each) is read to its end by a streaming query with
``Trigger.AvailableNow`` from ``earliest`` with ``includeHeaders``, every column consumed (``key``,
``value``, ``timestamp`` and ``headers`` cast to strings, ``topic``, ``partition``, ``offset``,
``timestampType``, all folded by one aggregate in ``foreachBatch``, so nothing is pruned), by:

- ``jvm``: Spark's Kafka source (``format("kafka")``, ``spark-sql-kafka-0-10``);
- ``deo``: this library's ``format("deo-kafka")`` (kafka-python reader);
- ``deo-ck``: the same with ``reader=confluent-kafka`` (left out when confluent-kafka is not installed).

The same session for all three (:mod:`bench.ss_child`: one persistent process per mode, ``--master``,
the same Spark settings), the same ``kafka.*`` consumer settings (:data:`bench.common.READ_SETTINGS`;
the JVM source also gets a fixed ``kafka.group.id`` so its consumer pool is reused across queries, as
in B1), the same query and aggregate. One untimed warm-up query per peer, then ``--rounds`` rounds
running every (mode, peer) once in an order rotated each round. Per run: wall time from ``start()`` to
the query's end, CPU seconds of the Spark side (the driver, its JVM — or the Connect server's — and
the Python workers) and, apart, of the Kafka broker; records per CPU-second and per wall-second;
the aggregate checked against the topic's known contents (record count, key / value / topic lengths,
partition and offset sums) and across peers (timestamp and header text). Ratios deo / jvm are taken
round by round (the same round's runs) and printed as median [min, max]; with ``--connect`` every
case also runs through Spark Connect and Connect / classic is printed per peer.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from contextlib import ExitStack
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .common import RECORD_BYTES, log, median
from .ss_common import (
    PARTITIONS,
    Child,
    Topic,
    case_order,
    connect_ratios,
    flags,
    header,
    invalid,
    pair_ratios,
    produce_topic,
    record_key,
    save,
    spread_text,
    start_kafka,
    workdir,
)

PEERS = ("jvm", "deo", "deo-ck")
LABELS = {"jvm": "Spark JVM source (format kafka)", "deo": "deo-kafka (kafka-python)",
          "deo-ck": "deo-kafka (confluent-kafka)"}
Runs = Dict[Tuple[str, ...], List[Dict[str, Any]]]


def expected_sums(topic: Topic) -> Dict[str, int]:
    """The aggregate's fields that the topic's contents fix (timestamps and header text are compared
    across peers instead)."""
    n = topic.total
    return {"n": n, "key_chars": len(record_key(0)) * n,  # every key has the same length
            "value_chars": RECORD_BYTES * n, "topic_chars": len(topic.name) * n,
            "partition_sum": sum(p * end for p, end in topic.per_partition.items()),
            "offset_sum": sum(end * (end - 1) // 2 for end in topic.per_partition.values()), "type_sum": 0}


def check_sums(run: Dict[str, Any], expected: Dict[str, int], reference: Optional[Dict[str, int]]) -> List[str]:
    """What is wrong with a run's aggregate: fields off the expected values, or (``reference``: another
    peer's) timestamp / header text that differs."""
    sums = run.get("sums") or {}
    wrong = [f"{k} {sums.get(k)} != {v}" for k, v in expected.items() if sums.get(k) != v]
    if reference is not None:
        wrong += [f"{k} {sums.get(k)} != {reference.get(k)} (other peer)" for k in ("timestamp_chars", "header_chars")
                  if sums.get(k) != reference.get(k)]
    return wrong


def rates(runs: Sequence[Dict[str, Any]], what: str) -> List[Optional[float]]:
    """Records per CPU-second (``what="cpu"``) or per wall-second (``"wall"``) per round; None for a
    failed or flagged round."""
    return [None if "error" in r or invalid(r) or float(r[what]) <= 0 else r["records"] / float(r[what]) for r in runs]


def table(modes: Sequence[str], peers: Sequence[str], runs: Runs, expected: Dict[str, int]) -> List[str]:
    lines = ["| mode | peer | records per CPU-second, median [min, max] | records per wall-second | wall s | "
             "Spark CPU s | broker CPU s | cores used | batches | aggregate checked | flags |",
             "|---|---|---|---|---:|---:|---:|---:|---:|---|---|"]
    reference = next((r["sums"] for rs in runs.values() for r in rs if "sums" in r), None)
    for mode in modes:
        for peer in peers:
            rs = runs.get((mode, peer), [])
            ok = [r for r in rs if "error" not in r]
            cpu_rates = [x for x in rates(rs, "cpu") if x is not None]
            wall_rates = [x for x in rates(rs, "wall") if x is not None]
            wrong = sorted({w for r in ok for w in check_sums(r, expected, reference)})
            notes = sorted({f for r in ok for f in flags(r)})
            notes += [f"{len(rs) - len(ok)} failed: {next(r['error'] for r in rs if 'error' in r)[:150]}"
                      ] if len(ok) < len(rs) else []

            def med(key: str, fmt: str = "{:.2f}", rows: List[Dict[str, Any]] = ok) -> str:
                return fmt.format(median([float(r[key]) for r in rows])) if rows else "–"
            cores = f"{median([r['cpu'] / r['wall'] for r in ok]):.2f}" if ok else "–"
            checked = ("yes" if not wrong else "**NO**: " + "; ".join(wrong[:3])) if ok else "–"
            lines.append(
                f"| {mode} | {LABELS[peer]} | {spread_text(cpu_rates, '{:,.0f}')} | "
                f"{spread_text(wall_rates, '{:,.0f}')} "
                f"| {med('wall')} | {med('cpu')} | {med('broker_cpu')} | "
                f"{cores} | {med('batches', '{:.0f}')} | {checked} | {'; '.join(notes) or '–'} |")
    return lines


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m bench.ss_read", description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000, help="backlog records (default 1,000,000)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--peers", default=",".join(PEERS))
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--connect", action="store_true", help="also run every case through Spark Connect")
    ap.add_argument("--results", default=os.path.join("bench", "results", "ss_read.json"))
    args = ap.parse_args(argv)
    peers = [p for p in args.peers.split(",") if p]
    for p in peers:
        if p not in PEERS:
            ap.error(f"--peers: unknown peer {p!r}; allowed: {', '.join(PEERS)}")
    if args.rounds < 1 or args.records < PARTITIONS:
        ap.error(f"--rounds must be >= 1 and --records >= {PARTITIONS}, got {args.rounds} and {args.records}")
    notes: List[str] = []
    if "deo-ck" in peers and importlib.util.find_spec("confluent_kafka") is None:
        peers.remove("deo-ck")
        notes.append("deo-ck left out: confluent-kafka is not installed "
                     "(pip install 'dstream-exactly-once[confluent]')")
    modes = ["classic", "connect"] if args.connect else ["classic"]
    data: Dict[str, Any] = {"bench": "B10", "args": vars(args), "notes": notes, **header()}
    runs: Runs = {}
    with ExitStack() as stack:
        kafka = start_kafka(stack)
        topic = produce_topic(kafka, "ss-read", args.records)
        work = workdir(stack, "deo-bench-ss-read-")
        children = {m: stack.enter_context(Child(m, kafka, args.master, work)) for m in modes}
        cases = [(m, p) for m in modes for p in peers]

        def run(case: Tuple[str, str]) -> Dict[str, Any]:
            return children[case[0]].request({"op": "read", "peer": case[1], "topic": topic.name,
                                              "total": topic.total})
        for case in cases:  # equal warm-up: one untimed query over the whole backlog per peer
            log(f"B10 warm-up {'/'.join(case)}")
            data.setdefault("warmup", {})["/".join(case)] = run(case)
        for r in range(args.rounds):
            for case in case_order(cases, r):
                out = run(case)
                log(f"B10 round {r + 1}/{args.rounds} {'/'.join(case)}: " + (out.get("error") or (
                    f"{out['records']:,} records, wall {out['wall']:.2f} s, CPU {out['cpu']:.2f} s")))
                runs.setdefault(case, []).append(out)
        data["versions"] = {m: c.version for m, c in children.items()}
    expected = expected_sums(topic)
    report = [f"B10 Structured Streaming backlog read: {topic.total:,} records over {PARTITIONS} partitions "
              f"(100-byte values, keys, a header), Trigger.AvailableNow, every column consumed, {args.master}, "
              f"one session per mode shared by every peer, {args.rounds} rounds after one warm-up query per peer",
              "", *table(modes, peers, runs, expected), "",
              "| mode | ratio (per round, same round's runs) | per CPU-second | per wall-second |", "|---|---|---|---|"]
    for mode in modes:
        for peer in (p for p in peers if p != "jvm"):
            if "jvm" not in peers:
                break
            a, b = runs.get((mode, peer), []), runs.get((mode, "jvm"), [])
            cpu, wall = pair_ratios(rates(a, "cpu"), rates(b, "cpu")), pair_ratios(rates(a, "wall"), rates(b, "wall"))
            report.append(f"| {mode} | {peer} / jvm | {cpu['text']} | {wall['text']} |")
            data.setdefault("ratios", {})[f"{mode}/{peer}/jvm"] = {"cpu": cpu, "wall": wall}
    if args.connect:
        report += ["", "| peer | Connect / classic: wall s (per round) | Spark CPU s (per round) |", "|---|---|---|"]
        for peer in peers:
            wall, cpu = connect_ratios(runs, (peer,), "wall"), connect_ratios(runs, (peer,), "cpu")
            report.append(f"| {LABELS[peer]} | {wall['text']} | {cpu['text']} |")
            data.setdefault("connect_ratios", {})[peer] = {"wall": wall, "cpu": cpu}
    report += [f"note: {n}" for n in notes]
    print("\n".join(report))
    data["runs"] = {"/".join(k): v for k, v in runs.items()}
    data["expected_sums"] = expected
    save(args.results, data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
