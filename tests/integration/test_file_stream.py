"""FileUtils on real Spark (local mode): direct and exactly-once file streams over growing, rotating files."""

from __future__ import annotations

import os
import shutil
import threading
import time
import uuid

import pytest
from pyspark.streaming import StreamingContext

from dstream_exactly_once import ConfigurationError, FileUtils
from dstream_exactly_once.files import FileRange
from dstream_exactly_once.files.spark._utils import FileDStream, FileRDD
from dstream_exactly_once.stores import Writes, open_store

from .streams import run_until


def _append(path, numbers):
    with open(path, "a", encoding="utf-8") as f:
        f.write("".join(f"{n}\n" for n in numbers))


def test_direct_stream_reads_growing_files_with_offset_ranges(sc, tmp_path):
    log_a, log_b = tmp_path / "a.log", tmp_path / "b.log"
    _append(log_a, range(0, 50))
    _append(log_b, range(50, 60))
    ssc = StreamingContext(sc, 1)
    stream = FileUtils.createDirectFileStream(ssc, f"{tmp_path}/*.log")
    assert isinstance(stream, FileDStream)
    seen, ranges, lock = [], [], threading.Lock()

    def collect(rdd):
        assert isinstance(rdd, FileRDD)
        got = rdd.collect()
        with lock:
            seen.extend(got)
            ranges.extend(rdd.offsetRanges())

    stream.foreachRDD(collect)

    def grow():
        for k in range(6):
            time.sleep(0.4)
            _append(log_a, range(100 + 10 * k, 110 + 10 * k))
        with open(log_b, "a", encoding="utf-8") as f:  # a half-written line waits for its newline
            f.write("99")
            f.flush()
            time.sleep(1.5)
            f.write("9\n")

    writer = threading.Thread(target=grow)
    writer.start()
    expected = [str(n) for n in [*range(0, 60), *range(100, 160), 999]]
    try:
        run_until(ssc, lambda: len(seen) >= len(expected) and not writer.is_alive(), timeout=90)
    finally:
        writer.join()
    assert sorted(seen, key=int) == sorted(expected, key=int)  # every line once, the split line whole
    assert all(isinstance(r, FileRange) for r in ranges)
    assert {r.path for r in ranges} == {str(log_a), str(log_b)}
    for path in (log_a, log_b):  # per file the ranges tile [0, size) without gaps or overlaps
        mine = sorted((r.fromOffset, r.untilOffset) for r in ranges if r.path == str(path))
        assert mine[0][0] == 0 and mine[-1][1] == os.path.getsize(path)
        assert all(a[1] == b[0] for a, b in zip(mine, mine[1:], strict=False))


class RotatingWriter(threading.Thread):
    """Appends the numbers 1..n to ``service.log`` in small chunks, rotating it alternately by rename
    (``service.log`` -> ``service.log.<k>``, then a new ``service.log``) and by copytruncate (copy to
    ``service.log.<k>``, truncate the original in place) every ``rotate_every`` numbers. After
    ``hold_at`` numbers it waits for :attr:`gate` (so a driver change happens mid-stream)."""

    def __init__(self, directory, n, chunk=40, rotate_every=600, pause=0.05, hold_at=None):
        super().__init__(daemon=True)
        self.gate, self.hold_at = threading.Event(), hold_at
        self.dir, self.n, self.chunk, self.rotate_every, self.pause = directory, n, chunk, rotate_every, pause
        self.rotations = {"rename": 0, "copytruncate": 0}
        self.written = 0

    @property
    def live(self):
        return os.path.join(self.dir, "service.log")

    def rotate(self, k):
        rotated = os.path.join(self.dir, f"service.log.{k}")
        if k % 2:
            os.rename(self.live, rotated)
            self.rotations["rename"] += 1
        else:
            shutil.copyfile(self.live, rotated)
            with open(self.live, "r+b") as f:
                f.truncate(0)
            self.rotations["copytruncate"] += 1

    def run(self):
        k = 0
        for start in range(1, self.n + 1, self.chunk):
            _append(self.live, range(start, min(start + self.chunk, self.n + 1)))
            self.written = min(start + self.chunk, self.n + 1) - 1
            if self.written % self.rotate_every == 0 and self.written < self.n:
                k += 1
                self.rotate(k)
            if self.hold_at is not None and self.written >= self.hold_at:
                self.hold_at = None
                assert self.gate.wait(180), "the writer was never released"
            time.sleep(self.pause)


