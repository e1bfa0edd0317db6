"""Bad input to the file source on real Spark (local mode) and SQLite: odd files never block or silently
drop the others, progress output never stops the stream, bad launches are refused before any write."""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path
from typing import Dict

import pytest
from pyspark.streaming import StreamingContext

from dstream_exactly_once import ConfigurationError, FileUtils
from dstream_exactly_once.stores import Writes, open_store

from .streams import run_until


def _append(path, numbers):
    with open(path, "ab") as f:
        f.write("".join(f"{n}\n" for n in numbers).encode())


def sum_and_count(batch, rdd):
    total, count = rdd.map(lambda line: (int(line), 1)).fold((0, 0), lambda a, b: (a[0] + b[0], a[1] + b[1]))
    return Writes().incr("numbers", "sum", total).incr("numbers", "count", count)


def _values(url, app):
    with open_store(url, app) as store:
        return store.get_values("numbers")


def _snapshot(db: Path) -> Dict[str, bytes]:
    """The SQLite file and its write-ahead log, byte for byte (``-shm`` is a shared-memory index)."""
    return {p.name: p.read_bytes() for p in sorted(db.parent.glob(db.name + "*")) if not p.name.endswith("-shm")}


def test_odd_files_and_failing_progress_output_never_stop_the_stream(sc, tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    good = logs / "service.log"
    odd = os.path.join(os.fsencode(logs), b"service.log.\xff")  # a name that is not UTF-8
    os.mkfifo(logs / "service.log.pipe")  # matched, never readable as a file
    _append(good, range(1, 101))
    _append(odd, range(101, 151))
    url, app = f"sqlite:///{tmp_path}/state.db", "files-" + uuid.uuid4().hex[:6]
    progress_dir = tmp_path / "progress"
    progress_dir.mkdir()
    heard = []

    def broken_listener(record):
        raise RuntimeError("dashboard unreachable")

    def remove_progress_dir(record):  # the progress file's directory disappears after the first batch
        heard.append(record)
        shutil.rmtree(progress_dir, ignore_errors=True)

    ssc = StreamingContext(sc, 1)
    stream = FileUtils.createExactlyOnceFileStream(ssc, f"{logs}/service.log*", {"bytes.max": 512},
                                                   store=url, app_id=app)
    stream.commit_each_batch(sum_and_count)
    stream.progress_to(str(progress_dir / "progress.jsonl"))
    stream.add_progress_listener(broken_listener)
    stream.add_progress_listener(remove_progress_dir)
    grown = []

    def done():
        if heard and not grown:  # more lines after the progress directory is gone
            _append(good, range(151, 201))
            _append(odd, range(201, 251))
            grown.append(True)
        return _values(url, app).get("count", 0) >= 250 or stream.committer.failed is not None

    run_until(ssc, done, timeout=120)
    assert stream.committer.failed is None
    assert _values(url, app) == {"count": 250, "sum": 250 * 251 // 2}
    assert len(heard) >= 2 and stream.committer.committed == len(stream.recentProgress)
    counters = stream.committer.source.counters
    assert counters["unreadable"] == 1 and counters["losses"] == 0
    assert stream.lastProgress["sources"][0]["metrics"]["unreadable"] == 1
    assert not progress_dir.exists()

    # a second driver finds the file with the odd name again from its stored identity document
    _append(odd, range(251, 301))
    ssc = StreamingContext(sc, 1)
    second = FileUtils.createExactlyOnceFileStream(ssc, f"{logs}/service.log*", store=url, app_id=app)
    second.commit_each_batch(sum_and_count)
    run_until(ssc, lambda: _values(url, app).get("count", 0) >= 300 or second.committer.failed is not None,
              timeout=120)
    assert second.committer.failed is None
    assert _values(url, app) == {"count": 300, "sum": 300 * 301 // 2}
    assert second.committer.source.counters["replacements"] == 0


def _bad_launches(logs: Path):
    """(what, path, options, the words the error must hold)."""
    return [
        ("a directory as the path", str(logs), None, [f"path '{logs}' is a directory", f"'{logs}/*'"]),
        ("a trailing slash", f"{logs}/", None, ["ends with '/'"]),
        ("a NUL byte", f"{logs}/a\0*.log", None, ["NUL byte"]),
        ("a missing directory", f"{logs}/typo/*.log", None, ["does not exist"]),
        ("bytes.max too small", f"{logs}/*.log", {"bytes.max": 3}, ["'bytes.max'", "got 3", "UTF-8 character"]),
        ("line.max.bytes too small", f"{logs}/*.log", {"line.max.bytes": 2}, ["'line.max.bytes'", "got 2"]),
    ]


def test_bad_launches_leave_the_store_byte_identical_and_create_no_store(sc, tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    _append(logs / "a.log", range(1, 11))
    db = tmp_path / "state.db"
    url, app = f"sqlite:///{db}", "files-" + uuid.uuid4().hex[:6]
    ssc = StreamingContext(sc, 1)
    stream = FileUtils.createExactlyOnceFileStream(ssc, f"{logs}/*.log", store=url, app_id=app)
    stream.commit_each_batch(sum_and_count)
    run_until(ssc, lambda: _values(url, app).get("count", 0) >= 10, timeout=120)
    before = _snapshot(db)
    assert before
    for what, path, options, words in _bad_launches(logs):
        for store in (url, f"sqlite:///{tmp_path}/fresh.db"):
            with pytest.raises(ConfigurationError) as info:
                FileUtils.createExactlyOnceFileStream(StreamingContext(sc, 1), path, options, store=store, app_id=app)
            assert all(w in str(info.value) for w in words), (what, str(info.value))
            assert _snapshot(db) == before, f"{what}: the refused launch changed the store"
            assert not (tmp_path / "fresh.db").exists(), f"{what}: the refused launch created a store"
    # store_retry as in KafkaUtils.createExactlyOnceStream: a bad value is refused before the store opens
    with pytest.raises(ConfigurationError, match="store_retry"):
        FileUtils.createExactlyOnceFileStream(StreamingContext(sc, 1), f"{logs}/*.log", store=url, app_id=app,
                                              store_retry=60)
    assert _snapshot(db) == before
    # progress_to refuses bad values when it is called, before the stream runs a batch
    for bad, word in ((str(tmp_path), "is a directory"), (str(tmp_path / "no" / "p.jsonl"), "does not exist"),
                      (f"{tmp_path}/p\0.jsonl", "NUL byte")):
        with pytest.raises(ConfigurationError, match=word):
            stream.progress_to(bad)
    assert stream.committer.progress.progress_path is None
    assert _snapshot(db) == before
