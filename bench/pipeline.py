"""B2 end-to-end exactly-once throughput per store (and the pipeline half of B5).

The word-count pipeline over a fixed prefix of the read topic, cut into ``b2_batches`` planned
batches (one OffsetRange per partition each), driven without a StreamingContext by the same
steps ``ExactlyOnceDStream.commit_each_batch`` takes per batch:

- exactly-once: ``store.start_epoch()`` once; per batch ``store.log_batch(epoch, batch)`` (offset
  log), the KafkaRDD of the batch's ranges (``make_kafka_rdd``, as ``DirectBatches.rdd`` builds
  it), the word counts computed by Spark (``mapPartitions`` Counter + ``collect``), then
  ``store.commit(epoch, batch, Writes().incr("words", w, n)…)``;
- plain: the same RDD and word counts, then the same set-based write of the same counts into
  the same server without fencing, offsets, offset log or commit log: SQLite and PostgreSQL the
  store's own counter upsert (one statement over a JSON object) into a table of the store's
  layout (PostgreSQL: its fill factor) in one transaction, same pragmas; Redis one Lua script
  decoding the same cjson payload and running one ``HINCRBY`` per key.

Output cost per batch: exactly-once = ``log_batch`` + building ``Writes`` + ``commit``; plain =
the write. Reported with its spread beside end-to-end throughput (output is a small part of a
batch, so throughput ratios near 1.0 are mostly noise).

Both variants' final counts are checked against the expected word counts of the ranges.
Each repetition uses a fresh application id / plain table; the order of the two variants
alternates between repetitions; medians are reported.
"""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from collections import Counter
from typing import Any, Dict, Iterable, Iterator, List, Tuple

from .common import Context, log, median, spread
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
PLAIN_TABLE = "bench_plain_values"
PLAIN_NS = "words"
#: The plain writer's Redis script: the store's commit script without the epoch, commit-log and offset
#: checks and writes — the same cjson payload and one HINCRBY per key.
PLAIN_LUA = ("local p = cjson.decode(ARGV[1]) "
             "for i, k in ipairs(p.keys) do redis.call('HINCRBY', KEYS[1], k, p.values[i]) end "
             "return #p.keys")


class PlainWriter:
    """What the exactly-once store writes for the results, and nothing else: the same set-based
    statement (or Lua), no epoch fence, no offsets, no offset log, no commit log."""

    #: the ``app`` column of the plain rows: give it the length of the exactly-once side's app id, so
    #: both write rows (and index entries) of the same size
    app = "plain"

    def write(self, counts: Dict[str, int]) -> None:
        raise NotImplementedError

    def values(self) -> Dict[str, int]:
        raise NotImplementedError

    def close(self) -> None:
        pass


def _plain_sql(store: Any) -> Tuple[str, str]:
    """(DDL, upsert) of the plain table: the store's own ``deo_values`` layout (column types and
    table options — PostgreSQL's fill factor) and its own set-based counter upsert, renamed."""
    ddl = (f"CREATE TABLE IF NOT EXISTS {PLAIN_TABLE} (app TEXT NOT NULL, ns TEXT NOT NULL, k TEXT NOT NULL, "
           f"inum {store.int_type}, fnum {store.float_type}, doc TEXT, PRIMARY KEY (app, ns, k)){store.table_options}")
    upsert = store._counters_sql.replace("deo_values", PLAIN_TABLE)  # the store's statement, verbatim
    return ddl, upsert


class SQLitePlain(PlainWriter):
    def __init__(self, path: str) -> None:
        from dstream_exactly_once.stores import SQLiteStore

        ddl, self.sql = _plain_sql(SQLiteStore("sqlite:///" + path, "plain"))
        self.conn = sqlite3.connect(path, isolation_level=None, timeout=30)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=FULL")
        self.conn.execute(ddl)
        self.conn.execute(f"DELETE FROM {PLAIN_TABLE}")

    def write(self, counts: Dict[str, int]) -> None:
        from dstream_exactly_once.stores._value_codec import counters_json

        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.execute(self.sql, (self.app, PLAIN_NS, counters_json(counts)))
        self.conn.execute("COMMIT")

    def values(self) -> Dict[str, int]:
        return {k: int(n) for k, n in self.conn.execute(f"SELECT k, inum FROM {PLAIN_TABLE}")}

    def close(self) -> None:
        self.conn.close()


