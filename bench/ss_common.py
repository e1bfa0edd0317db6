"""Plumbing of the Structured Streaming benchmarks B10 (:mod:`bench.ss_read`) and B11 (:mod:`bench.ss_first`).

The parent side: the Kafka broker, the input topic (keys, values and headers: every column of Spark's
Kafka schema carries data), the persistent session processes (:class:`Child`, one per mode, see
:mod:`bench.ss_child`), the order of cases in a round, and the arithmetic of the tables (per-round
ratios with their spread, flags on measurements that cannot be right).
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Dict, List, Optional, Sequence, Tuple, TypeVar

from .common import READ_SETTINGS, RECORD_BYTES, log, median
from .cpu import TICKS_PER_SECOND

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PARTITIONS = 4
T = TypeVar("T")


# ------------------------------------------------------------------------------------------ services and data
def start_kafka(stack: ExitStack) -> Any:
    from dstream_exactly_once.testing import LocalKafka

    log("starting a local KRaft Kafka broker (1 GiB heap)")
    broker = LocalKafka(heap="1g")
    stack.callback(broker.stop)
    broker.start()
    return broker


def workdir(stack: ExitStack, prefix: str) -> str:
    path = tempfile.mkdtemp(prefix=prefix)
    stack.callback(shutil.rmtree, path, True)
    return path


def record_key(offset: int) -> bytes:
    return b"k%05d" % (offset % 10000)


def record_headers(offset: int) -> List[Tuple[str, bytes]]:
    return [("h", b"%d" % (offset % 10))]


def _produce(bootstrap: str, topic: str, partitions: Sequence[int], per_partition: int) -> None:
    from kafka import KafkaProducer

    from .data import pool_index, value_pool

    pool = value_pool()
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, enable_idempotence=False, linger_ms=20,
                             batch_size=1024 * 1024, max_request_size=8 * 1024 * 1024, client_id="deo-bench-ss")
    try:
        for p in partitions:
            for i in range(per_partition):
                producer.send(topic, key=record_key(i), value=pool[pool_index(p, i)], partition=p,
                              headers=record_headers(i))
        producer.flush()
    finally:
        producer.close()


@dataclass
class Topic:
    name: str
    per_partition: Dict[int, int]
    seconds: float

    @property
    def total(self) -> int:
        return sum(self.per_partition.values())


def produce_topic(kafka: Any, name: str, records: int) -> Topic:
    """``records`` (rounded down to a multiple of 4) 100-byte values with keys and one header each over 4
    partitions, by 2 producer processes."""
    per = max(1, records // PARTITIONS)
    kafka.create_topic(name, PARTITIONS, config={"segment.bytes": 256 * 1024 * 1024})
    log(f"producing {per * PARTITIONS:,} records ({RECORD_BYTES}-byte values, keys, a header) to {name!r}")
    t0 = time.perf_counter()
    groups = [list(range(PARTITIONS))[i::2] for i in range(2)]
    with mp.get_context("spawn").Pool(2) as pool:
        pool.starmap(_produce, [(kafka.bootstrap, name, g, per) for g in groups])
    ends = {p: late for p, (_early, late) in kafka.offsets(name).items()}
    if any(end != per for end in ends.values()):
        raise RuntimeError(f"topic {name!r} has end offsets {ends}, expected {per} per partition")
    seconds = time.perf_counter() - t0
    log(f"produced {per * PARTITIONS:,} records in {seconds:.1f}s")
    return Topic(name, ends, seconds)


# ------------------------------------------------------------------------------------------ session processes
class Child:
    """A persistent :mod:`bench.ss_child` process of one mode (``classic`` or ``connect``)."""

    def __init__(self, mode: str, kafka: Any, master: str, work: str) -> None:
        self.mode = mode
        proc = getattr(getattr(kafka, "_proc", None), "proc", None)
        self.spec = {"mode": mode, "master": master, "bootstrap": kafka.bootstrap, "settings": READ_SETTINGS,
                     "broker_pid": None if proc is None else int(proc.pid), "workdir": work}
        self.stderr_path = os.path.join(work, f"child-{mode}.stderr")
        self.proc: Optional[subprocess.Popen[str]] = None
        self.version = ""

    def __enter__(self) -> Child:
        env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
        log(f"starting the {self.mode} Spark session process ({self.spec['master']})")
        with open(self.stderr_path, "w") as err:
            self.proc = subprocess.Popen([sys.executable, "-m", "bench.ss_child", json.dumps(self.spec)], text=True,
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env=env,
                                         cwd=ROOT)
        first = self._line(("READY ", "RESULT "))
        if first is None or first.startswith("RESULT "):
            why = (json.loads(first[7:]).get("error") if first else None) or self._tail()
            self.__exit__()
            raise RuntimeError(f"the {self.mode} session did not start: {why}")
        self.version = json.loads(first[6:]).get("version", "")
        return self

    def _line(self, prefixes: Tuple[str, ...]) -> Optional[str]:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith(prefixes):
                return line.rstrip("\n")
        return None

    def _tail(self) -> str:
        try:
            with open(self.stderr_path) as f:
                return f"the {self.mode} session process failed:\n" + "\n".join(f.read().splitlines()[-25:])
        except OSError:
            return f"the {self.mode} session process failed"

    def request(self, req: Dict[str, Any]) -> Dict[str, Any]:
        """One request's RESULT (a dict with ``error`` when it failed; a dead process raises)."""
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        line = self._line(("RESULT ",))
        if line is None:
            raise RuntimeError(self._tail())
        return dict(json.loads(line[7:]))

    def __exit__(self, *exc: Any) -> None:
        if self.proc is not None:
            try:
                if self.proc.stdin is not None:
                    self.proc.stdin.close()
                self.proc.wait(120)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
            self.proc = None


