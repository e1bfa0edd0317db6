"""B2 end-to-end exactly-once throughput per store (and the pipeline half of B5).

The word-count pipeline over a fixed prefix of the read topic, cut into ``b2_batches`` planned
batches (one OffsetRange per partition each), driven without a StreamingContext by the same
steps ``ExactlyOnceDStream.commit_each_batch`` takes per batch:

- exactly-once: ``store.start_epoch()`` once; per batch ``store.log_batch(epoch, batch)`` (offset
  log), the KafkaRDD of the batch's ranges (``make_kafka_rdd``, as ``DirectBatches.rdd`` builds
  it), the word counts computed by Spark (``mapPartitions`` Counter + ``collect``), then
  ``store.commit(epoch, batch, Writes().incr("words", w, n)…)``;
- plain: the same RDD and word counts, then a plain non-transactional-protocol upsert of the same
  counts into the same server (no offsets, epoch, offset log or commit log): SQLite and
  PostgreSQL one ``INSERT … ON CONFLICT DO UPDATE SET n = n + excluded.n`` executemany in one
  transaction (same pragmas / server settings as the store), Redis one redis-py pipeline of
  ``HINCRBY``.

Both variants' final counts are checked against the expected word counts of the ranges.
Each repetition uses a fresh application id / plain table; the order of the two variants
alternates between repetitions; medians are reported.
"""

from __future__ import annotations

import sqlite3
import time
import uuid
from collections import Counter
from typing import Any, Dict, Iterable, Iterator, List, Tuple

from .common import Context, log, median
from .data import expected_word_counts

STORES = ("sqlite", "postgresql", "redis")
STORE_NAMES = {"sqlite": "SQLite", "postgresql": "PostgreSQL", "redis": "Redis"}


def count_partition(records: Iterable[Tuple[Any, str]]) -> Iterator[Dict[str, int]]:
    """Executor side: word counts of one partition's ``(key, value)`` records."""
    counts: Counter[str] = Counter()
    for _key, value in records:
        counts.update(value.split())
    yield dict(counts)


def word_counts(rdd: Any) -> Dict[str, int]:
    merged: Counter[str] = Counter()
    for part in rdd.mapPartitions(count_partition).collect():
        merged.update(part)
    return dict(merged)


