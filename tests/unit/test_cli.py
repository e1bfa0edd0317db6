"""``dstream-eo``: program name, ``--version``, one-line usage errors with status 2, no pyspark needed.

Every test runs a real subprocess; ``sys.modules['pyspark'] = None`` makes any pyspark import fail,
as on a machine where pyspark is not installed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

from dstream_exactly_once import __version__

from ..helpers import run_cli as cli

ROOT = str(Path(__file__).resolve().parents[2])
NO_SPARK = "import sys; sys.modules['pyspark'] = None; "
CONSOLE = NO_SPARK + "sys.argv[0] = 'dstream-eo'; from dstream_exactly_once.cli import main; sys.exit(main())"


def run(args: List[str], timeout: float = 60) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=ROOT, env=env,
                          timeout=timeout)


def console(*args: str) -> subprocess.CompletedProcess:
    """The ``dstream-eo`` console script (setup.py: ``dstream_exactly_once.cli:main``), pyspark blocked."""
    return run(["-c", CONSOLE, *args])


def test_help_names_the_program_and_needs_no_pyspark():
    out = console("--help")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage: dstream-eo "), out.stdout
    assert "demo" in out.stdout and "--version" in out.stdout
    assert out.stderr == ""


def test_demo_help_lists_the_ranges():
    out = console("demo", "--help")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage: dstream-eo demo "), out.stdout
    assert "N >= 1" in out.stdout


def test_version():
    out = console("--version")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"dstream-eo {__version__}"


def test_python_dash_m_package_runs_the_cli():
    out = run(["-m", "dstream_exactly_once", "--version"])
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"python -m dstream_exactly_once {__version__}"
    out = run(["-m", "dstream_exactly_once", "demo", "--n", "0"])
    assert out.returncode == 2 and "--n" in out.stderr and "'0'" in out.stderr, out.stderr


@pytest.mark.parametrize(("args", "words"), [
    (["demo", "--n", "0"], ["argument --n", "integer >= 1", "'0'"]),
    (["demo", "--n", "-5"], ["argument --n", "integer >= 1", "'-5'"]),
    (["demo", "--n", "ten"], ["argument --n", "integer >= 1", "'ten'"]),
    (["demo", "--crashes", "-1"], ["argument --crashes", "integer >= 0", "'-1'"]),
    (["demo", "--rate", "0"], ["argument --rate", "integer >= 1", "'0'"]),
    (["demo", "--seed", "x"], ["argument --seed", "'x'"]),
    (["demo", "--bogus"], ["unrecognized arguments: --bogus"]),
    (["bogus"], ["invalid choice: 'bogus'", "demo"]),
    ([], ["required", "COMMAND"]),
])
def test_usage_errors_are_one_line_and_exit_2(args, words):
    """Refused before anything starts (``--n 0`` used to loop forever): one line, no traceback."""
    out = console(*args)
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert out.stdout == ""
    lines = out.stderr.splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("dstream-eo"), lines[0]
    assert "error:" in lines[0] and "Traceback" not in out.stderr
    for word in words:
        assert word in lines[0], lines[0]


@pytest.mark.parametrize(("option", "value", "allowed"), [
    ("--crash-prob", "1.5", "[0, 1]"),
    ("--crash-prob", "nan", "[0, 1]"),
    ("--rate", "0", "integer >= 1"),
    ("--batch-seconds", "0", "integer >= 1"),
    ("--topic", "", "non-empty"),
])
def test_pipeline_usage_errors(option, value, allowed):
    base = {"--bootstrap": "localhost:1", "--topic": "t", "--store": "sqlite:///x.db", "--app-id": "a"}
    base[option] = value
    argv = ["pipeline"] + [x for kv in base.items() for x in kv]
    out = run(["-c", NO_SPARK + "from dstream_exactly_once.teaching._pipeline import main; sys.exit(main())", *argv])
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert len(out.stderr.splitlines()) == 1 and allowed in out.stderr and repr(value) in out.stderr, out.stderr


def test_core_imports_work_without_pyspark():
    code = NO_SPARK + ("import dstream_exactly_once.stores; "
                       "from dstream_exactly_once import OffsetRange, open_store, Writes; "
                       "print(OffsetRange('t', 0, 1, 2).count(), callable(open_store), Writes.__name__)")
    out = run(["-c", code])
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1", "True", "Writes"]


def test_spark_names_fail_clearly_without_pyspark():
    """The lazy Spark names are the only part that needs pyspark (proves the block is effective)."""
    for name in ("KafkaUtils", "FileUtils", "exactly_once"):
        out = run(["-c", NO_SPARK + f"from dstream_exactly_once import {name}"])
        assert out.returncode != 0
        assert f"{name} needs PySpark" in out.stderr and "dstream-exactly-once[spark]" in out.stderr, out.stderr


# ---------------------------------------------------------------- operator commands on a real SQLite store
# In-process runs of ``dstream-eo`` (no broker: the Kafka cases are in tests/integration/test_operators_cli.py).

def snapshot(db: Path) -> dict:
    """The bytes of a SQLite store: its file and write-ahead log (an empty log, which a read-only
    connection may leave, holds nothing)."""
    return {p.name: p.read_bytes() for p in (db, Path(f"{db}-wal")) if p.exists() and p.stat().st_size}


def one_error_line(err: str) -> str:
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert err.startswith("dstream-eo: error: "), err
    return err


@pytest.fixture
def kafka_db(tmp_path):
    """A store with app ``app1`` (positions events/0 = 5, events/1 = 7; batches 0 and 1 committed) and ``app2``."""
    from dstream_exactly_once.kafka._offsets import OffsetRange
    from dstream_exactly_once.stores import PlannedBatch, Writes, open_store

    db = tmp_path / "ops.db"
    for app in ("app1", "app2"):
        with open_store(f"sqlite:///{db}", app) as store:
            epoch = store.start_epoch()
            for batch in (PlannedBatch(0, 1_700_000_000_000, (OffsetRange("events", 0, 0, 3),
                                                               OffsetRange("events", 1, 0, 7))),
                          PlannedBatch(1, 1_700_000_001_000, (OffsetRange("events", 0, 3, 5),))):
                store.log_batch(epoch, batch)
                store.commit(epoch, batch, Writes())
    return db


@pytest.mark.parametrize("argv", [
    ["offsets", "show", "--app", "a"],
    ["batches", "--app", "a"],
    ["lag"],
    ["offsets", "reset", "--app", "a", "--to-offset", "0", "--execute"],
    ["in-doubt", "--app", "a", "--fe", "http://127.0.0.1:1", "--db", "d", "--table", "t"],
])
def test_a_missing_sqlite_file_is_refused_and_not_created(argv, tmp_path, capsys):
    db = tmp_path / "missing.db"
    code, out, err = cli(capsys, *argv[:2 if argv[0] == "offsets" else 1], "--store", f"sqlite:///{db}",
                         *argv[2 if argv[0] == "offsets" else 1:])
    assert code == 1 and out == "", (out, err)
    assert "does not exist" in one_error_line(err) and str(db) in err
    assert not db.exists() and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv", [
    ["offsets", "show"], ["batches"], ["offsets", "reset", "--to-offset", "0", "--execute"],
    ["in-doubt", "--fe", "http://127.0.0.1:1", "--db", "d", "--table", "t", "--resolve"],
])
def test_an_unknown_app_is_refused_naming_the_apps_there(argv, kafka_db, capsys):
    before = snapshot(kafka_db)
    code, out, err = cli(capsys, *argv, "--store", f"sqlite:///{kafka_db}", "--app", "app3")
    assert code == 1 and out == ""
    assert "'app3' not found" in one_error_line(err) and "app1, app2" in err
    assert snapshot(kafka_db) == before


def test_show_refuses_an_unknown_topic_or_partition_naming_what_exists(kafka_db, capsys):
    url = f"sqlite:///{kafka_db}"
    code, _, err = cli(capsys, "offsets", "show", "--store", url, "--app", "app1", "--topic", "evnets")
    assert code == 1 and "'evnets'" in one_error_line(err) and "its topics: events" in err
    code, _, err = cli(capsys, "offsets", "show", "--store", url, "--app", "app1", "--topic", "events:1,9")
    assert code == 1 and "[9]" in one_error_line(err) and "[0, 1]" in err
    code, out, err = cli(capsys, "offsets", "show", "--store", url, "--app", "app1", "--topic", "events:1")
    assert code == 0 and "events/1" in out and "events/0" not in out, err


@pytest.mark.parametrize("mode", [["--to-offset", "0"], ["--shift-by", "-1"], ["--to-earliest"], ["--from-file"]])
def test_a_kafka_reset_needs_the_broker_in_every_mode(mode, kafka_db, tmp_path, capsys):
    """Without the broker no target can be checked or clamped: refused before the epoch, nothing written."""
    if mode == ["--from-file"]:
        (tmp_path / "to.csv").write_text("events,0,1\n")
        mode = ["--from-file", str(tmp_path / "to.csv")]
    before = snapshot(kafka_db)
    code, out, err = cli(capsys, "offsets", "reset", "--store", f"sqlite:///{kafka_db}", "--app", "app1", *mode,
                         "--execute")
    assert code == 2 and "needs the broker" in one_error_line(err)  # a missing option: usage error
    assert snapshot(kafka_db) == before


@pytest.mark.parametrize(("args", "words"), [
    (("1", 0, ()), ["batch_id", "'1'"]),
    ((True, 0, ()), ["batch_id", "True"]),
    ((-1, 0, ()), ["batch_id", "-1"]),
    ((2**63, 0, ()), ["batch_id", str(2**63)]),
    ((0, "1700000000000", ()), ["batch_time_ms", "'1700000000000'"]),
    ((0, 1.5, ()), ["batch_time_ms", "1.5"]),
    ((0, 0, "t/0"), ["ranges", "'t/0'"]),
    ((0, 0, ("t/0",)), ["source ranges", "'t/0'"]),
    ((0, 0, "two"), ["ranges"]),
])
def test_planned_batch_refuses_bad_fields_at_construction(args, words):
    from dstream_exactly_once.errors import ConfigurationError
    from dstream_exactly_once.kafka._offsets import OffsetRange
    from dstream_exactly_once.stores import PlannedBatch

    if args[2] == "two":
        args = (0, 0, (OffsetRange("t", 0, 0, 2), OffsetRange("t", 0, 2, 4)))
        words = ["two ranges of t/0"]
    with pytest.raises(ConfigurationError) as info:
        PlannedBatch(*args)
    assert all(w in str(info.value) for w in words), info.value
    assert PlannedBatch(0, 0, [OffsetRange("t", 0, 0, 2)]).ranges == (OffsetRange("t", 0, 0, 2),)


def test_damaged_store_rows_are_skipped_and_said(kafka_db, capsys):
    """A torn offset-log entry, a non-int batch time and a torn position document: the read commands
    answer (the damaged records named), ``lag`` lists the other app."""
    import sqlite3

    url = f"sqlite:///{kafka_db}"
    with sqlite3.connect(kafka_db) as conn:
        conn.execute("UPDATE deo_batches SET ranges = '[[\"events\", 0, 3' WHERE app = 'app1' AND batch_id = 1")
        conn.execute("UPDATE deo_batches SET batch_time_ms = 'noon' WHERE app = 'app1' AND batch_id = 0")
        conn.execute("UPDATE deo_positions SET meta = '{torn' WHERE app = 'app2' AND pkey = 'events/0'")
    before = snapshot(kafka_db)
    code, out, err = cli(capsys, "batches", "--store", url, "--app", "app1")
    assert code == 0, err
    assert [line.split()[0] for line in out.splitlines() if " DAMAGED " in line] == ["1", "0"]
    assert "damaged offset-log entry of batch 0" in out and "'noon'" in out
    assert "Traceback" not in err and len(err.splitlines()) == 1 and "batch(es) [1, 0]" in err
    code, out, err = cli(capsys, "batches", "--store", url, "--app", "app1", "--json")
    assert code == 0 and [b["state"] for b in json.loads(out)["batches"]] == ["DAMAGED", "DAMAGED"]
    code, out, err = cli(capsys, "offsets", "show", "--store", url, "--app", "app1")
    assert code == 0 and "events/0" in out and "Traceback" not in err, err
    code, out, err = cli(capsys, "lag", "--store", url, "--json")
    assert code == 0, err
    apps = {a["app"]: a for a in json.loads(out)["apps"]}
    assert apps["app1"]["partitions"] == 2 and "error" not in apps["app1"]
    assert "StoreError" in apps["app2"]["error"] and "'events/0' is damaged" in apps["app2"]["error"]
    code, out, err = cli(capsys, "offsets", "show", "--store", url, "--app", "app2")
    assert code == 1 and "'events/0' is damaged" in one_error_line(err) and "'{torn'" in err
    code, out, err = cli(capsys, "lag", "--store", url)
    assert code == 0 and "app1" in out and "app2" in out and "Traceback" not in err
    assert snapshot(kafka_db) == before


def test_in_doubt_refuses_an_unset_password_variable(kafka_db, capsys, monkeypatch):
    monkeypatch.delenv("DEO_NO_SUCH_PW", raising=False)
    code, out, err = cli(capsys, "in-doubt", "--store", f"sqlite:///{kafka_db}", "--app", "app1", "--fe",
                         "http://127.0.0.1:1", "--db", "d", "--table", "t", "--password-env", "DEO_NO_SUCH_PW")
    assert code == 2 and out == "" and "--password-env DEO_NO_SUCH_PW" in one_error_line(err)
    assert "not set" in err or "no such environment variable" in err


@pytest.mark.parametrize("url", [
    "postgresql://deo@127.0.0.1:1/db?password=s3cr3t-in-query",
    "postgresql://deo:s3cr3t-in-query@127.0.0.1:1/db",
    "redis://127.0.0.1:1/0?password=s3cr3t-in-query",
    "redis://:s3cr3t-in-query@127.0.0.1:1/0",
])
@pytest.mark.parametrize("cmd", [["batches", "--app", "a"], ["lag"]])
def test_no_password_in_any_message(url, cmd, capsys):
    code, out, err = cli(capsys, cmd[0], "--store", url, *cmd[1:])
    assert code == 1 and "s3cr3t" not in out + err
    one_error_line(err)


def _progress(batch_id, **over):
    doc = {"batchId": batch_id, "name": "app", "inputRowsPerSecond": 10.0, "processedRowsPerSecond": 12.0,
           "durationMs": {"latestOffset": 1, "walCommit": 2, "addBatch": 30, "commitOffsets": 4},
           "sources": [{"metrics": {"maxOffsetsBehindLatest": 5}}]}
    doc.update(over)
    return json.dumps(doc)


def test_chart_skips_damaged_progress_lines_and_says_so(tmp_path, capsys):
    path = tmp_path / "progress.jsonl"
    with open(path, "wb") as f:
        f.write((_progress(0) + "\n").encode())
        f.write(b'{"batchId": 1, "durationMs": {"addBa\n')  # torn
        f.write(b"\xff\xfe not utf-8\n")
        f.write((_progress(3, durationMs="slow") + "\n").encode())
        f.write((_progress(4, durationMs={"addBatch": "30"}) + "\n").encode())
        f.write((_progress(5, sources="none", inputRowsPerSecond=None) + "\n").encode())
        f.write((_progress(6, sources=[{"metrics": []}]) + "\n").encode())
        f.write((_progress(7) + "\n").encode())
    png = tmp_path / "out.png"
    code, out, err = cli(capsys, "chart", str(path), "-o", str(png))
    assert code == 0, err
    assert "(3 batches)" in out and png.read_bytes()[:4] == b"\x89PNG"
    assert "Traceback" not in err and len(err.splitlines()) == 1
    assert "skipped 5 line(s)" in err and "line 2, 3, 4, 5, 6" in err


@pytest.mark.parametrize("content", [b"\xff\xfe\n", b'{"batchId": 1, "dur\n', b'[1, 2]\n', b""])
def test_chart_without_a_usable_record_is_one_line(content, tmp_path, capsys):
    path = tmp_path / "progress.jsonl"
    path.write_bytes(content)
    code, out, err = cli(capsys, "chart", str(path), "-o", str(tmp_path / "out.png"))
    assert code == 1 and "holds no progress records" in err.splitlines()[-1] and "Traceback" not in err
    assert not (tmp_path / "out.png").exists()


@pytest.fixture
def file_app(tmp_path):
    """A file app ``files`` in a SQLite store that read all 100 lines (4 bytes each) of ``logs/app.log``."""
    from dstream_exactly_once.files import FilePlanner, FileSourceOptions
    from dstream_exactly_once.stores import PlannedBatch, Writes, open_store

    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "app.log").write_text("".join(f"{i:03d}\n" for i in range(100)))
    url = f"sqlite:///{tmp_path}/files.db"

    def planner(store):
        p = FilePlanner(f"{logs}/*.log", FileSourceOptions.from_mapping({}))
        p.start(store.load_positions())
        return p

    with open_store(url, "files") as store:
        epoch = store.start_epoch()
        batch = PlannedBatch(0, 1000, tuple(planner(store).plan()))
        store.log_batch(epoch, batch)
        store.commit(epoch, batch, Writes())
    return url, tmp_path / "files.db", batch.ranges[0].position_key, planner


def test_a_file_app_restarts_after_a_reset(file_app, capsys):
    """The reset keeps each file position's identity document (re-anchored at the new byte): the
    next planner starts there and reads the file's bytes again from it."""
    from dstream_exactly_once.stores import open_store

    url, _, key, planner = file_app
    code, out, err = cli(capsys, "offsets", "reset", "--store", url, "--app", "files", "--shift-by", "-20",
                         "--execute")
    assert code == 0, err
    with open_store(url, "files") as store:
        pos = store.load_positions()[key]
        assert pos.offset == 380 and pos.meta["path"].endswith("app.log") and pos.meta["tail_length"] > 0
        ranges = planner(store).plan()
    assert [(r.position_key, r.start, r.end) for r in ranges] == [(key, 380, 400)]
    code, out, err = cli(capsys, "offsets", "reset", "--store", url, "--app", "files", "--to-earliest", "--execute")
    assert code == 0, err
    with open_store(url, "files") as store:
        assert [(r.start, r.end) for r in planner(store).plan()] == [(0, 400)]


