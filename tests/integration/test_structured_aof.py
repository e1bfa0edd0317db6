"""spark.readStream.format("aof") on real Spark (local mode): rotation, admission control, columns,
the data-loss policy, checkpoint restarts and the move from a DStream file app."""

from __future__ import annotations

import gzip
import os
import shutil
import threading
import time

import pytest
from pyspark.sql import SparkSession
from pyspark.streaming import StreamingContext

from dstream_exactly_once import FileUtils
from dstream_exactly_once.stores import Writes, open_store
from dstream_exactly_once.structured import register

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def spark(sc):
    session = SparkSession(sc)
    register(session)
    return session


def _append(path, numbers):
    with open(path, "a", encoding="utf-8") as f:
        f.write("".join(f"{n}\n" for n in numbers))


def eventually(condition, timeout=120.0, what="condition"):
    """Poll ``condition()`` until it is true (returns its value) or fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        got = condition()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout}s")
        time.sleep(0.2)


class Collect:
    """A foreachBatch writer keeping each batch's rows (runs on the driver), keyed by batch id as an
    idempotent sink would: a query stopped after its sink ran but before Spark wrote the batch's commit
    runs that batch again on restart, and the rerun must carry the very same rows."""

    def __init__(self):
        self.batches = []
        self.reruns = []
        self.lock = threading.Lock()

    def __call__(self, df, batch_id):
        rows = [tuple(r) for r in df.collect()]
        with self.lock:
            for i, (seen, earlier) in enumerate(self.batches):
                if seen == batch_id:
                    self.reruns.append((batch_id, sorted(earlier) == sorted(rows)))
                    self.batches[i] = (batch_id, rows)
                    return
            self.batches.append((batch_id, rows))

    def values(self):
        with self.lock:
            assert all(same for _, same in self.reruns), f"a rerun batch read other rows: {self.reruns}"
            return [r[0] for _, rows in self.batches for r in rows]


def _query(spark, path, checkpoint, sink, trigger=None, **options):
    reader = spark.readStream.format("aof").option("path", path)
    for k, v in options.items():
        reader = reader.option(k, str(v))
    writer = reader.load().writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoint))
    return writer.trigger(**(trigger or {"availableNow": True})).start()


#: Spark gives the Python worker of a streaming source 10 s to connect back; it imports pyspark from
#: pyspark.zip (no bytecode cache), which a loaded machine may not finish in time.
WORKER_TIMEOUT = "Python worker failed to connect back"
ATTEMPTS = 6


def _run(spark, path, checkpoint, sink, trigger=None, **options):
    """One Trigger.AvailableNow run of an aof query on ``checkpoint`` (a restart when it exists); a run
    whose source worker did not start in time is started again from the same checkpoint."""
    for _ in range(ATTEMPTS):
        q = _query(spark, path, checkpoint, sink, trigger, **options)
        try:
            q.awaitTermination(180)
        except Exception as exc:  # noqa: BLE001 - checked below
            if WORKER_TIMEOUT in str(exc):
                continue
            raise
        assert q.exception() is None, q.exception()
        return q
    raise AssertionError(f"the aof query did not start {ATTEMPTS} times ({WORKER_TIMEOUT})")


def test_rotation_by_rename_copytruncate_and_compression_across_restarts(spark, tmp_path):
    logs, ck, sink = tmp_path / "logs", tmp_path / "ck", Collect()
    logs.mkdir()
    live, pattern = logs / "app.log", f"{logs}/app.log*"
    _append(live, range(0, 100))
    _run(spark, pattern, ck, sink)
    assert sorted(map(int, sink.values())) == list(range(100))
    _append(live, range(100, 150))  # rename rotation with unread lines, and a new live file
    os.rename(live, f"{live}.1")
    _append(live, range(150, 200))
    _run(spark, pattern, ck, sink)
    _append(live, range(200, 250))  # copytruncate with unread lines
    shutil.copyfile(live, f"{live}.2")
    with open(live, "r+") as f:
        f.truncate(0)
    _append(live, range(250, 260))
    _run(spark, pattern, ck, sink)
    _append(live, range(260, 280))  # rotated, then compressed before it was read
    os.rename(live, f"{live}.3")
    with open(f"{live}.3", "rb") as src, gzip.open(f"{live}.3.gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    os.remove(f"{live}.3")
    last = _run(spark, pattern, ck, sink)
    assert sorted(map(int, sink.values())) == list(range(280))
    events = _end_offset(last)["events"]
    assert events.get("compressed") == 1 and events.get("losses", 0) == 0


def _end_offset(query):
    import json

    progress = [p for p in query.recentProgress if p["sources"] and p["sources"][0]["endOffset"]]
    return json.loads(progress[-1]["sources"][0]["endOffset"])


def test_running_query_follows_rotation_then_restarts_from_its_checkpoint(spark, tmp_path):
    logs, ck, sink = tmp_path / "logs", tmp_path / "ck", Collect()
    logs.mkdir()
    live = logs / "service.log"
    _append(live, range(0, 50))
    q = _query(spark, f"{logs}/service.log*", ck, sink, trigger={"processingTime": "500 milliseconds"})
    try:
        for k in range(1, 4):
            eventually(lambda k=k: len(sink.values()) >= 50 * k, what=f"{50 * k} lines")
            _append(live, range(50 * k, 50 * k + 25))
            os.rename(live, f"{live}.{k}")
            _append(live, range(50 * k + 25, 50 * k + 50))
        eventually(lambda: len(sink.values()) >= 200, what="200 lines")
    finally:
        q.stop()
    _append(live, range(200, 260))  # written while no query runs
    _run(spark, f"{logs}/service.log*", ck, sink)
    assert sorted(map(int, sink.values())) == list(range(260))


def test_caps_per_file_and_per_trigger_with_all_columns(spark, tmp_path):
    logs, sink = tmp_path / "logs", Collect()
    logs.mkdir()
    for name, numbers in (("a", range(0, 100)), ("b", range(1000, 1100))):
        _append(logs / f"{name}.log", numbers)
    _run(spark, f"{logs}/*.log", tmp_path / "ck", sink, **{
        "bytes.max": 120, "max.bytes.per.trigger": 200, "include.file.name": "true",
        "include.byte.offset": "true", "include.file.id": "true"})
    rows = [r for _, rs in sink.batches for r in rs]
    assert sorted(int(r[0]) for r in rows) == [*range(100), *range(1000, 1100)]
    for _, batch in sink.batches:
        assert sum(len(r[0]) + 1 for r in batch) <= 200
    assert len(sink.batches) >= (sum(os.path.getsize(logs / n) for n in ("a.log", "b.log")) // 200)
    for value, path, offset, file_id in rows:
        with open(path, "rb") as f:
            f.seek(offset)
            assert f.readline() == f"{value}\n".encode()
        assert file_id.startswith("file:")
    assert len({(r[1], r[3]) for r in rows}) == 2


def test_bytes_decoding_gives_a_binary_value(spark, tmp_path):
    (tmp_path / "x.log").write_bytes(b"caf\xe9\nok\n")  # not UTF-8
    sink = Collect()
    _run(spark, f"{tmp_path}/*.log", tmp_path / "ck", sink, **{"line.decoding": "bytes"})
    assert sorted(bytes(v) for v in sink.values()) == [b"caf\xe9", b"ok"]


def _half_read(spark, tmp_path, name):
    """A query that read the first batch of a 400-byte file (bytes.max=100) and saw its size, then the
    file is deleted: its unread bytes are gone."""
    logs, ck = tmp_path / name, tmp_path / f"{name}-ck"
    logs.mkdir()
    _append(logs / "a.log", range(1000, 1080))  # 400 bytes
    sink = Collect()
    _run(spark, f"{logs}/*.log", ck, sink, trigger={"once": True}, **{"bytes.max": 100})
    assert 0 < len(sink.values()) < 80
    os.remove(logs / "a.log")
    return logs, ck, sink


def test_loss_is_reported_under_the_skip_policy_and_stops_the_query_otherwise(spark, tmp_path, caplog):
    logs, ck, sink = _half_read(spark, tmp_path, "skip")
    q = _run(spark, f"{logs}/*.log", ck, sink, **{"bytes.max": 100})
    events = _end_offset(q)["events"]
    assert events["losses"] == 1 and events["lost_bytes"] >= 300
    logs, ck, sink = _half_read(spark, tmp_path, "fail")
    with pytest.raises(Exception, match="fail.on.data.loss") as exc:
        _run(spark, f"{logs}/*.log", ck, sink, **{"bytes.max": 100, "fail.on.data.loss": "true"})
    assert "unread bytes" in str(exc.value)


def test_hosts_option_is_refused_at_load(spark, tmp_path):
    with pytest.raises(Exception, match="cannot pin a partition to a host"):
        spark.readStream.format("aof").option("path", f"{tmp_path}/*.log").option("hosts", "h1").load()
    with pytest.raises(Exception, match="'bytes.max' must be an integer in"):
        spark.readStream.format("aof").option("path", f"{tmp_path}/*.log").option("bytes.max", "2").load()


def test_query_continues_after_a_dstream_file_apps_positions(spark, sc, tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    live = logs / "service.log"
    _append(live, range(0, 300))
    url, app = f"sqlite:///{tmp_path}/store.db", "dstream-files"

    def keep_lines(batch, rdd):
        return Writes().put_batch_rows("lines", [int(x) for x in rdd.collect()])

    ssc = StreamingContext(sc, 1)
    stream = FileUtils.createExactlyOnceFileStream(ssc, f"{logs}/service.log*", {"bytes.max": 300},
                                                   store=url, app_id=app)
    stream.commit_each_batch(keep_lines)

    def committed():
        with open_store(url, app) as store:
            return sorted(int(v) for rows in store.get_batch_rows("lines").values() for v in rows)

    ssc.start()
    try:
        eventually(lambda: len(committed()) >= 300, what="300 lines committed by the DStream app")
    finally:
        ssc.stop(stopSparkContext=False, stopGraceFully=True)
    done = committed()
    assert done == list(range(300))
    _append(live, range(300, 350))
    os.rename(live, f"{live}.1")  # rotated between the two apps
    _append(live, range(350, 400))
    sink = Collect()
    _run(spark, f"{logs}/service.log*", tmp_path / "ck", sink, **{
        "starting.positions.store": url, "starting.positions.app": app})
    rest = sorted(map(int, sink.values()))
    assert rest == list(range(300, 400))  # the DStream app's lines not again, the rest all

