"""``dstream-eo`` against a real broker and real stores, progress records, heartbeat and graceful stop."""

from __future__ import annotations

import json
import os
import time
import uuid

import pytest
from pyspark.streaming import StreamingContext

from dstream_exactly_once import KafkaUtils, TopicAndPartition
from dstream_exactly_once.kafka._offsets import OffsetRange
from dstream_exactly_once.stores import PlannedBatch, Writes, open_store

from ..helpers import eventually
from ..helpers import run_cli as cli


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
        eventually(lambda: store.get_value("n", "records") == 100)
        eventually(lambda: store.load_heartbeat() is not None)
        hb = store.load_heartbeat()
        assert hb["epoch"] == store.current_epoch() and hb["pid"] == os.getpid() and not hb.get("stopped")
        # a live driver: a reset is refused (exit 3) and nothing moves
        code, out, err = cli(capsys, "offsets", "reset", "--store", url, "--app", app, *boot, "--to-earliest",
                             "--execute")
        assert code == 3 and "is live" in err and err.count("\n") == 1, err
        assert store.load_offsets() == {TopicAndPartition(topic_name, 0): 60, TopicAndPartition(topic_name, 1): 40}
        kafka.produce(topic_name, [f"w{i}" for i in range(10)], partition=1)
        eventually(lambda: store.get_value("n", "records") == 110)
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
        eventually(lambda: store.get_value("n", "records") == 170)
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
def test_cli_on_server_stores_redacts_the_password_and_lists_apps(kind, postgres_url, redis_url, kafka, topic_name,
                                                                  capsys):
    url = postgres_url if kind == "postgres" else redis_url
    app = "srv-" + uuid.uuid4().hex[:6]
    kafka.create_topic(topic_name, 1)
    kafka.produce(topic_name, [f"v{i}" for i in range(9)], partition=0)
    boot = ("--bootstrap-servers", kafka.bootstrap)  # a reset checks and clamps its targets at the broker
    with open_store(url, app) as store:
        epoch = store.start_epoch()
        b0 = PlannedBatch(0, 1000, (OffsetRange(topic_name, 0, 0, 7),))
        b1 = PlannedBatch(1, 2000, (OffsetRange(topic_name, 0, 7, 9),))
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
    code, out, err = cli(capsys, "offsets", "reset", "--store", url, "--app", app, *boot, "--to-offset", "3",
                         "--execute")
    assert code == 3 and "is live" in err  # fresh heartbeat of the current epoch
    code, out, err = cli(capsys, "offsets", "reset", "--store", url, "--app", app, *boot, "--to-offset", "3",
                         "--execute", "--force")
    assert code == 1 and "uncommitted" in err  # batch 1 would be replayed from its logged ranges
    code, out, _ = cli(capsys, "offsets", "show", "--store", url, "--app", app, "--json")
    assert json.loads(out)["partitions"][0]["position"] == 7
    if kind == "postgres":
        secret_url = url.replace("://", "://deo:s3cr3t-pw@", 1) if "@" not in url else url
        code, out, err = cli(capsys, "offsets", "show", "--store", secret_url, "--app", app)
        assert "s3cr3t-pw" not in out + err


# ---------------------------------------------------------------- every reset target checked before the epoch
def _snapshot(db):
    """The bytes of a SQLite store: its file and a non-empty write-ahead log."""
    paths = (db, db.with_name(db.name + "-wal"))
    return {p.name: p.read_bytes() for p in paths if p.exists() and p.stat().st_size}


def _one_line(err):
    assert "Traceback" not in err and len(err.splitlines()) == 1 and err.startswith("dstream-eo: error: "), err
    return err