def test_a_file_reset_clamps_and_shows_it(file_app, capsys):
    url, db, key, _ = file_app
    for mode, want, where in ((["--shift-by", "-1000"], 0, "to earliest (-600 -> 0)"),
                              (["--to-offset", "99999"], 400, "to latest (99999 -> 400)")):
        code, out, err = cli(capsys, "offsets", "reset", "--store", url, "--app", "files", *mode, "--json")
        assert code == 0, err
        plan = json.loads(out)["plan"]
        assert [(p["key"], p["requested"], p["new"], p["clamped"]) for p in plan] == [
            (key, int(mode[1]) + (400 if mode[0] == "--shift-by" else 0), want, where)]
        code, out, err = cli(capsys, "offsets", "reset", "--store", url, "--app", "files", *mode)
        assert code == 0 and "CLAMPED" in out and where in out, err


@pytest.mark.parametrize(("rows", "words", "status"), [
    ("file:nope,0\n", ["unknown position(s) file:nope (line 1)", "known: file:"], 1),
    ("{key},5\nfile:zz,1\n", ["file:zz (line 2)"], 1),
    # a malformed file is a usage error (exit 2), found before the store is asked
    ("{key},x\n", [":1: expected topic,partition,offset or key,position", "'file:"], 2),
    ("{key},-1\n", ["must be >= 0, got -1"], 2),
    ("{key},1\n{key},2\n", [":2:", "named twice"], 2),
    ("{key},1,2,3\n", [":1: expected"], 2),
])
def test_a_reset_from_a_file_refuses_bad_rows_before_anything_is_written(rows, words, status, file_app, tmp_path,
                                                                         capsys):
    from dstream_exactly_once.stores import open_store

    url, db, key, _ = file_app
    csv_path = tmp_path / "to.csv"
    csv_path.write_text(rows.format(key=key))
    before = snapshot(db)
    code, out, err = cli(capsys, "offsets", "reset", "--store", url, "--app", "files", "--from-file", str(csv_path),
                         "--execute")
    assert code == status and out == "", (out, err)
    line = one_error_line(err)
    assert all(w in line for w in words), line
    assert snapshot(db) == before
    with open_store(url, "files") as store:
        assert store.current_epoch() == 1