def plan_batches(ctx: Context, records: int, batches: int) -> List[List[Any]]:
    from dstream_exactly_once import OffsetRange

    topic = ctx.read_topic()
    per = max(1, min(records, topic.total) // topic.partitions)
    cuts = [per * i // batches for i in range(batches + 1)]
    return [[OffsetRange(topic.name, p, cuts[i], cuts[i + 1]) for p in sorted(topic.per_partition)]
            for i in range(batches) if cuts[i + 1] > cuts[i]]


# ------------------------------------------------------------------------------------------ plain writers
class PlainWriter:
    def write(self, counts: Dict[str, int]) -> None:
        raise NotImplementedError

    def values(self) -> Dict[str, int]:
        raise NotImplementedError

    def close(self) -> None:
        pass


class SQLitePlain(PlainWriter):
    def __init__(self, path: str) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None, timeout=30)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=FULL")
        self.conn.execute("CREATE TABLE IF NOT EXISTS plain_words (k TEXT PRIMARY KEY, n INTEGER NOT NULL)")
        self.conn.execute("DELETE FROM plain_words")

    def write(self, counts: Dict[str, int]) -> None:
        self.conn.execute("BEGIN")
        self.conn.executemany("INSERT INTO plain_words (k, n) VALUES (?, ?) "
                              "ON CONFLICT (k) DO UPDATE SET n = n + excluded.n", list(counts.items()))
        self.conn.execute("COMMIT")

    def values(self) -> Dict[str, int]:
        return {k: int(n) for k, n in self.conn.execute("SELECT k, n FROM plain_words")}

    def close(self) -> None:
        self.conn.close()


class PostgresPlain(PlainWriter):
    def __init__(self, url: str) -> None:
        import psycopg

        self.conn = psycopg.connect(url, autocommit=True)
        self.conn.execute("CREATE TABLE IF NOT EXISTS plain_words (k TEXT PRIMARY KEY, n BIGINT NOT NULL)")
        self.conn.execute("TRUNCATE plain_words")

    def write(self, counts: Dict[str, int]) -> None:
        with self.conn.transaction(), self.conn.cursor() as cur:
            cur.executemany("INSERT INTO plain_words (k, n) VALUES (%s, %s) "
                            "ON CONFLICT (k) DO UPDATE SET n = plain_words.n + excluded.n", list(counts.items()))

    def values(self) -> Dict[str, int]:
        return {k: int(n) for k, n in self.conn.execute("SELECT k, n FROM plain_words").fetchall()}

    def close(self) -> None:
        self.conn.close()


class RedisPlain(PlainWriter):
    def __init__(self, server: Any) -> None:
        self.client = server.client(decode_responses=True)
        self.key = f"bench:plain:{uuid.uuid4().hex[:8]}:words"

    def write(self, counts: Dict[str, int]) -> None:
        pipe = self.client.pipeline(transaction=False)
        for word, n in counts.items():
            pipe.hincrby(self.key, word, n)
        pipe.execute()

    def values(self) -> Dict[str, int]:
        return {k: int(v) for k, v in self.client.hgetall(self.key).items()}

    def close(self) -> None:
        self.client.delete(self.key)
        self.client.close()


# ------------------------------------------------------------------------------------------ one run
class Run:
    def __init__(self, seconds: float, output_seconds: float, batches: int, records: int, ok: bool, detail: str):
        self.seconds = seconds
        self.output_seconds = output_seconds
        self.batches = batches
        self.records = records
        self.ok = ok
        self.detail = detail

    @property
    def rate(self) -> float:
        return self.records / self.seconds


def _rdd(ctx: Context, ranges: List[Any]) -> Any:
    from dstream_exactly_once.kafka.params import parse_kafka_params
    from dstream_exactly_once.streaming.rdd import make_kafka_rdd

    return make_kafka_rdd(ctx.spark(), parse_kafka_params(ctx.kafka_params()), ranges, poll_timeout_ms=120000)


def run_exactly_once(ctx: Context, master: str, kind: str, url: str, batches: List[List[Any]]) -> Run:
    from dstream_exactly_once.stores import CommitOutcome, PlannedBatch, Writes, open_store

    ctx.spark(master)
    store = open_store(url, f"b2-{uuid.uuid4().hex[:10]}")
    try:
        epoch = store.start_epoch()
        out_s = 0.0
        t0 = time.perf_counter()
        for i, ranges in enumerate(batches):
            batch = PlannedBatch(i, int(time.time() * 1000), tuple(ranges))
            t1 = time.perf_counter()
            store.log_batch(epoch, batch)
            out_s += time.perf_counter() - t1
            counts = word_counts(_rdd(ctx, ranges))
            t1 = time.perf_counter()
            writes = Writes()
            for word, n in counts.items():
                writes.incr("words", word, n)
            outcome = store.commit(epoch, batch, writes)
            out_s += time.perf_counter() - t1
            if outcome is not CommitOutcome.APPLIED:
                raise RuntimeError(f"batch {i} was {outcome}, expected APPLIED")
        seconds = time.perf_counter() - t0
        got = {k: int(v) for k, v in store.get_values("words").items()}
    finally:
        store.close()
    return _finish(seconds, out_s, batches, got, "exactly-once", kind)


def run_plain(ctx: Context, master: str, kind: str, url: str, batches: List[List[Any]]) -> Run:
    ctx.spark(master)
    writer = make_plain(ctx, kind, url)
    try:
        out_s = 0.0
        t0 = time.perf_counter()
        for ranges in batches:
            counts = word_counts(_rdd(ctx, ranges))
            t1 = time.perf_counter()
            writer.write(counts)
            out_s += time.perf_counter() - t1
        seconds = time.perf_counter() - t0
        got = writer.values()
    finally:
        writer.close()
    return _finish(seconds, out_s, batches, got, "plain", kind)


def make_plain(ctx: Context, kind: str, url: str) -> PlainWriter:
    if kind == "sqlite":
        return SQLitePlain(url[len("sqlite:///"):].split("?")[0] + ".plain.db")
    if kind == "postgresql":
        return PostgresPlain(url)
    return RedisPlain(ctx.redis())


_EXPECTED: Dict[Tuple[Any, ...], Dict[str, int]] = {}


def _finish(seconds: float, out_s: float, batches: List[List[Any]], got: Dict[str, int], variant: str,
            kind: str) -> Run:
    key = tuple(r for b in batches for r in b)
    if key not in _EXPECTED:
        _EXPECTED[key] = expected_word_counts(key)
    records = sum(r.count() for r in key)
    ok = got == _EXPECTED[key]
    detail = "" if ok else (f"{variant} {kind}: stored word counts differ from the expected ones "
                            f"({sum(got.values()):,} vs {sum(_EXPECTED[key].values()):,} words)")
    run = Run(seconds, out_s, len(batches), records, ok, detail)
    log(f"B2 {kind:10s} {variant:12s}: {records:,} records in {seconds:.2f}s ({run.rate:,.0f} records/s), "
        f"output {1000 * out_s / len(batches):.1f} ms/batch{'' if ok else ' — WRONG RESULTS'}")
    return run


def warm_up(ctx: Context, master: str, batches: List[List[Any]]) -> None:
    from dstream_exactly_once import OffsetRange

    small = [OffsetRange(r.topic, r.partition, r.fromOffset, min(r.untilOffset, r.fromOffset + 1000))
             for r in batches[0]]
    ctx.spark(master)
    word_counts(_rdd(ctx, small))


# ------------------------------------------------------------------------------------------ B2
def run_b2(ctx: Context) -> None:
    res, s = ctx.results, ctx.settings
    batches = plan_batches(ctx, s.b2_records, s.b2_batches)
    n = sum(r.count() for b in batches for r in b)
    res.note("B2", f"{n:,} records of the read topic in {len(batches)} batches x 4 partitions (~1,000 result keys "
                   f"per batch), local[2]; median of {s.b2_repeats} repetition(s), variant order alternating")
    warm_up(ctx, "local[2]", batches)
    for kind in STORES:
        url = ctx.store_url(kind)
        runs: Dict[str, List[Run]] = {"exactly-once": [], "plain": []}
        for rep in range(s.b2_repeats):
            order = ("exactly-once", "plain") if rep % 2 == 0 else ("plain", "exactly-once")
            for variant in order:
                fn = run_exactly_once if variant == "exactly-once" else run_plain
                runs[variant].append(fn(ctx, "local[2]", kind, url, batches))
        rates = {v: _add(ctx, "B2", kind, v, "local[2]", rs) for v, rs in runs.items()}
        bad = [r.detail for rs in runs.values() for r in rs if not r.ok]
        for d in bad:
            res.note("B2", "RESULT MISMATCH: " + d)
        res.check("B2", f"{STORE_NAMES[kind]}: exactly-once / plain throughput", rates["exactly-once"] / rates["plain"],
                  ">=", 0.9, "x", "results verified" if not bad else "RESULTS WRONG")


def _add(ctx: Context, bench: str, kind: str, variant: str, master: str, runs: List[Run]) -> float:
    rate = median([r.rate for r in runs])
    out_ms = median([1000 * r.output_seconds / r.batches for r in runs])
    secs = [r.seconds for r in runs]
    ctx.results.add(bench, f"{STORE_NAMES[kind]} {variant}, {master}", rate, "records/s",
                    f"{runs[0].records:,} records in {runs[0].batches} batches; median {median(secs):.2f}s "
                    f"[{', '.join(f'{x:.2f}' for x in secs)}]; output {out_ms:.1f} ms/batch",
                    store=kind, variant=variant, master=master, output_ms_per_batch=out_ms,
                    runs=[r.rate for r in runs], verified=all(r.ok for r in runs))
    return rate