# ------------------------------------------------------------------------------------------ arithmetic (pure)
def case_order(cases: Sequence[T], round_index: int) -> List[T]:
    """``cases`` rotated by ``round_index``: each case runs first in some round (a slow phase of a shared
    machine hits every case alike)."""
    if not cases:
        return []
    k = round_index % len(cases)
    return list(cases[k:]) + list(cases[:k])


def spread_text(values: Sequence[float], fmt: str = "{:.2f}") -> str:
    if not values:
        return "–"
    return (f"{fmt.format(median(values))} [{fmt.format(min(values))}, {fmt.format(max(values))}]"
            + (f" n={len(values)}" if len(values) > 1 else ""))


def pair_ratios(a: Sequence[Optional[float]], b: Sequence[Optional[float]], fmt: str = "{:.2f}") -> Dict[str, Any]:
    """Round-by-round ``a[i] / b[i]`` (rounds where either failed or ``b`` is 0 are left out): the values,
    median, min, max and a ``median [min, max] n=…x`` text."""
    values = [x / y for x, y in zip(a, b, strict=False) if x is not None and y is not None and y > 0]
    if not values:
        return {"values": [], "median": None, "min": None, "max": None, "text": "n/a (no round with both)"}
    return {"values": values, "median": median(values), "min": min(values), "max": max(values),
            "text": spread_text(values, fmt) + "x"}


def values_of(runs: Sequence[Dict[str, Any]], key: str) -> List[Optional[float]]:
    """``run[key]`` per round, None where the round failed or its measurement is flagged invalid."""
    return [None if "error" in r or invalid(r) else float(r[key]) for r in runs]


def connect_ratios(runs: Dict[Tuple[str, ...], List[Dict[str, Any]]], case: Tuple[str, ...], key: str,
                   invert: bool = False) -> Dict[str, Any]:
    """Connect / classic of ``key`` per round for ``case`` (the key of ``runs`` without its mode);
    ``invert``: classic / Connect (for rates: then > 1 means Connect is slower too)."""
    con, cla = values_of(runs.get(("connect", *case), []), key), values_of(runs.get(("classic", *case), []), key)
    return pair_ratios(cla, con) if invert else pair_ratios(con, cla)


def invalid(run: Dict[str, Any], cores: Optional[int] = None) -> str:
    """Why ``run``'s CPU figure cannot be right ('' when it can): more CPU than the machine's cores gave
    in its wall time, or less than the clock can count."""
    if "error" in run or "cpu" not in run:
        return ""
    cores = cores or os.cpu_count() or 1
    wall, cpu = float(run["wall"]), float(run["cpu"])
    if wall > 0 and cpu > wall * cores * 1.05:
        return f"{cpu / wall:.2f} cores of CPU on a {cores}-core machine"
    if cpu < 2.0 / TICKS_PER_SECOND:
        return f"CPU {cpu:.3f} s is below the clock's resolution"
    return ""


def flags(run: Dict[str, Any], cores: Optional[int] = None) -> List[str]:
    out = []
    why = invalid(run, cores)
    if why:
        out.append(f"FLAGGED invalid: {why}")
    wall = float(run.get("wall") or 0)
    if wall > 0 and float(run.get("others_cpu") or 0) / wall > 0.5:
        out.append(f"busy machine: others used {float(run['others_cpu']) / wall:.2f} cores")
    return out


def summarize_runs(runs: Sequence[Dict[str, Any]], key: str) -> Dict[str, Any]:
    """B11's table cells of one (mode, sink, peer): ``key`` seconds, trigger and start→trigger ms, CPU."""
    ok = [r for r in runs if "error" not in r]
    errors = [r["error"] for r in runs if "error" in r]
    firsts = [float(r[key]) for r in ok]
    triggers = [float(r["trigger_ms"]) for r in ok if r.get("trigger_ms") == r.get("trigger_ms")]
    starts = [float(r[key]) * 1000 - float(r["trigger_ms"]) for r in ok if r.get("trigger_ms") == r.get("trigger_ms")]
    checks = [bool((r.get("check") or {}).get("ok")) for r in ok]
    notes = sorted({f for r in ok for f in flags(r)}) + ([f"{len(errors)} failed: {errors[0][:150]}"] if errors else [])
    return {"text": spread_text(firsts), "trigger_ms": f"{median(triggers):,.0f}" if triggers else "–",
            "start_ms": f"{median(starts):,.0f}" if starts else "–",
            "cpu": f"{median([float(r['cpu']) for r in ok]):.2f}" if ok else "–", "n": len(ok),
            "checked": ("yes" if all(checks) else f"**NO** ({checks.count(False)} of {len(checks)})") if ok else "–",
            "flags": "; ".join(notes) or "–"}


def header() -> Dict[str, Any]:
    import pyspark

    return {"started": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"), "load": os.getloadavg(),
            "cpus": os.cpu_count(), "pyspark": pyspark.__version__}


def save(path: str, data: Dict[str, Any]) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    data["load_end"] = os.getloadavg()
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, default=str)
    log(f"wrote {path}")