def test_a_file_reset_refuses_a_file_that_changed(file_app, tmp_path, capsys):
    url, db, key, _ = file_app
    (tmp_path / "logs" / "app.log").write_text("something else entirely\n" * 20)
    before = snapshot(db)
    code, out, err = cli(capsys, "offsets", "reset", "--store", url, "--app", "files", "--to-earliest", "--execute")
    assert code == 1 and key in one_error_line(err) and "no longer starts with the bytes" in err
    assert snapshot(db) == before


def test_show_and_reset_measure_a_gzip_file_by_its_content(tmp_path, capsys):
    """A compressed file's positions are bytes of its content: ``latest`` is the decompressed length."""
    import gzip

    from dstream_exactly_once.files import FilePlanner, FileSourceOptions
    from dstream_exactly_once.stores import PlannedBatch, Writes, open_store

    logs = tmp_path / "logs"
    logs.mkdir()
    with gzip.open(logs / "app.log.gz", "wb") as f:
        f.write(b"".join(b"%03d\n" % i for i in range(100)))
    url = f"sqlite:///{tmp_path}/gz.db"
    with open_store(url, "gz") as store:
        planner = FilePlanner(f"{logs}/*.gz", FileSourceOptions.from_mapping({"starting.offsets": "earliest"}))
        planner.start(store.load_positions())
        epoch = store.start_epoch()
        batch = PlannedBatch(0, 1000, tuple(planner.plan()))
        store.log_batch(epoch, batch)
        store.commit(epoch, batch, Writes())
    assert (logs / "app.log.gz").stat().st_size < 400 and batch.ranges[0].end == 400
    code, out, err = cli(capsys, "offsets", "show", "--store", url, "--app", "gz", "--json")
    assert code == 0, err
    assert [(p["position"], p["latest"], p["lag"]) for p in json.loads(out)["partitions"]] == [(400, 400, 0)]
    code, out, err = cli(capsys, "offsets", "reset", "--store", url, "--app", "gz", "--to-latest", "--json")
    assert code == 0 and [p["new"] for p in json.loads(out)["plan"]] == [400], err


