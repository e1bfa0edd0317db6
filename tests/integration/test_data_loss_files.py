"""The file source's data-loss policy on real files, real Spark and every store.

The copytruncate gap: logrotate copies ``service.log`` to ``service.log.1``, lines 101..110 land in
the original, a batch plans them (``[X, Y)`` of the original), and logrotate truncates the original
before the batch reads them — no file holds those bytes any more. Lines 111..120 are written to the
truncated file afterwards. With ``fail.on.data.loss=false`` (the default) every batch commits what
exists: the count ends at exactly 110 and the loss ``[X, Y)`` is recorded beside the commit, counted in
the progress record and logged once. With ``true`` the stream stops with one ``DataLossError`` naming
the batch, the range and the skip command; a restart replays the batch under the policy it is given.
The same holds when the driver is SIGKILLed between planning the batch and reading it.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import uuid

import pytest
from pyspark.streaming import StreamingContext

from dstream_exactly_once import DataLossError, FileUtils, Writes, open_store
from dstream_exactly_once.sinks.doris import DorisSink, DorisStreamLoadClient
from dstream_exactly_once.stores._writes import RESERVED_NAMESPACE
from dstream_exactly_once.testing._doris_double import DorisProtocolDouble

from ..helpers import eventually
from .faults import ROOT, kill_group
from .test_file_faults import _lines, _wait_for

FIRST = range(1, 101)  # committed before the rotation
GAP = range(101, 111)  # written between logrotate's copy and its truncate: lost
AFTER = range(111, 121)  # written to the truncated file
X = sum(len(f"{i}\n") for i in FIRST)
Y = X + sum(len(f"{i}\n") for i in GAP)
LOST_BYTES = Y - X


def _append(path, numbers):
    with open(path, "a", encoding="utf-8") as f:
        f.write("".join(f"{n}\n" for n in numbers))


def _store_url(kind, tmp_path, request):
    if kind == "sqlite":
        return f"sqlite:///{tmp_path}/loss.db"
    if kind == "postgres":
        server = request.getfixturevalue("postgres_server")
        return server.url(server.create_database())
    return request.getfixturevalue("redis_server").url


def _values(url, app):
    with open_store(url, app) as store:
        return store.get_values("numbers")


def _losses(url, app):
    with open_store(url, app) as store:
        return {k: v for k, v in store.get_values(RESERVED_NAMESPACE).items() if k.startswith("loss:")}


class TruncateOnce:
    """logrotate's truncate, done right after the batch holding ``[X, Y)`` was planned and before it is
    read (picklable: runs on the driver or in an executor's task); lines 111..120 follow it."""

    def __init__(self, live: str) -> None:
        self.live = live
        self.marker = live + ".truncated"

    def __call__(self, ranges) -> None:
        if any((r.start, r.end) == (X, Y) for r in ranges) and not os.path.exists(self.marker):
            with open(self.live, "r+b") as f:
                f.truncate(0)
            _append(self.live, AFTER)
            open(self.marker, "w").close()


def _copy_and_gap(live: str) -> None:
    """logrotate's copy, then lines that reach only the original."""
    shutil.copyfile(live, live + ".1")
    _append(live, GAP)


def _sum_count(numbers):
    total = count = 0
    for n in numbers:
        total, count = total + int(n), count + 1
    return total, count


def _start(sc, pattern, url, app, fail, pattern_kind="batch", before_read=None):
    ssc = StreamingContext(sc, 0.5)
    stream = FileUtils.createExactlyOnceFileStream(ssc, pattern, {"fail.on.data.loss": fail}, store=url, app_id=app)
    hook = before_read or (lambda ranges: None)
    if pattern_kind == "batch":
        def per_batch(batch, rdd):
            hook(batch.ranges)
            total, count = rdd.map(lambda line: (int(line), 1)).fold((0, 0), lambda a, b: (a[0] + b[0], a[1] + b[1]))
            return Writes().incr("numbers", "sum", total).incr("numbers", "count", count)

        stream.commit_each_batch(per_batch)
    elif pattern_kind == "foreach_batch":
        def add_batch(batch_id, rdd):
            hook(stream.committer.store.get_batch(batch_id).ranges)
            total, count = _sum_count(rdd.collect())
            return Writes().incr("numbers", "sum", total).incr("numbers", "count", count)

        stream.foreach_batch(add_batch)
    else:
        def per_partition(records, r, batch):
            hook([r])
            total, count = _sum_count(records)
            return Writes().incr("numbers", "sum", total).incr("numbers", "count", count)

        stream.commit_each_partition(per_partition)
    ssc.start()
    return ssc, stream


def _stop(ssc):
    ssc.stop(stopSparkContext=False, stopGraceFully=False)


def _check_exact_with_loss(url, app, stream, caplog):
    want = sum(FIRST) + sum(AFTER)
    eventually(lambda: _values(url, app).get("count", 0) >= len(FIRST) + len(AFTER), what="all readable lines")
    assert _values(url, app) == {"count": len(FIRST) + len(AFTER), "sum": want}
    (key, doc), = _losses(url, app).items()
    assert doc["range"] == [X, Y] and doc["lost"] == LOST_BYTES and doc["unit"] == "bytes"
    assert doc["where"].endswith("/service.log") and key == f"loss:{doc['batch']:020d}:{doc['key']}"
    assert [p[:2] for p in doc["parts"]] == [[X, Y]]
    with open_store(url, app) as store:
        assert store.is_committed(doc["batch"])
    progress = eventually(lambda: [p for p in stream.recentProgress if p["dataLoss"]], what="the loss's progress")
    (record,) = progress
    assert record["batchId"] == doc["batch"] and record["numDataLossSkippedBytes"] == LOST_BYTES
    assert record["dataLoss"] == [{"key": doc["key"], "where": doc["where"], "unit": "bytes", "start": X, "end": Y,
                                   "lost": LOST_BYTES}]
    warned = [r for r in caplog.records if r.levelno == logging.WARNING and "data loss in batch" in r.getMessage()]
    assert len(warned) == 1 and f"[{X}, {Y})" in warned[0].getMessage()
    return doc


CASES = [("sqlite", "batch"), ("sqlite", "partition"), ("sqlite", "foreach_batch"), ("postgres", "batch"),
         ("postgres", "partition"), ("redis", "batch"), ("redis", "partition")]


@pytest.mark.parametrize(("kind", "output"), CASES, ids=[f"{k}-{o}" for k, o in CASES])
def test_copytruncate_gap_read_after_the_truncate_is_skipped_and_recorded(kind, output, sc, tmp_path, request,
                                                                         caplog):
    caplog.set_level(logging.INFO)
    url, app = _store_url(kind, tmp_path, request), f"loss-{uuid.uuid4().hex[:8]}"
    logs = tmp_path / "logs"
    logs.mkdir()
    live = str(logs / "service.log")
    _append(live, FIRST)
    ssc, stream = _start(sc, f"{logs}/service.log*", url, app, False, output, TruncateOnce(live))
    try:
        eventually(lambda: _values(url, app).get("count", 0) >= len(FIRST), what="the first lines")
        _copy_and_gap(live)
        _check_exact_with_loss(url, app, stream, caplog)
        assert stream.committer.failed is None
    finally:
        _stop(ssc)
    if output == "partition":  # counted while read: the batch that lost the gap read nothing of it
        doc = next(iter(_losses(url, app).values()))
        (record,) = [p for p in stream.recentProgress if p["batchId"] == doc["batch"]]
        assert record["numInputRows"] == 0 and record["numInputRowsExact"]


def test_copytruncate_gap_fails_once_names_the_way_out_and_the_replay_follows_the_policy(sc, tmp_path, caplog):
    url, app = f"sqlite:///{tmp_path}/loss.db", f"loss-{uuid.uuid4().hex[:8]}"
    logs = tmp_path / "logs"
    logs.mkdir()
    live = str(logs / "service.log")
    _append(live, FIRST)
    pattern = f"{logs}/service.log*"
    ssc, stream = _start(sc, pattern, url, app, True, "batch", TruncateOnce(live))
    try:
        eventually(lambda: _values(url, app).get("count", 0) >= len(FIRST), what="the first lines")
        _copy_and_gap(live)
        failed = eventually(lambda: stream.committer.failed, what="the stream's failure")
    finally:
        _stop(ssc)
    assert isinstance(failed, DataLossError)
    with open_store(url, app) as store:
        pending = store.pending_batches()
    # batches are planned while Spark generates them: later batches may be logged behind the failed one
    n = pending[0].batch_id
    assert [b.batch_id for b in pending] == list(range(n, n + len(pending)))
    text = str(failed)
    assert f"batch {n} cannot be read" in text and f"[{X} -> {Y})" in text and "service.log" in text
    assert f"dstream-eo batches skip --store {url} --app {app} --batch {n} --execute" in text
    assert "fail.on.data.loss=false" in text
    assert _values(url, app) == {"count": len(FIRST), "sum": sum(FIRST)} and _losses(url, app) == {}
    # a restart under the same policy replays the batch and stops with the same one error
    ssc, stream = _start(sc, pattern, url, app, True)
    try:
        again = eventually(lambda: stream.committer.failed, what="the replay's failure")
    finally:
        _stop(ssc)
    assert isinstance(again, DataLossError) and f"batch {n} cannot be read" in str(again)
    assert _values(url, app)["count"] == len(FIRST)
    # a restart with the skip policy replays it: what exists is committed, the loss recorded
    caplog.set_level(logging.INFO)
    ssc, stream = _start(sc, pattern, url, app, False)
    try:
        doc = _check_exact_with_loss(url, app, stream, caplog)
    finally:
        _stop(ssc)
    assert doc["batch"] == n and stream.recentProgress[0]["replayedBatch"]


def _spawn(*args, stderr_path):
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), "PYTHONUNBUFFERED": "1"}
    with open(stderr_path, "ab") as err:
        return subprocess.Popen([sys.executable, "-m", "tests.integration.data_loss_proc", *args],
                                stdout=subprocess.PIPE, stderr=err, text=True, cwd=ROOT, env=env,
                                start_new_session=True)


