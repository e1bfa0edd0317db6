"""``dstream-eo`` against a real broker and real stores, progress records, heartbeat and graceful stop."""

from __future__ import annotations

import json
import os
import time
import uuid

import pytest
from pyspark.streaming import StreamingContext

from dstream_exactly_once import KafkaUtils, TopicAndPartition
from dstream_exactly_once.cli import main
from dstream_exactly_once.offsets import OffsetRange
from dstream_exactly_once.stores import PlannedBatch, Writes, open_store


def cli(capsys, *argv):
    """Run ``dstream-eo argv`` in-process; returns (exit status, stdout, stderr)."""
    capsys.readouterr()
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse usage errors
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def _wait(cond, timeout=90.0):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        time.sleep(0.2)


def _stream(sc, kafka, topic, url, app, progress_path=None):
    ssc = StreamingContext(sc, 1)
    stream = KafkaUtils.createExactlyOnceStream(ssc, {"bootstrap.servers": kafka.bootstrap,
                                                      "auto.offset.reset": "earliest"},
                                                [topic], store=url, app_id=app)
    if progress_path:
        stream.progress_to(progress_path)

    def per_partition(records, r, batch):
        return Writes().incr("n", "records", sum(1 for _ in records))

    stream.commit_each_partition(per_partition)
    return ssc, stream


def test_progress_heartbeat_graceful_stop_cli_and_reset(kafka, topic_name, sc, tmp_path, capsys):
    kafka.create_topic(topic_name, 2)
    kafka.produce(topic_name, [f"v{i}" for i in range(60)], partition=0)
    kafka.produce(topic_name, [f"v{i}" for i in range(40)], partition=1)
    url, app = f"sqlite:///{tmp_path}/ops.db", "ops-" + uuid.uuid4().hex[:6]
    boot = ("--bootstrap-servers", kafka.bootstrap)
    progress_file = str(tmp_path / "progress.jsonl")
    ssc, stream = _stream(sc, kafka, topic_name, url, app, progress_file)
    heard = []
    stream.add_progress_listener(heard.append)
    store = open_store(url, app)
    ssc.start()
    try:
        _wait(lambda: store.get_value("n", "records") == 100)
        _wait(lambda: store.load_heartbeat() is not None)
        hb = store.load_heartbeat()
        assert hb["epoch"] == store.current_epoch() and hb["pid"] == os.getpid() and not hb.get("stopped")
        # a live driver: a reset is refused (exit 3) and nothing moves
        code, out, err = cli(capsys, "offsets", "reset", "--store", url, "--app", app, *boot, "--to-earliest",
                             "--execute")
        assert code == 3 and "is live" in err and err.count("\n") == 1, err
        assert store.load_offsets() == {TopicAndPartition(topic_name, 0): 60, TopicAndPartition(topic_name, 1): 40}
        kafka.produce(topic_name, [f"w{i}" for i in range(10)], partition=1)
        _wait(lambda: store.get_value("n", "records") == 110)
    finally:
        ssc.stop(stopSparkContext=False, stopGraceFully=True)
    # graceful stop: every logged batch committed, the heartbeat says stopped
    assert store.pending_batches() == [] and store.last_committed_batch_id() == store.last_logged_batch_id()
    assert store.load_heartbeat()["stopped"] is True

    # progress records: exact counts, Structured Streaming's fields, file and listener agree
    records = stream.recentProgress
    assert records and stream.lastProgress == records[-1] and heard == records
    assert sum(r["numInputRows"] for r in records) == 110 and all(r["numInputRowsExact"] for r in records)
    with open(progress_file, encoding="utf-8") as f:
        assert [json.loads(line) for line in f] == records
    for r in records:
        batch = store.get_batch(r["batchId"])
        src = r["sources"][0]
        assert src["startOffset"] == {topic_name: {str(x.partition): x.fromOffset for x in batch.ranges}}
        assert src["endOffset"] == {topic_name: {str(x.partition): x.untilOffset for x in batch.ranges}}
        assert src["numInputRows"] == r["numInputRows"] == sum(x.count() for x in batch.ranges)
        assert src["metrics"]["minOffsetsBehindLatest"] >= 0
        assert set(r["durationMs"]) == {"latestOffset", "walCommit", "addBatch", "commitOffsets", "triggerExecution"}
        assert r["durationMs"]["triggerExecution"] >= r["durationMs"]["addBatch"]
        assert r["id"] == app and r["outcome"] == "applied" and r["sink"]["numOutputRows"] >= 1
        assert r["numReplaysSkipped"] == 0 and r["numFencedAttempts"] == 0
    assert records[-1]["sources"][0]["endOffset"] == {topic_name: {"0": 60, "1": 50}}

    # offsets show / batches / lag
    code, out, err = cli(capsys, "offsets", "show", "--store", url, "--app", app, *boot, "--json")
    assert code == 0, err
    shown = json.loads(out)
    assert code == 0 and [(p["key"], p["position"], p["earliest"], p["latest"], p["lag"])
                          for p in shown["partitions"]] == [(f"{topic_name}/0", 60, 0, 60, 0),
                                                            (f"{topic_name}/1", 50, 0, 50, 0)]
    assert shown["driver"]["live"] is False and shown["partitions"][1]["last_batch"] == records[-1]["batchId"]
    code, out, _ = cli(capsys, "offsets", "show", "--store", url, "--app", app)
    assert code == 0 and "stored positions only" in out and f"{topic_name}/0" in out
    code, out, err = cli(capsys, "batches", "--store", url, "--app", app, "--json")
    assert code == 0, err
    logged = json.loads(out)["batches"]
    assert code == 0 and {b["state"] for b in logged} == {"committed"} and len(logged) == len(records)
    code, out, err = cli(capsys, "lag", "--store", url, *boot, "--json")
    assert code == 0, err
    assert [a["lag"] for a in json.loads(out)["apps"] if a["app"] == app] == [0]

    # refusals: bad datetime (usage), unknown topic
    code, _, err = cli(capsys, "offsets", "reset", "--store", url, "--app", app, *boot, "--to-datetime", "yesterday")
    assert code == 2 and "'yesterday'" in err
    code, _, err = cli(capsys, "offsets", "reset", "--store", url, "--app", app, *boot, "--topic", "nope-x",
                       "--to-earliest")
    assert code == 1 and "unknown topic" in err and "'nope-x'" in err
    # dry run writes nothing; --execute moves partition 0 back to its earliest offset
    epoch = store.current_epoch()
    code, out, _ = cli(capsys, "offsets", "reset", "--store", url, "--app", app, *boot, "--topic",
                       f"{topic_name}:0", "--to-earliest")
    assert code == 0 and "DRY RUN" in out and store.current_epoch() == epoch
    assert store.load_offsets()[TopicAndPartition(topic_name, 0)] == 60
    code, out, _ = cli(capsys, "offsets", "reset", "--store", url, "--app", app, *boot, "--topic",
                       f"{topic_name}:0", "--to-earliest", "--execute")
    assert code == 0 and "fenced" in out and store.current_epoch() == epoch + 1
    assert store.load_offsets() == {TopicAndPartition(topic_name, 0): 0, TopicAndPartition(topic_name, 1): 50}

    # the next stream's first batch starts at the reset position
    before = store.last_committed_batch_id()
    ssc2, _ = _stream(sc, kafka, topic_name, url, app)
    ssc2.start()
    try:
        _wait(lambda: store.get_value("n", "records") == 170)
    finally:
        ssc2.stop(stopSparkContext=False, stopGraceFully=True)
    first = store.get_batch(before + 1)
    assert OffsetRange(topic_name, 0, 0, 60) in first.ranges

    # chart: a valid PNG
    png = tmp_path / "out.png"
    code, out, _ = cli(capsys, "chart", progress_file, "-o", str(png))
    data = png.read_bytes()
    assert code == 0 and data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    store.close()


