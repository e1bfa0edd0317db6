"""The aof Structured Streaming source without Spark running: options, offset documents, planning."""

from __future__ import annotations

import builtins
import gzip
import importlib
import json
import os
import sys

import pytest

from dstream_exactly_once.core._ranges import Position
from dstream_exactly_once.errors import ConfigurationError
from dstream_exactly_once.files import FileRange
from dstream_exactly_once.files.structured._aof_offsets import (
    admit,
    advance,
    doc_from_positions,
    empty_doc,
    positions_of,
    ranges_between,
)
from dstream_exactly_once.files.structured._aof_options import parse_aof_options


def _append(path, lines):
    with open(path, "a", encoding="utf-8") as f:
        f.write("".join(f"{n}\n" for n in lines))


def _reader(path, **options):
    from dstream_exactly_once.files.structured._aof import AofStreamReader

    return AofStreamReader(parse_aof_options({"path": path, **{k: str(v) for k, v in options.items()}}))


def _read_batch(reader, start, end):
    return [row for p in reader.partitions(start, end) for row in reader.read(p)]


# ---------------------------------------------------------------- options
@pytest.mark.parametrize("options, words", [
    ({"bytes.max": "3"}, ["'bytes.max'", "3", "[5, 2147483647]"]),
    ({"max.bytes.per.trigger": "0"}, ["max.bytes.per.trigger", "'0'", "positive integer"]),
    ({"max.bytes.per.trigger": "lots"}, ["max.bytes.per.trigger", "'lots'"]),
    ({"hosts": "h1,h2"}, ["'hosts'", "'h1,h2'", "cannot pin a partition to a host", "shared.filesystem"]),
    ({"include.file.id": "maybe"}, ["include.file.id", "'maybe'", "true or false"]),
    ({"starting.positions.app": "app1"}, ["starting.positions.store", "missing"]),
    ({"starting.positions.store": "ftp://x", "starting.positions.app": "a"}, ["starting.positions.store", "ftp"]),
    ({"starting.positions.store": "sqlite:////tmp/x.db", "starting.positions.app": "bad app"}, ["app_id", "bad app"]),
    ({"no.such.option": "1"}, ["no.such.option", "known options"]),
])
def test_bad_options_are_refused_naming_key_and_value(options, words):
    with pytest.raises(ConfigurationError) as exc:
        parse_aof_options({"path": "/var/log/*.log", **options})
    for word in words:
        assert word in str(exc.value)


def test_path_is_required_and_absolute():
    with pytest.raises(ConfigurationError, match="option 'path' must be an absolute"):
        parse_aof_options({})
    with pytest.raises(ConfigurationError, match="'logs/\\*'"):
        parse_aof_options({"path": "logs/*"})


def test_conf_applies_and_options_win():
    o = parse_aof_options({"path": "/l/*", "bytes.max": "100"},
                          {"spark.aof.bytes.max": "50", "spark.aof.md5.sample.length": "64",
                           "spark.aof.max.bytes.per.trigger": "1000", "spark.other": "x"})
    assert (o.source.bytes_max, o.source.md5_sample_length, o.max_bytes_per_trigger) == (100, 64, 1000)
    with pytest.raises(ConfigurationError, match="Spark conf 'spark.aof.hosts'"):
        parse_aof_options({"path": "/l/*"}, {"spark.aof.hosts": "h1"})


def test_cluster_master_needs_a_shared_filesystem():
    with pytest.raises(ConfigurationError, match="master 'yarn'.*shared.filesystem"):
        parse_aof_options({"path": "/l/*"}, {}, "yarn")
    assert parse_aof_options({"path": "/l/*", "shared.filesystem": "true"}, {}, "yarn").path == "/l/*"
    assert parse_aof_options({"path": "/l/*"}, {}, "local[2]").path == "/l/*"


@pytest.mark.parametrize("scheme", ["sqlite", "postgresql", "postgres", "redis", "rediss", "redis+cluster",
                                    "rediss+cluster"])
def test_positions_store_takes_every_scheme_open_store_takes(scheme):
    url = f"{scheme}:////tmp/x.db" if scheme == "sqlite" else f"{scheme}://u:pw@127.0.0.1:7000"
    o = parse_aof_options({"path": "/l/*", "starting.positions.store": url, "starting.positions.app": "a"})
    assert o.positions_store == url