class PostgresPlain(PlainWriter):
    def __init__(self, url: str) -> None:
        import psycopg

        from dstream_exactly_once.stores import PostgresStore

        ddl, sql = _plain_sql(PostgresStore(url, "plain"))
        self.sql = sql.replace("?", "%s")
        self.conn = psycopg.connect(url, autocommit=True)
        self.conn.execute(ddl)  # type: ignore[arg-type]
        self.conn.execute(f"TRUNCATE {PLAIN_TABLE}")  # type: ignore[arg-type]

    def write(self, counts: Dict[str, int]) -> None:
        from dstream_exactly_once.stores._value_codec import counters_json

        with self.conn.transaction():
            self.conn.execute(self.sql, (self.app, PLAIN_NS, counters_json(counts)))  # type: ignore[arg-type]

    def values(self) -> Dict[str, int]:
        rows = self.conn.execute(f"SELECT k, inum FROM {PLAIN_TABLE}").fetchall()  # type: ignore[arg-type]
        return {k: int(n) for k, n in rows}

    def close(self) -> None:
        self.conn.close()


class RedisPlain(PlainWriter):
    def __init__(self, server: Any) -> None:
        self.client = server.client(decode_responses=True)
        self.key = f"bench:plain:{uuid.uuid4().hex[:8]}:words"
        self.script = self.client.register_script(PLAIN_LUA)

    def write(self, counts: Dict[str, int]) -> None:
        payload = json.dumps({"keys": list(counts), "values": [str(v) for v in counts.values()]},
                             separators=(",", ":"))
        self.script(keys=[self.key], args=[payload])

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
    from dstream_exactly_once.kafka._params import parse_kafka_params
    from dstream_exactly_once.kafka.spark._rdd import make_kafka_rdd

    return make_kafka_rdd(ctx.spark(), parse_kafka_params(ctx.kafka_params()), ranges, poll_timeout_ms=120000)


def run_exactly_once(ctx: Context, master: str, kind: str, url: str, batches: List[List[Any]],
                     in_commit: bool = False) -> Run:
    """The exactly-once word count; ``in_commit``: ``commit_each_batch(offset_log="in_commit")``'s
    store calls (the offset-log entry written by the commit) instead of ``log_batch`` + ``commit``."""
    from dstream_exactly_once.stores import CommitOutcome, PlannedBatch, Writes, open_store

    ctx.spark(master)
    store = open_store(url, f"b2-{uuid.uuid4().hex[:10]}")  # 13 characters, as the plain rows' app
    try:
        epoch = store.start_epoch()
        out_s = 0.0
        t0 = time.perf_counter()
        for i, ranges in enumerate(batches):
            batch = PlannedBatch(i, int(time.time() * 1000), tuple(ranges))
            t1 = time.perf_counter()
            if not in_commit:
                store.log_batch(epoch, batch)
            out_s += time.perf_counter() - t1
            counts = word_counts(_rdd(ctx, ranges))
            t1 = time.perf_counter()
            writes = Writes()
            for word, n in counts.items():
                writes.incr("words", word, n)
            outcome = store.commit(epoch, batch, writes, log_entry=in_commit)
            out_s += time.perf_counter() - t1
            if outcome is not CommitOutcome.APPLIED:
                raise RuntimeError(f"batch {i} was {outcome}, expected APPLIED")
        seconds = time.perf_counter() - t0
        got = {k: int(v) for k, v in store.get_values("words").items()}
    finally:
        store.close()
    return _finish(seconds, out_s, batches, got, EO_IN_COMMIT if in_commit else "exactly-once", kind)


def run_plain(ctx: Context, master: str, kind: str, url: str, batches: List[List[Any]]) -> Run:
    ctx.spark(master)
    writer = make_plain(ctx, kind, url, app=f"b2-plain-{uuid.uuid4().hex[:4]}")
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


