"""B8 with a producer that stops and starts again: ``python3 -m bench.stopstart [--partitions 100,1000]``.

Not a test: it prints a table (and a line for ``bench/RESULTS.md``). Per P, in one run:

1. a topic of P partitions; the library's exactly-once stream (``KafkaUtils.createExactlyOnceStream``
   + ``commit_each_batch`` folding each batch to a count and a sum, SQLite, 0.5 s batches,
   ``local[2]``, the task planner's defaults: packed tasks; ``--catch-up`` sets
   ``spark.streaming.exactlyOnce.catchUp``) starts from ``earliest`` in its own process
   (:mod:`bench.stopstart_child`);
2. once it planned its first batch, B8's producer process (kafka-python, idempotent, ``acks=all``,
   ``linger_ms=20``) writes
   ``--rate`` records/s spread evenly over the P partitions for ``--produce`` seconds, then stops
   (it flushes and closes);
3. the stream is given ``--drain`` seconds: the time from the stop until the stored count equals
   the broker's end offsets is the **drain time** (target: within 30 s);
4. the producer starts again for ``--again`` seconds and stops; the second drain is timed the same way;
5. the stream stops gracefully (SIGTERM). Checked: the stored count equals every record sent and the
   broker's end offsets (**exact**), the store holds no pending batch, and the stream's log shows no
   failed batch (``every batch after the stop committed``) and counts the reads that got no record
   the broker held (the reader's recovery WARN lines). How far the stream was behind at each stop
   (records sent but not yet stored) tells a backlog from a wait.

CPU load on the machine while it runs is printed (``os.getloadavg``) beside each result.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional, Sequence

from .cpu import _all_processes, _machine_busy, _tree
from .keepup import ROOT, Feed, make_topic
from .keepup_child import _end_offsets

#: the producer of a stream that must keep up: idempotent, every replica acknowledges, 20 ms linger
PRODUCER = {"enable_idempotence": True, "acks": "all", "linger_ms": 20}


def _stored(url: str, app: str) -> Optional[Dict[str, int]]:
    """The stream's stored count and sum (``None`` before its store exists)."""
    from dstream_exactly_once.stores import open_store

    if not os.path.exists(url[len("sqlite:///"):]):
        return None
    with open_store(url, app) as store:
        values = store.get_values("keepup")
        pending = len(store.pending_batches())
    return {"count": int(values.get("count", 0)), "sum": int(values.get("sum", 0)), "pending": pending}


def _cpu_of(roots: Dict[str, List[int]]) -> Dict[str, float]:
    """CPU seconds so far of each named process tree (the stream: its driver, Spark's JVM, the Python
    workers; the producer)."""
    procs = _all_processes()
    return {name: sum(procs[p][1] + procs[p][2] for p in _tree(procs, pids)) for name, pids in roots.items()}


def _wait_drained(url: str, app: str, bootstrap: str, topic: str, limit_s: float) -> Optional[float]:
    """Seconds until the stored count equals the topic's end offsets (``None``: not within ``limit_s``)."""
    t0 = time.monotonic()
    want = sum(_end_offsets(bootstrap, topic).values())
    while time.monotonic() - t0 < limit_s:
        got = _stored(url, app)
        if got is not None and got["count"] >= want:
            return time.monotonic() - t0
        time.sleep(0.25)
    return None