def test_reset_checks_every_target_against_the_broker_and_clamps(kafka, topic_name, tmp_path, capsys):
    kafka.create_topic(topic_name, 2)
    kafka.produce(topic_name, [f"v{i}" for i in range(60)], partition=0)
    kafka.produce(topic_name, [f"v{i}" for i in range(40)], partition=1)
    db = tmp_path / "reset.db"
    url, app = f"sqlite:///{db}", "rst-" + uuid.uuid4().hex[:6]
    with open_store(url, app) as store:
        epoch = store.start_epoch()
        batch = PlannedBatch(0, 1000, (OffsetRange(topic_name, 0, 0, 50), OffsetRange(topic_name, 1, 0, 30)))
        store.log_batch(epoch, batch)
        store.commit(epoch, batch, Writes())
    boot = ("--bootstrap-servers", kafka.bootstrap)
    base = ("offsets", "reset", "--store", url, "--app", app, *boot)
    before = _snapshot(db)

    def refused(*argv, words, status=1):
        code, out, err = cli(capsys, *base, *argv, "--execute")
        assert code == status and out == "", (out, err)
        line = _one_line(err)
        assert all(w in line for w in words), line
        assert _snapshot(db) == before  # no epoch taken, nothing written

    typo = tmp_path / "typo.csv"
    typo.write_text(f"x{topic_name},0,5\n")
    refused("--from-file", str(typo), words=[f"x{topic_name}/0 (line 1)", f"{topic_name}/0, {topic_name}/1"])
    no_partition = tmp_path / "p7.csv"
    no_partition.write_text(f"{topic_name},1,3\n{topic_name},7,0\n")
    refused("--from-file", str(no_partition), words=[f"{topic_name}/7 (line 2)"])
    refused("--topic", f"{topic_name}:0,5", "--to-offset", "3", words=[f"topic {topic_name!r}", "[5]"])
    # a time before 1970 is a bad option value: a usage error (2)
    refused("--to-datetime", "1960-01-01T00:00:00Z", words=["--to-datetime", "1970"], status=2)
    refused("--by-duration", "P999999999D", words=["--by-duration (999999999 days", "1970"], status=2)

    far = tmp_path / "far.csv"
    far.write_text(f"{topic_name},1,999999\n")
    code, out, err = cli(capsys, *base, "--from-file", str(far), "--json")
    assert code == 0, err
    assert [(p["key"], p["requested"], p["new"], p["clamped"]) for p in json.loads(out)["plan"]] == [
        (f"{topic_name}/1", 999999, 40, "to latest (999999 -> 40)")]
    code, out, err = cli(capsys, *base, "--from-file", str(far))
    assert code == 0 and "CLAMPED" in out and "to latest (999999 -> 40)" in out, err
    code, out, err = cli(capsys, *base, "--to-offset", "999", "--json")
    assert code == 0, err
    assert [(p["new"], p["clamped"]) for p in json.loads(out)["plan"]] == [
        (60, "to latest (999 -> 60)"), (40, "to latest (999 -> 40)")]
    code, out, err = cli(capsys, *base, "--shift-by", "-45", "--json")
    assert code == 0, err
    assert [(p["new"], p["clamped"]) for p in json.loads(out)["plan"]] == [(5, None), (0, "to earliest (-15 -> 0)")]
    assert _snapshot(db) == before  # dry runs
    code, out, err = cli(capsys, *base, "--from-file", str(far), "--execute")
    assert code == 0, err
    with open_store(url, app) as store:
        assert store.current_epoch() == epoch + 1
        assert store.load_offsets() == {TopicAndPartition(topic_name, 0): 50, TopicAndPartition(topic_name, 1): 40}


def test_show_and_reset_of_an_unknown_topic_name_the_broker_topics(kafka, topic_name, tmp_path, capsys):
    kafka.create_topic(topic_name, 1)
    url, app = f"sqlite:///{tmp_path}/t.db", "unk-" + uuid.uuid4().hex[:6]
    with open_store(url, app) as store:
        epoch = store.start_epoch()
        store.commit(epoch, PlannedBatch(0, 1000, (OffsetRange(topic_name, 0, 0, 0),)), Writes())
    for cmd in (("offsets", "show"), ("offsets", "reset")):
        code, out, err = cli(capsys, *cmd, "--store", url, "--app", app, "--bootstrap-servers", kafka.bootstrap,
                             "--topic", "no-such-topic-x", *(["--to-earliest"] if cmd[1] == "reset" else []))
        assert code == 1 and out == "" and "'no-such-topic-x'" in _one_line(err), err


def test_a_file_app_restarts_after_a_reset(sc, tmp_path, capsys):
    """Real Spark and a file stream: after ``offsets reset --shift-by`` the next driver starts at the
    new byte (the identity document is kept) and reads the last lines again."""
    from dstream_exactly_once import FileUtils

    from .streams import run_until

    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "app.log").write_text("".join(f"{i:03d}\n" for i in range(1, 101)))  # 100 lines of 4 bytes
    url, app = f"sqlite:///{tmp_path}/files.db", "frst-" + uuid.uuid4().hex[:6]

    def values():
        with open_store(url, app) as store:
            return store.get_values("numbers")

    def driver(done):
        ssc = StreamingContext(sc, 1)
        stream = FileUtils.createExactlyOnceFileStream(ssc, f"{logs}/*.log", {"starting.offsets": "earliest"},
                                                       store=url, app_id=app)
        stream.commit_each_batch(lambda batch, rdd: Writes().incr("numbers", "count", rdd.count()).incr(
            "numbers", "sum", rdd.map(int).sum()))
        run_until(ssc, done, timeout=120)

    driver(lambda: values().get("count", 0) >= 100)
    assert values() == {"count": 100, "sum": 5050}
    code, out, err = cli(capsys, "offsets", "reset", "--store", url, "--app", app, "--shift-by", "-40", "--execute")
    assert code == 0, err
    driver(lambda: values().get("count", 0) >= 110)
    assert values() == {"count": 110, "sum": 5050 + sum(range(91, 101))}