def test_batches_skip_arguments_and_the_listing_without_a_store(tmp_path: Path) -> None:
    out = console("batches")
    assert out.returncode == 2 and "--store, --app" in out.stderr and out.stderr.count("\n") == 1, out.stderr
    out = console("batches", "skip", "--store", f"sqlite:///{tmp_path}/x.db", "--app", "a")
    assert out.returncode == 2 and "--batch" in out.stderr, out.stderr
    out = console("batches", "skip", "--store", f"sqlite:///{tmp_path}/x.db", "--app", "a", "--batch", "-1")
    assert out.returncode == 2 and "'-1'" in out.stderr, out.stderr
    out = console("batches", "skip", "--help")
    assert out.returncode == 0 and "--execute" in out.stdout and "--reason" in out.stdout
    # no store there: one line naming the missing file, and no file created
    out = console("batches", "skip", "--store", f"sqlite:///{tmp_path}/x.db", "--app", "a", "--batch", "3",
                  "--execute", "--force")
    assert out.returncode == 1 and f"the SQLite file '{tmp_path}/x.db' does not exist" in out.stderr
    assert out.stderr.count("\n") == 1 and list(tmp_path.iterdir()) == []


def test_a_file_not_readable_here_keeps_the_size_the_driver_recorded(tmp_path, capsys):
    """A node-local file (absent on the CLI host): lag is measured against the recorded ``seen_size``,
    and the row says it was not measured here."""
    from dstream_exactly_once.stores import open_store

    url = f"sqlite:///{tmp_path}/far.db"
    with open_store(url, "far") as store:
        epoch = store.start_epoch()
        store.reset_positions(epoch, {"file:abc": 300, "file:old": 10},
                              documents={"file:abc": {"path": "/on/another/host/app.log", "seen_size": 500},
                                         "file:old": {"path": "/on/another/host/old.log"}})
    code, out, err = cli(capsys, "offsets", "show", "--store", url, "--app", "far", "--json")
    assert code == 0, err
    rows = {p["key"]: p for p in json.loads(out)["partitions"]}
    assert (rows["file:abc"]["latest"], rows["file:abc"]["lag"]) == (500, 200)
    assert rows["file:old"]["lag"] is None and "not known" in rows["file:old"]["lag_note"]
    assert rows["file:abc"]["live"] is False and "not measured" in rows["file:abc"]["live_note"]