def run_case(kafka: Any, partitions: int, args: argparse.Namespace) -> Dict[str, Any]:
    topic = make_topic(kafka, f"stopstart-{partitions}-{int(time.time())}", partitions)
    workdir = tempfile.mkdtemp(prefix="deo-stopstart-")
    url, app = f"sqlite:///{workdir}/stopstart.db", "stopstart"
    log_path = os.path.join(workdir, "stream.log")
    spec = {"bootstrap": kafka.bootstrap, "topic": topic, "url": url, "app": app, "batch_s": args.interval,
            "catch_up": args.catch_up}
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    with open(log_path, "w", encoding="utf-8") as log_file:
        child = subprocess.Popen([sys.executable, "-m", "bench.stopstart_child", json.dumps(spec)], cwd=ROOT,
                                 env=env, stdout=log_file, stderr=subprocess.STDOUT)
    out: Dict[str, Any] = {"partitions": partitions}
    try:
        t0 = time.monotonic()
        while _stored(url, app) is None and time.monotonic() - t0 < 180:
            time.sleep(0.5)  # the stream's store exists once its first batch is planned
        sent = 0
        drains: List[Optional[float]] = []
        for seconds in (args.produce, args.again):
            with Feed.kafka(kafka.bootstrap, topic, partitions, args.rate, settings=PRODUCER,
                            client=args.producer) as feed:
                roots = {"stream": [child.pid], "producer": [feed.proc.pid]}
                before, busy0, t_cpu = _cpu_of(roots), _machine_busy(), time.monotonic()
                time.sleep(seconds)
                out.setdefault("rate_achieved", round(feed.achieved()))
                after, span = _cpu_of(roots), time.monotonic() - t_cpu
                if "cores" not in out:  # CPU cores each side used while the producer ran (first phase)
                    out["cores"] = {k: round((after[k] - before[k]) / span, 2) for k in roots}
                    out["cores"]["machine"] = round((_machine_busy() - busy0) / span, 2)
            sent += int(feed.sent.value)
            at_stop = _stored(url, app)
            out.setdefault("behind_at_stop", []).append(sent - (at_stop["count"] if at_stop else 0))
            drains.append(_wait_drained(url, app, kafka.bootstrap, topic, args.drain))
            out.setdefault("load_at_stop", round(os.getloadavg()[0], 1))
        out["sent"] = sent
        out["drain_s"] = [None if d is None else round(d, 1) for d in drains]
    finally:
        child.send_signal(signal.SIGTERM)
        try:
            child.wait(60)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
    ends = sum(_end_offsets(kafka.bootstrap, topic).values())
    stored = _stored(url, app) or {"count": -1, "sum": -1, "pending": -1}
    with open(log_path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    failed = [line for line in text.splitlines() if "Error" in line and ("batch" in line or "Kafka" in line)]
    recoveries = sum("although the broker holds them" in line for line in text.splitlines())
    out.update(end_offsets=ends, stored=stored["count"], pending=stored["pending"],
               exact=stored["count"] == sent == ends and stored["sum"] == 100 * sent,
               failed_lines=len(failed), stall_recoveries=recoveries, first_failure=failed[0][:300] if failed else None,
               drained_in_30s=all(d is not None and d <= 30 for d in drains))
    return out


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m bench.stopstart", description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", default="100,1000")
    ap.add_argument("--rate", type=int, default=2000, help="records/s over all partitions (default 2000)")
    ap.add_argument("--produce", type=float, default=100.0, help="seconds of the first producing phase")
    ap.add_argument("--again", type=float, default=20.0, help="seconds of the second producing phase")
    ap.add_argument("--drain", type=float, default=90.0, help="seconds given to each drain")
    ap.add_argument("--interval", type=float, default=0.5)
    ap.add_argument("--producer", choices=("kafka-python", "confluent-kafka"), default="kafka-python",
                    help="the producer's client (same settings either way); kafka-python's producer takes about "
                         "half a core at 1,000 partitions, librdkafka's a small fraction of that")
    ap.add_argument("--catch-up", action="store_true",
                    help="set spark.streaming.exactlyOnce.catchUp=true (a batch generated while another is "
                         "uncommitted plans nothing; the next takes the backlog)")
    ap.add_argument("--results", default=os.path.join(ROOT, "bench", "results", "stopstart.json"))
    args = ap.parse_args(argv)
    from dstream_exactly_once.testing import LocalKafka

    rows = []
    with LocalKafka(broker_config={"num.network.threads": 3}) as kafka:
        for p in [int(x) for x in args.partitions.split(",")]:
            row = run_case(kafka, p, args)
            rows.append(row)
            print(json.dumps(row), flush=True)
    print()
    print("| P | catch-up | producer | sent | behind at stop 1 / 2 | drain after stop 1 / 2 (s) "
          "| within 30 s | exact | pending | failed-batch lines | stalled-read recoveries | load at stop "
          "| cores: stream / producer / machine |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['partitions']} | {'on' if args.catch_up else 'off'} "
              f"| {args.producer}: {args.produce:.0f} s + {args.again:.0f} s "
              f"at {r.get('rate_achieved')}/s "
              f"| {r['sent']} | {' / '.join(str(b) for b in r['behind_at_stop'])} "
              f"| {' / '.join('none' if d is None else str(d) for d in r['drain_s'])} "
              f"| {'yes' if r['drained_in_30s'] else 'NO'} | {'yes' if r['exact'] else 'NO'} | {r['pending']} "
              f"| {r['failed_lines']} | {r['stall_recoveries']} | {r['load_at_stop']} "
              f"| {' / '.join(str(r['cores'].get(k)) for k in ('stream', 'producer', 'machine'))} |")
    os.makedirs(os.path.dirname(args.results), exist_ok=True)
    with open(args.results, "w", encoding="utf-8") as f:
        json.dump({"args": vars(args), "rows": rows}, f, indent=1)
    return 0 if all(r["exact"] and r["drained_in_30s"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