@pytest.mark.parametrize("kind", ["sqlite", "postgres", "redis"])
def test_copytruncate_gap_after_a_sigkill_between_planning_and_reading(kind, sc, tmp_path, request, caplog):
    url, app = _store_url(kind, tmp_path, request), f"loss-{uuid.uuid4().hex[:8]}"
    logs = tmp_path / "logs"
    logs.mkdir()
    live = str(logs / "service.log")
    _append(live, FIRST)
    pattern = f"{logs}/service.log*"
    stderr = str(tmp_path / "driver.err")
    driver = _spawn("files", pattern, url, app, str(X), str(Y), stderr_path=stderr)
    try:
        lines = _lines(driver)
        _wait_for(lines, "STARTED", 120)
        eventually(lambda: _values(url, app).get("count", 0) >= len(FIRST), what="the first lines")
        _copy_and_gap(live)
        planned = _wait_for(lines, "PLANNED", 60)
    except AssertionError as exc:
        with open(stderr, errors="replace") as f:
            raise AssertionError(f"{exc}\ndriver's stderr (tail):\n{f.read()[-3000:]}") from None
    finally:
        kill_group(driver)
    n = int(planned.split()[1])
    TruncateOnce(live)([type("R", (), {"start": X, "end": Y})()])  # logrotate's truncate while no driver runs
    with open_store(url, app) as store:
        # later batches planned while the output function blocked may be logged behind it
        assert [b.batch_id for b in store.pending_batches()][:1] == [n]
    caplog.set_level(logging.INFO)
    ssc, stream = _start(sc, pattern, url, app, False)
    try:
        doc = _check_exact_with_loss(url, app, stream, caplog)
    finally:
        _stop(ssc)
    assert doc["batch"] == n