@pytest.mark.parametrize("kind", ["postgres", "redis"])
def test_cli_on_server_stores_redacts_the_password_and_lists_apps(kind, postgres_url, redis_url, capsys):
    url = postgres_url if kind == "postgres" else redis_url
    app = "srv-" + uuid.uuid4().hex[:6]
    with open_store(url, app) as store:
        epoch = store.start_epoch()
        b0 = PlannedBatch(0, 1000, (OffsetRange("tt", 0, 0, 7),))
        b1 = PlannedBatch(1, 2000, (OffsetRange("tt", 0, 7, 9),))
        store.log_batch(epoch, b0)
        store.commit(epoch, b0, Writes().incr("n", "x", 7))
        store.log_batch(epoch, b1)
        store.heartbeat(epoch, {"epoch": epoch, "host": "h", "pid": 1, "last_batch": 0, "time": time.time(),
                                "interval_s": 1.0})
    code, out, _ = cli(capsys, "batches", "--store", url, "--app", app)
    assert code == 0 and "PENDING" in out and "committed" in out and "LIVE" in out
    newer = "srv-newer-" + uuid.uuid4().hex[:6]  # an app written by a newer library version
    if kind == "redis":
        import redis

        redis.Redis.from_url(url).set(f"{{deo:{newer}}}:epoch", 1)
        redis.Redis.from_url(url).set(f"{{deo:{newer}}}:schema", 100)
    code, out, err = cli(capsys, "lag", "--store", url, "--json")
    assert code == 0, err  # one unreadable app does not hide the others
    rows = {a["app"]: a for a in json.loads(out)["apps"]}
    assert app in rows and "error" not in rows[app]
    if kind == "redis":
        assert "StoreVersionError" in rows[newer]["error"]
    code, out, err = cli(capsys, "offsets", "reset", "--store", url, "--app", app, "--to-offset", "3", "--execute")
    assert code == 3 and "is live" in err  # fresh heartbeat of the current epoch
    code, out, err = cli(capsys, "offsets", "reset", "--store", url, "--app", app, "--to-offset", "3", "--execute",
                         "--force")
    assert code == 1 and "uncommitted" in err  # batch 1 would be replayed from its logged ranges
    code, out, _ = cli(capsys, "offsets", "show", "--store", url, "--app", app, "--json")
    assert json.loads(out)["partitions"][0]["position"] == 7
    if kind == "postgres":
        secret_url = url.replace("://", "://deo:s3cr3t-pw@", 1) if "@" not in url else url
        code, out, err = cli(capsys, "offsets", "show", "--store", secret_url, "--app", app)
        assert "s3cr3t-pw" not in out + err