def test_file_lag_is_the_files_size_now_across_a_rotation(file_app, capsys):
    """``offsets show`` measures each file where this host can read it: the lag grows as the file does
    (not the size the driver last recorded); a file rotated by rename is followed by its bytes, and the
    new file at its path is listed as unread; a node-local file of another host says it was not measured."""
    import os

    from dstream_exactly_once.stores import open_store

    url, _, key, _ = file_app
    logs = Path(url.split("///")[1]).parent / "logs"
    with open(logs / "app.log", "a") as f:
        f.write("x" * 99 + "\n")  # 100 bytes more than the driver recorded
    code, out, err = cli(capsys, "offsets", "show", "--store", url, "--app", "files", "--json")
    assert code == 0, err
    (row,) = json.loads(out)["partitions"]
    assert (row["position"], row["latest"], row["lag"], row["live"], row["unit"]) == (400, 500, 100, True, "byte")
    code, out, err = cli(capsys, "lag", "--store", url, "--json")
    assert code == 0 and [(a["partitions"], a["lag"]) for a in json.loads(out)["apps"]] == [(1, 100)], out + err

    os.rename(logs / "app.log", logs / "app.log.1")  # rotated by rename; a new file takes the name
    (logs / "app.log").write_text("new\n" * 5)
    code, out, err = cli(capsys, "offsets", "show", "--store", url, "--app", "files", "--json")
    assert code == 0, err
    rows = {p["key"]: p for p in json.loads(out)["partitions"]}
    assert (rows[key]["lag"], rows[key]["live_path"], rows[key]["rotated"]) == (100, str(logs / "app.log.1"), True)
    new = rows[f"new:{logs / 'app.log'}"]
    assert (new["position"], new["latest"], new["lag"]) == (None, 20, 20)
    code, out, err = cli(capsys, "offsets", "show", "--store", url, "--app", "files")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[2].split()[:2] == ["KEY", "BYTE"], out  # file positions are bytes, named so
    assert "1 rotated since the driver last recorded them" in out and "1 new file(s)" in out
    assert f"rotated, now {logs / 'app.log.1'}" in out

    with open_store(url, "files") as store:  # the same file, node-local to another host
        meta = dict(store.load_positions()[key].meta, host="some-other-host")
        store.reset_positions(store.start_epoch(), {key: 400}, documents={key: meta})
    code, out, err = cli(capsys, "offsets", "show", "--store", url, "--app", "files", "--json")
    rows = {p["key"]: p for p in json.loads(out)["partitions"]}
    assert rows[key]["live"] is False and rows[key]["lag"] == 0  # the driver recorded 400 bytes
    assert "node-local to host some-other-host" in rows[key]["live_note"]