def test_rotated_file_deleted_between_plan_and_read(sc, tmp_path, caplog):
    url, app = f"sqlite:///{tmp_path}/loss.db", f"loss-{uuid.uuid4().hex[:8]}"
    logs = tmp_path / "logs"
    logs.mkdir()
    live = str(logs / "service.log")
    _append(live, FIRST)
    rotated = str(logs / "service.log.1")

    def delete_rotated(ranges):  # the batch that finishes the renamed file: it is deleted before the read
        if any(getattr(r, "path", "") == rotated for r in ranges) and os.path.exists(rotated):
            os.remove(rotated)

    caplog.set_level(logging.INFO)
    ssc, stream = _start(sc, f"{logs}/service.log*", url, app, False, "batch", delete_rotated)
    try:
        eventually(lambda: _values(url, app).get("count", 0) >= len(FIRST), what="the first lines")
        _append(live, GAP)  # unread lines of the file about to be rotated
        os.rename(live, rotated)
        _append(live, AFTER)
        eventually(lambda: _values(url, app).get("count", 0) >= len(FIRST) + len(AFTER), what="the new file")
        (doc,) = eventually(lambda: list(_losses(url, app).values()), what="the loss record")
    finally:
        _stop(ssc)
    assert _values(url, app) == {"count": len(FIRST) + len(AFTER), "sum": sum(FIRST) + sum(AFTER)}
    assert doc["range"] == [X, Y] and doc["lost"] == LOST_BYTES and doc["where"] == rotated
    assert stream.committer.failed is None