def test_positions_store_schemes_are_the_stores_own():
    from dstream_exactly_once.stores import store_schemes

    assert set(store_schemes()) >= {"redis+cluster", "rediss+cluster", "sqlite"}
    with pytest.raises(ConfigurationError) as exc:
        parse_aof_options({"path": "/l/*", "starting.positions.store": "mysql://h/db", "starting.positions.app": "a"})
    assert all(scheme in str(exc.value) for scheme in store_schemes())


def test_store_password_never_shown():
    url = "postgresql://u:s3cret-pw@localhost:1/db"
    o = parse_aof_options({"path": "/l/*", "starting.positions.store": url, "starting.positions.app": "a"})
    assert "s3cret" not in repr(o)
    with pytest.raises(ConfigurationError) as exc:
        parse_aof_options({"path": "/l/*", "starting.positions.store": "pg://u:s3cret-pw@h/db",
                           "starting.positions.app": "a"})
    assert "s3cret" not in str(exc.value)


def test_import_on_pyspark_without_python_streaming_sources_says_4_0_is_needed(monkeypatch):
    real_import = builtins.__import__

    def no_datasource(name, *args, **kwargs):
        if name == "pyspark.sql.datasource":
            raise ImportError("No module named 'pyspark.sql.datasource'")
        return real_import(name, *args, **kwargs)

    saved = sys.modules.pop("dstream_exactly_once.files.structured._aof", None)
    monkeypatch.setattr(builtins, "__import__", no_datasource)
    try:
        with pytest.raises(ConfigurationError, match="needs PySpark 4.0 or newer"):
            importlib.import_module("dstream_exactly_once.files.structured._aof")
    finally:
        monkeypatch.setattr(builtins, "__import__", real_import)
        sys.modules.pop("dstream_exactly_once.files.structured._aof", None)
        if saved is not None:
            sys.modules["dstream_exactly_once.files.structured._aof"] = saved


# ---------------------------------------------------------------- offset documents
def _range(file_id, start, end, path="/l/a.log"):
    return FileRange(file_id, path, start, end, "ff", 4, "ee", min(4, end), 1, 2, seen_size=end)


def test_ranges_between_are_the_changed_entries_and_survive_json():
    a1, b1 = _range("a", 0, 10), _range("b", 0, 5, "/l/b.log")
    d1 = advance(empty_doc(), [a1, b1])
    d2 = advance(json.loads(json.dumps(d1)), [_range("a", 10, 30)])
    assert ranges_between(empty_doc(), d1) == [a1, b1]
    assert ranges_between(json.loads(json.dumps(d1)), json.loads(json.dumps(d2))) == [_range("a", 10, 30)]
    assert positions_of(d2)["file:b"] == Position(5, b1.position_meta())
    assert ranges_between(d2, d2) == []


def test_stored_positions_become_a_start_offset():
    doc = doc_from_positions({"file:a": Position(10, _range("a", 0, 10).position_meta())})
    assert positions_of(doc)["file:a"].offset == 10
    assert ranges_between(doc, doc) == []
    with pytest.raises(ConfigurationError, match="'t/0' is not a file position"):
        doc_from_positions({"t/0": Position(3)})


def test_foreign_offset_is_refused():
    with pytest.raises(ConfigurationError, match="not an aof offset document"):
        positions_of({"topic": {"0": 5}})


def test_admit_whole_ranges_within_caps_at_least_one():
    rs = [_range("a", 0, 60), _range("b", 0, 60), _range("c", 0, 0), _range("d", 0, 30)]
    assert [r.file_id for r in admit(rs, max_bytes=100)] == ["a", "c", "d"]
    assert [r.file_id for r in admit(rs, max_bytes=10)] == ["a", "c"]
    assert [r.file_id for r in admit(rs, max_files=2)] == ["a", "b", "c"]
    later = [_range("a", 60, 90), _range("b", 0, 60), _range("d", 0, 30)]
    assert [r.file_id for r in admit(later, target={"file:a": 60, "file:b": 100})] == ["b"]


# ---------------------------------------------------------------- planning across calls
@pytest.mark.pyspark4
def test_rename_rotation_across_micro_batches_reads_each_line_once(tmp_path):
    log = tmp_path / "app.log"
    _append(log, range(0, 10))
    reader = _reader(f"{tmp_path}/app.log*")
    d0 = reader.initialOffset()
    d1 = reader.latestOffset(d0, None)
    got = _read_batch(reader, d0, d1)
    _append(log, range(10, 15))
    os.rename(log, f"{log}.1")
    _append(log, range(15, 20))
    d2 = reader.latestOffset(d1, None)
    got += _read_batch(reader, d1, d2)
    assert sorted(int(r[0]) for r in got) == list(range(20))
    assert d2["events"]["renames"] == 1
    assert reader.latestOffset(d2, None) is d2  # nothing new: the same offset