def make_plain(ctx: Context, kind: str, url: str, app: str = "plain") -> PlainWriter:
    """The plain writer of ``kind`` at ``url``, writing rows of application ``app``."""
    writer: PlainWriter
    if kind == "sqlite":
        writer = SQLitePlain(url[len("sqlite:///"):].split("?")[0] + ".plain.db")
    elif kind == "postgresql":
        writer = PostgresPlain(url)
    else:
        writer = RedisPlain(ctx.redis())
    writer.app = app
    return writer


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
EO_IN_COMMIT = "exactly-once 1tx"
B2_VARIANTS = ["exactly-once", EO_IN_COMMIT, "plain"]


def run_b2(ctx: Context) -> None:
    res, s = ctx.results, ctx.settings
    batches = plan_batches(ctx, s.b2_records, s.b2_batches)
    n = sum(r.count() for b in batches for r in b)
    res.note("B2", f"{n:,} records of the read topic in {len(batches)} batches x 4 partitions (~1,000 result keys "
                   f"per batch), local[2]; {s.b2_repeats} repetitions, variant order alternating; output cost per "
                   f"batch: exactly-once = log_batch + Writes + commit (offset_log='in_commit': Writes + one "
                   f"commit that logs the batch), plain = the same set-based write without "
                   f"fencing/offsets/logs; throughput ratios near 1.0 are within noise (output is a small part of "
                   f"each batch)")
    warm_up(ctx, "local[2]", batches)
    for kind in STORES:
        url = ctx.store_url(kind)
        runs: Dict[str, List[Run]] = {v: [] for v in B2_VARIANTS}
        for rep in range(s.b2_repeats):
            for variant in B2_VARIANTS[rep % 3:] + B2_VARIANTS[:rep % 3]:  # order rotated each repetition
                if variant == "plain":
                    runs[variant].append(run_plain(ctx, "local[2]", kind, url, batches))
                else:
                    runs[variant].append(run_exactly_once(ctx, "local[2]", kind, url, batches,
                                                          in_commit=variant == EO_IN_COMMIT))
        rates = {v: _add(ctx, "B2", kind, v, "local[2]", rs) for v, rs in runs.items()}
        out = {v: median([1000 * r.output_seconds / r.batches for r in rs]) for v, rs in runs.items()}
        bad = [r.detail for rs in runs.values() for r in rs if not r.ok]
        for d in bad:
            res.note("B2", "RESULT MISMATCH: " + d)
        verified = "results verified" if not bad else "RESULTS WRONG"
        res.check("B2", f"{STORE_NAMES[kind]}: exactly-once / plain output cost per batch",
                  out["exactly-once"] / out["plain"], "<=", 1.3, "x",
                  f"{out['exactly-once']:.1f} vs {out['plain']:.1f} ms/batch (medians); {verified}")
        res.check("B2", f"{STORE_NAMES[kind]}: exactly-once offset_log='in_commit' / plain output cost per batch",
                  out[EO_IN_COMMIT] / out["plain"], "<=", 1.3, "x",
                  f"{out[EO_IN_COMMIT]:.1f} vs {out['plain']:.1f} ms/batch (medians); {verified}")
        res.check("B2", f"{STORE_NAMES[kind]}: exactly-once / plain end-to-end throughput",
                  rates["exactly-once"] / rates["plain"], ">=", 0.9, "x", verified)


def _add(ctx: Context, bench: str, kind: str, variant: str, master: str, runs: List[Run]) -> float:
    rates = [r.rate for r in runs]
    rate = median(rates)
    out_ms = [1000 * r.output_seconds / r.batches for r in runs]
    ctx.results.add(bench, f"{STORE_NAMES[kind]} {variant}, {master}", rate, "records/s",
                    f"{runs[0].records:,} records in {runs[0].batches} batches; records/s {spread(rates)}; "
                    f"output ms/batch {spread(out_ms, '{:.1f}')}",
                    store=kind, variant=variant, master=master, output_ms_per_batch=median(out_ms),
                    output_ms=out_ms, runs=rates, verified=all(r.ok for r in runs))
    return rate