class TruncatingDorisSink(DorisSink):
    """A Doris sink whose partition write first applies logrotate's truncate (see :class:`TruncateOnce`)."""

    def __init__(self, client, live):
        super().__init__(client)
        self.truncate = TruncateOnce(live)

    def write_partition(self, store, epoch, batch, partition_id, rows, *, writes=None, ranges=None):
        self.truncate([batch.ranges[partition_id]])
        return super().write_partition(store, epoch, batch, partition_id, rows, writes=writes, ranges=ranges)


def test_copytruncate_gap_with_a_per_partition_sink_records_the_loss_in_the_sinks_commit(sc, tmp_path, caplog):
    url, app = f"sqlite:///{tmp_path}/loss.db", f"loss-{uuid.uuid4().hex[:8]}"
    logs = tmp_path / "logs"
    logs.mkdir()
    live = str(logs / "service.log")
    _append(live, FIRST)
    caplog.set_level(logging.INFO)
    with DorisProtocolDouble(user="etl", password="pw") as doris:
        client = DorisStreamLoadClient(doris.fe_url, "dw", "events", user="etl", password="pw", column_separator=",",
                                       backoff_s=0.01, max_backoff_s=0.02, max_retries=2, poll_interval_s=0.02,
                                       request_timeout_s=10)
        ssc = StreamingContext(sc, 0.5)
        stream = FileUtils.createExactlyOnceFileStream(ssc, f"{logs}/service.log*", store=url, app_id=app)
        stream.write_each_partition(TruncatingDorisSink(client, live), rows=lambda lines: ((int(n),) for n in lines))
        ssc.start()
        try:
            eventually(lambda: len(doris.rows("dw", "events")) >= len(FIRST), what="the first lines")
            _copy_and_gap(live)
            eventually(lambda: len(doris.rows("dw", "events")) >= len(FIRST) + len(AFTER), what="the new lines")
            (doc,) = eventually(lambda: list(_losses(url, app).values()), what="the loss record")
            eventually(lambda: [p for p in stream.recentProgress if p["dataLoss"]], what="the loss's progress")
        finally:
            _stop(ssc)
        got = sorted(int(row[0]) for row in doris.rows("dw", "events"))
    assert got == [*FIRST, *AFTER]
    assert doc["range"] == [X, Y] and doc["lost"] == LOST_BYTES and doc["where"] == live
    warned = [r for r in caplog.records if r.levelno == logging.WARNING and "data loss in batch" in r.getMessage()]
    assert len(warned) == 1 and stream.committer.failed is None
