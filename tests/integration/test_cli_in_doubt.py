"""``dstream-eo in-doubt`` against a real SQLite store and the Doris protocol double: two loads a
crashed driver left pre-committed; the store decides (label recorded: commit, else abort)."""

from __future__ import annotations

import uuid

from dstream_exactly_once.kafka._offsets import OffsetRange
from dstream_exactly_once.sinks.doris import DorisSink, DorisStreamLoadClient
from dstream_exactly_once.stores import PlannedBatch, Writes, open_store
from dstream_exactly_once.testing._doris_double import DorisProtocolDouble

from ..helpers import run_cli as _cli

DB, TABLE = "dw", "events"
SECRET = "s3cret-doris-pw"


def test_in_doubt_lists_then_resolves_as_the_store_decided(tmp_path, capsys, monkeypatch):
    url, app = f"sqlite:///{tmp_path}/doris.db", "doris-" + uuid.uuid4().hex[:6]
    batch = PlannedBatch(0, 1_700_000_000_000, (OffsetRange("t", 0, 0, 2), OffsetRange("t", 1, 0, 1)))
    with DorisProtocolDouble(user="etl", password=SECRET) as doris:
        client = DorisStreamLoadClient(doris.fe_url, DB, TABLE, user="etl", password=SECRET, column_separator=",")
        sink = DorisSink(client)
        store = open_store(url, app)
        epoch = store.start_epoch()
        store.log_batch(epoch, batch)
        label0, label1 = sink.label_for(app, 0, 0), sink.label_for(app, 0, 1)
        # the crashed driver pre-committed both loads; only partition 1's label reached the store
        client.precommit(label0, [(0, "a"), (1, "b")])
        txn1 = client.precommit(label1, [(0, "x")])
        recorded = Writes().add_label(label1).put(sink.namespace, label1, {"txn_id": txn1})  # as the sink records it
        store.commit(epoch, batch, recorded, ranges=[batch.ranges[1]], complete_batch=False)
        monkeypatch.setenv("DORIS_PW", SECRET)
        args = ("in-doubt", "--store", url, "--app", app, "--fe", doris.fe_url, "--db", DB, "--table", TABLE,
                "--user", "etl", "--password-env", "DORIS_PW")

        code, out, err = _cli(capsys, *args)
        assert code == 0, err
        assert "dry run" in out and label0 in out and label1 in out
        lines = {label: line for line in out.splitlines() for label in (label0, label1) if label in line}
        assert "abort" in lines[label0] and "not recorded" in lines[label0]
        assert "commit" in lines[label1] and "committed" in lines[label1]
        assert doris.label_state(DB, label0) == doris.label_state(DB, label1) == "PRECOMMITTED"  # dry run: untouched
        assert store.current_epoch() == epoch

        code, out, err = _cli(capsys, *args, "--resolve")
        assert code == 0, err
        assert doris.label_state(DB, label0) == "ABORTED"
        assert doris.label_state(DB, label1) == "VISIBLE"
        assert sorted(doris.rows(DB, TABLE)) == [("0", "x")]
        assert store.current_epoch() == epoch + 1  # the crashed driver (and any zombie) is fenced first
        assert SECRET not in out + err


def test_in_doubt_takes_the_sinks_label_options_and_refuses_a_mismatch(tmp_path, capsys, monkeypatch):
    """A sink with its own label_app_id, strict labels and namespace: without those options the
    command would decide for labels the sink never made; it refuses (store and Doris untouched)."""
    db = tmp_path / "labels.db"
    url, app = f"sqlite:///{db}", "lbl-" + uuid.uuid4().hex[:6]
    label_app_id, namespace = "etl job/events", "__dw__"  # a space: only strict labels can carry it
    done = PlannedBatch(0, 1_700_000_000_000, (OffsetRange("t", 0, 0, 1),))
    batch = PlannedBatch(1, 1_700_000_001_000, (OffsetRange("t", 0, 1, 3), OffsetRange("t", 1, 0, 1)))
    with DorisProtocolDouble(user="etl", password=SECRET) as doris:
        client = DorisStreamLoadClient(doris.fe_url, DB, TABLE, user="etl", password=SECRET, column_separator=",")
        sink = DorisSink(client, label_app_id=label_app_id, strict_labels=True, namespace=namespace)
        with open_store(url, app) as store:
            epoch = store.start_epoch()
            store.log_batch(epoch, done)
            sink.write_partition(store, epoch, done, 0, [(0, "a")])
            store.mark_committed(epoch, done)
            store.log_batch(epoch, batch)
            label0, label1 = sink.label_for(app, 1, 0), sink.label_for(app, 1, 1)
            client.precommit(label0, [(1, "b")])
            txn1 = client.precommit(label1, [(2, "c")])
            store.commit(epoch, batch, Writes().add_label(label1).put(namespace, label1, {
                "txn_id": txn1, "table": f"{DB}.{TABLE}"}), ranges=[batch.ranges[1]], complete_batch=False)
        monkeypatch.setenv("DORIS_PW", SECRET)
        args = ("in-doubt", "--store", url, "--app", app, "--fe", doris.fe_url, "--db", DB, "--table", TABLE,
                "--user", "etl", "--password-env", "DORIS_PW")
        before = {p.name: p.read_bytes() for p in (db, db.with_name(db.name + "-wal"))
                  if p.exists() and p.stat().st_size}
        for wrong in ((), ("--namespace", namespace), ("--label-app-id", label_app_id, "--namespace", namespace),
                      ("--strict-labels", "--namespace", namespace), ("--label-app-id", label_app_id,
                                                                      "--strict-labels")):
            code, out, err = _cli(capsys, *args, *wrong, "--resolve")
            # options that make other labels than the store recorded: a usage error (2)
            assert code == 2 and out == "" and "Traceback" not in err and len(err.splitlines()) == 1, (wrong, err)
            assert "--label-app-id, --strict-labels and --namespace" in err, err
            assert {p.name: p.read_bytes() for p in (db, db.with_name(db.name + "-wal"))
                    if p.exists() and p.stat().st_size} == before
            assert doris.label_state(DB, label0) == doris.label_state(DB, label1) == "PRECOMMITTED"
        code, out, err = _cli(capsys, *args, "--label-app-id", label_app_id, "--strict-labels", "--namespace",
                              namespace, "--resolve")
        assert code == 0, err
        assert doris.label_state(DB, label0) == "ABORTED" and doris.label_state(DB, label1) == "VISIBLE"
        assert SECRET not in out + err