def sum_and_count(batch, rdd):
    total, count = rdd.map(lambda line: (int(line), 1)).fold((0, 0), lambda a, b: (a[0] + b[0], a[1] + b[1]))
    return Writes().incr("numbers", "sum", total).incr("numbers", "count", count)


def _store_url(kind, tmp_path, postgres_server, redis_server):
    if kind == "sqlite":
        return f"sqlite:///{tmp_path}/files.db"
    if kind == "postgres":
        return postgres_server.url(postgres_server.create_database())
    return redis_server.url


def _values(url, app):
    with open_store(url, app) as store:
        return store.get_values("numbers")


@pytest.mark.parametrize("kind", ["sqlite", "postgres", "redis"])
def test_exactly_once_across_rotation_and_a_second_driver(kind, sc, tmp_path, request):
    servers = {name: request.getfixturevalue(name) for name in ("postgres_server", "redis_server")
               if kind in name}
    url = _store_url(kind, tmp_path, servers.get("postgres_server"), servers.get("redis_server"))
    app = f"files-{kind}-{uuid.uuid4().hex[:6]}"
    logs = tmp_path / "logs"
    logs.mkdir()
    n = 3000
    writer = RotatingWriter(str(logs), n, hold_at=n // 2)
    _append(writer.live, [])  # the file exists before the stream starts
    options = {"bytes.max": 4096, "starting.offsets": "earliest"}

    def driver(done):
        ssc = StreamingContext(sc, 1)
        stream = FileUtils.createExactlyOnceFileStream(ssc, f"{logs}/service.log*", options, store=url, app_id=app)
        stream.commit_each_batch(sum_and_count)
        run_until(ssc, done, timeout=120)
        return stream

    writer.start()
    first = driver(lambda: _values(url, app).get("count", 0) >= n // 3)
    assert first.committer.committed >= 1
    assert writer.is_alive() and writer.written < n, "the first driver should stop mid-stream"
    writer.gate.set()  # the writer goes on (and rotates) while no driver runs and under the second one
    second = driver(lambda: not writer.is_alive() and _values(url, app).get("count", 0) >= n)
    writer.join()
    assert writer.rotations["rename"] >= 2 and writer.rotations["copytruncate"] >= 2
    assert second.epoch > first.epoch
    got = _values(url, app)
    assert (got["count"], got["sum"]) == (n, n * (n + 1) // 2)
    assert second.committer.source.counters["losses"] == 0


def test_non_local_master_is_refused_before_the_store_is_touched(sc, tmp_path, monkeypatch):
    (tmp_path / "x.log").write_text("1\n")
    db = tmp_path / "refused.db"
    ssc = StreamingContext(sc, 1)
    monkeypatch.setattr(sc, "master", "spark://10.1.2.3:7077")
    with pytest.raises(ConfigurationError, match=r"'spark://10\.1\.2\.3:7077'.*'shared\.filesystem'=true"):
        FileUtils.createExactlyOnceFileStream(ssc, f"{tmp_path}/*.log", store=f"sqlite:///{db}", app_id="refused")
    with pytest.raises(ConfigurationError, match="shared.filesystem"):
        FileUtils.createDirectFileStream(ssc, f"{tmp_path}/*.log")
    with pytest.raises(ConfigurationError, match=r"'shared\.filesystem' must be true or false, got 'yes'"):
        FileUtils.createExactlyOnceFileStream(ssc, f"{tmp_path}/*.log", {"shared.filesystem": "yes"},
                                              store=f"sqlite:///{db}", app_id="refused")
    assert not db.exists()
    # declaring a shared filesystem allows the master; bad source options are still refused first
    with pytest.raises(ConfigurationError, match="bytes.max"):
        FileUtils.createExactlyOnceFileStream(ssc, f"{tmp_path}/*.log", {"shared.filesystem": "true",
                                                                         "bytes.max": 0},
                                              store=f"sqlite:///{db}", app_id="refused")
    assert not db.exists()
    stream = FileUtils.createExactlyOnceFileStream(ssc, f"{tmp_path}/*.log", {"shared.filesystem": True},
                                                   store=f"sqlite:///{db}", app_id="shared")
    assert stream.committer.start() >= 1
    stream.committer.close()


def test_spark_conf_options_and_bad_input(sc, tmp_path):
    ssc = StreamingContext(sc, 1)
    with pytest.raises(ConfigurationError, match="unknown file source option 'no.such'"):
        FileUtils.createDirectFileStream(ssc, f"{tmp_path}/*.log", {"no.such": 1})
    with pytest.raises(ConfigurationError, match="absolute"):
        FileUtils.createDirectFileStream(ssc, "relative/*.log")
    with pytest.raises(ConfigurationError, match="retain_batches"):
        FileUtils.createExactlyOnceFileStream(ssc, f"{tmp_path}/*.log", store=f"sqlite:///{tmp_path}/s.db",
                                              app_id="a", retain_batches=0)
    with pytest.raises(ConfigurationError, match="app_id"):
        FileUtils.createExactlyOnceFileStream(ssc, f"{tmp_path}/*.log", store=f"sqlite:///{tmp_path}/s.db")
    assert not (tmp_path / "s.db").exists()
    # conf is read from the context: spark.aof.* keys set there apply to every stream
    sc._conf.set("spark.aof.bytes.max", "64")
    try:
        stream = FileUtils.createDirectFileStream(ssc, f"{tmp_path}/*.log")
        assert stream.planner.options.bytes_max == 64
        stream = FileUtils.createDirectFileStream(ssc, f"{tmp_path}/*.log", {"bytes.max": 128})
        assert stream.planner.options.bytes_max == 128  # the options mapping wins over conf
    finally:
        sc._conf._jconf.remove("spark.aof.bytes.max")


def test_identical_new_files_are_each_counted_once(sc, tmp_path):
    """Two files new in one scan with the same bytes are two files: both are counted (first scan and a
    later one), neither is held as a copy of the other."""
    logs = tmp_path / "logs"
    logs.mkdir()
    _append(logs / "a.log", range(1, 101))
    _append(logs / "b.log", range(1, 101))
    url, app = f"sqlite:///{tmp_path}/files.db", f"identical-{uuid.uuid4().hex[:6]}"
    ssc = StreamingContext(sc, 1)
    stream = FileUtils.createExactlyOnceFileStream(ssc, f"{logs}/*.log", {"starting.offsets": "earliest"},
                                                   store=url, app_id=app)
    stream.commit_each_batch(sum_and_count)

    def later():  # two more identical files, made outside the pattern and renamed in together
        while _values(url, app).get("count", 0) < 100:
            time.sleep(0.2)
        time.sleep(2)  # a batch or two more: both first files are read by now
        for name in ("c", "d"):
            _append(logs / f"{name}.tmp", range(1000, 1050))
        os.rename(logs / "c.tmp", logs / "c.log")
        os.rename(logs / "d.tmp", logs / "d.log")

    adder = threading.Thread(target=later, daemon=True)
    adder.start()
    run_until(ssc, lambda: not adder.is_alive() and _values(url, app).get("count", 0) >= 300, timeout=60)
    got = _values(url, app)
    assert (got["count"], got["sum"]) == (300, 2 * 5050 + 2 * sum(range(1000, 1050)))
    assert stream.committer.source.counters["losses"] == 0