@pytest.mark.pyspark4
def test_restart_from_an_offset_rebuilds_the_planner(tmp_path):
    log = tmp_path / "app.log"
    _append(log, range(0, 10))
    first = _reader(f"{tmp_path}/*.log")
    d1 = first.latestOffset(first.initialOffset(), None)
    _append(log, range(10, 20))
    with gzip.open(f"{tmp_path}/old.log.gz", "wt") as f:  # not named by the pattern: ignored
        f.write("x\n")
    second = _reader(f"{tmp_path}/*.log")  # a new driver, from the checkpoint's offset
    d2 = second.latestOffset(json.loads(json.dumps(d1)), None)
    assert [int(r[0]) for r in _read_batch(second, d1, d2)] == list(range(10, 20))


@pytest.mark.pyspark4
def test_cap_holds_back_ranges_and_the_next_batch_takes_them(tmp_path):
    _append(tmp_path / "a.log", range(0, 50))  # 140 bytes
    _append(tmp_path / "b.log", range(50, 100))  # 150 bytes (equal bytes would be a copy, read once)
    reader = _reader(f"{tmp_path}/*.log")
    from pyspark.sql.streaming.datasource import ReadMaxBytes

    start = reader.initialOffset()
    lines = []
    for _ in range(4):
        end = reader.latestOffset(start, ReadMaxBytes(150))
        batch = _read_batch(reader, start, end)
        assert len(batch) <= 50
        lines += batch
        start = end
    assert len(lines) == 100


@pytest.mark.pyspark4
def test_disappearance_with_unread_bytes_is_counted_once(tmp_path):
    log = tmp_path / "a.log"
    _append(log, range(0, 50))
    reader = _reader(f"{tmp_path}/*.log", **{"bytes.max": 40})
    d1 = reader.latestOffset(reader.initialOffset(), None)
    os.remove(log)
    d2 = reader.latestOffset(d1, None)
    assert d2["events"]["losses"] == 1 and d2["events"]["lost_bytes"] > 0
    again = _reader(f"{tmp_path}/*.log", **{"bytes.max": 40})  # restarted: reported once, not twice
    assert again.latestOffset(json.loads(json.dumps(d2)), None) == d2
    with pytest.raises(Exception, match="fail.on.data.loss"):
        strict = _reader(f"{tmp_path}/*.log", **{"bytes.max": 40, "fail.on.data.loss": "true"})
        strict.latestOffset(json.loads(json.dumps(d1)), None)


class _Session:
    """What register() uses of a SparkSession: its conf and dataSource registry."""

    def __init__(self, conf):
        self.registered = []
        outer = self

        class Conf:
            getAll = conf

            def get(self, key, default=None):
                return conf.get(key, default)

        class Registry:
            def register(self, source):
                outer.registered.append(source)

        self.conf, self.dataSource = Conf(), Registry()


@pytest.mark.pyspark4
def test_register_carries_the_session_conf_to_the_pickled_source():
    from pyspark import cloudpickle

    from dstream_exactly_once.structured import register

    session = _Session({"spark.master": "local[2]", "spark.aof.bytes.max": "64", "spark.app.name": "x"})
    register(session)
    (source,) = [s for s in session.registered if s.name() == "aof"]  # register() adds the sinks too
    shipped = cloudpickle.loads(cloudpickle.dumps(source))  # as Spark sends it to its Python workers
    assert shipped({"path": "/l/*"}).aof.source.bytes_max == 64
    with pytest.raises(ConfigurationError, match="'spark.aof.bytes.max'|'bytes.max'"):
        register(_Session({"spark.master": "local[2]", "spark.aof.bytes.max": "1"}))
    cluster = _Session({"spark.master": "yarn"})
    register(cluster)  # shared.filesystem may still come as an option of each query
    (aof,) = [s for s in cluster.registered if s.name() == "aof"]
    source = cloudpickle.loads(cloudpickle.dumps(aof))
    with pytest.raises(ConfigurationError, match="master 'yarn'"):
        source({"path": "/l/*"})
    assert source({"path": "/l/*", "shared.filesystem": "true"}).aof.path == "/l/*"