def test_batches_names_what_a_batch_counts_by_its_source(kafka_db, file_app, capsys):
    code, out, err = cli(capsys, "batches", "--store", f"sqlite:///{kafka_db}", "--app", "app1")
    assert code == 0 and out.splitlines()[2].split() == ["BATCH", "TIME", "STATE", "RANGES", "OFFSETS"], out
    url = file_app[0]
    code, out, err = cli(capsys, "batches", "--store", url, "--app", "files")
    assert code == 0 and out.splitlines()[2].split() == ["BATCH", "TIME", "STATE", "RANGES", "BYTES"], out
    assert "last logged 0, last committed 0" in out


def test_batches_of_an_app_without_an_offset_log_says_so(tmp_path, capsys):
    """A Structured Streaming sink's app commits batch ids only: no 'last logged None'."""
    from dstream_exactly_once.stores import PlannedBatch, Writes, open_store

    url = f"sqlite:///{tmp_path}/ss.db"
    with open_store(url, "ss") as store:
        epoch = store.start_epoch()
        store.commit(epoch, PlannedBatch(0, 1000, ()), Writes())
        assert store.last_logged_batch_id() is None and store.last_committed_batch_id() == 0
    code, out, err = cli(capsys, "batches", "--store", url, "--app", "ss")
    assert code == 0, err
    assert "None" not in out and "last committed batch 0; the offset log is empty" in out
