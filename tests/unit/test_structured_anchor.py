"""Store-anchored positions without Spark running: the ``deo-store`` sink's ``anchor=true`` commit (Spark's
offset log read from a checkpoint directory written here), its options, and the ``deo-kafka`` source
starting from a store's positions (on the in-memory cluster of ``dstream_exactly_once.testing._fake_kafka``)."""

from __future__ import annotations

import json
import os

import pytest

from dstream_exactly_once.errors import ConfigurationError, FencedError, OffsetConflictError
from dstream_exactly_once.kafka._offsets import OffsetRange, TopicAndPartition
from dstream_exactly_once.kafka.structured._source import KafkaSourcePlanner
from dstream_exactly_once.kafka.structured._source_offsets import ranges_between
from dstream_exactly_once.kafka.structured._source_options import parse_kafka_source_options
from dstream_exactly_once.stores import open_store
from dstream_exactly_once.stores._writes import CommitOutcome, PlannedBatch, Writes
from dstream_exactly_once.structured._sink_runs import QueryRun
from dstream_exactly_once.structured._store_sink import StoreSinkOptions, commit_batch, store_sink_options
from dstream_exactly_once.testing._fake_kafka import FakeKafkaCluster

TP = TopicAndPartition
BROKER = {"kafka.bootstrap.servers": "localhost:9092", "subscribe": "t"}


def log_offsets(checkpoint, batch_id, *docs):
    """Spark's offset-log entry: a version line, a metadata line, then one line per source."""
    os.makedirs(os.path.join(checkpoint, "offsets"), exist_ok=True)
    with open(os.path.join(checkpoint, "offsets", str(batch_id)), "w") as f:
        f.write("v1\n" + json.dumps({"batchWatermarkMs": 0, "batchTimestampMs": 0, "conf": {}}) + "\n"
                + "\n".join(json.dumps(d) for d in docs))


def anchored(url, checkpoint, app="a"):
    return StoreSinkOptions.parse({**store_sink_options(url, app, anchor=True), "checkpointLocation": checkpoint})


def state(url, app="a"):
    with open_store(url, app) as s:
        return s.get_value("n", "k"), {k: p.offset for k, p in s.load_positions().items()}, s.last_committed_batch_id()


def test_batches_commit_with_the_source_offsets_and_a_new_checkpoint_continues_them(tmp_path):
    url, cp1, cp2 = f"sqlite:///{tmp_path}/s.db", str(tmp_path / "cp1"), str(tmp_path / "cp2")
    q1, q2 = QueryRun("q1", "r1"), QueryRun("q2", "r2")
    one = Writes().incr("n", "k", 1)
    log_offsets(cp1, 0, {"t": {"0": 3, "1": 2}, "@from": {"t": {"0": 0, "1": 0}}})
    log_offsets(cp1, 1, {"t": {"0": 5, "1": 2}})
    assert commit_batch(anchored(url, cp1), [one], 0, q1) is CommitOutcome.APPLIED
    assert commit_batch(anchored(url, cp1), [one], 0, q1) is CommitOutcome.REPLAYED  # Spark's replay of batch 0
    assert commit_batch(anchored(url, cp1), [one], 1, q1) is CommitOutcome.APPLIED
    assert commit_batch(anchored(url, cp1), [one], 1, q1) is CommitOutcome.REPLAYED
    assert state(url) == (2, {"t/0": 5, "t/1": 2}, 1)  # the store's ordinary Kafka position keys
    with open_store(url, "a") as s:
        assert [r.toTuple() for r in s.get_batch(1).ranges] == [("t", 0, 3, 5), ("t", 1, 2, 2)]
    # a new checkpoint (batch ids from 0 again) whose source started from the stored positions
    log_offsets(cp2, 0, {"t": {"0": 9, "1": 4}, "@from": {"t": {"0": 5, "1": 2}}})
    assert commit_batch(anchored(url, cp2), [one], 0, q2) is CommitOutcome.APPLIED
    assert state(url) == (3, {"t/0": 9, "t/1": 4}, 2)  # the application's batch 2, not a replay of batch 0
    with pytest.raises(FencedError, match="run r1 of query q1 was replaced"):
        commit_batch(anchored(url, cp1), [one], 2, q1)  # the old query, still running
    assert state(url)[0] == 3


def test_a_new_checkpoint_that_does_not_start_at_the_stored_positions_is_refused(tmp_path):
    url, cp1, cp2 = f"sqlite:///{tmp_path}/s.db", str(tmp_path / "cp1"), str(tmp_path / "cp2")
    log_offsets(cp1, 0, {"t": {"0": 3}, "@from": {"t": {"0": 0}}})
    commit_batch(anchored(url, cp1), [Writes().incr("n", "k", 1)], 0, QueryRun("q1", "r1"))
    log_offsets(cp2, 0, {"t": {"0": 4}, "@from": {"t": {"0": 0}}})  # read from earliest again
    with pytest.raises(OffsetConflictError, match=r"does not start where.*t-0 stored 3, batch from 0.*nothing was "
                                                  r"written.*starting.positions.store"):
        commit_batch(anchored(url, cp2), [Writes().incr("n", "k", 1)], 0, QueryRun("q2", "r2"))
    assert state(url) == (1, {"t/0": 3}, 0)


def test_a_dstream_apps_positions_are_continued_and_an_unknown_start_is_refused(tmp_path):
    url, cp = f"sqlite:///{tmp_path}/s.db", str(tmp_path / "cp")
    with open_store(url, "a") as s:  # a DStream application's committed batch
        s.commit(s.start_epoch(), PlannedBatch(0, 0, (OffsetRange("t", 0, 0, 7),)), Writes())
    log_offsets(cp, 0, {"t": {"0": 10, "1": 3}})  # a source not started from the store: no '@from'
    with pytest.raises(ConfigurationError, match=r"does not say where the batch began reading t-0.*stored position "
                                                 r"\(7\).*starting.positions.store.*nothing was written"):
        commit_batch(anchored(url, cp), [Writes().incr("n", "k", 1)], 0, QueryRun("q", "r"))
    log_offsets(cp, 0, {"t": {"0": 10, "1": 3}, "@from": {"t": {"0": 7}}})  # t-1: no position, nothing to compare
    assert commit_batch(anchored(url, cp), [Writes().incr("n", "k", 1)], 0, QueryRun("q", "r")) \
        is CommitOutcome.APPLIED
    with open_store(url, "a") as s:
        assert [r.toTuple() for r in s.get_batch(1).ranges] == [("t", 0, 7, 10), ("t", 1, 3, 3)]
        assert {k: p.offset for k, p in s.load_positions().items()} == {"t/0": 10, "t/1": 3}


def test_the_offset_log_must_hold_one_anchored_source(tmp_path):
    url, cp = f"sqlite:///{tmp_path}/s.db", str(tmp_path / "cp")
    log_offsets(cp, 0, {"t": {"0": 1}}, {"u": {"0": 1}})
    with pytest.raises(ConfigurationError, match="exactly one deo-kafka or aof source.*holds 2"):
        commit_batch(anchored(url, cp), [Writes()], 0, QueryRun("q", "r"))
    with pytest.raises(ConfigurationError, match="no offset-log entry offsets/1"):
        commit_batch(anchored(url, cp), [Writes()], 1, QueryRun("q", "r"))
    assert not os.path.exists(tmp_path / "s.db")


@pytest.mark.parametrize(("extra", "words"), [
    ({}, ["checkpointLocation", "absolute", "None"]),
    ({"checkpointLocation": "rel/cp"}, ["checkpointLocation", "'rel/cp'"]),
    ({"checkpointLocation": "hdfs://nn/cp"}, ["checkpointLocation", "hdfs://nn/cp"]),
    ({"checkpointLocation": "/cp", "anchor": "yes"}, ["'anchor'", "true or false", "'yes'"]),
    ({"checkpointLocation": "/cp", "new_checkpoint": "continue"}, ["new_checkpoint", "anchor=true"]),
])
def test_sink_anchor_options_refused_with_key_value_and_allowed(tmp_path, extra, words):
    options = {"store": f"sqlite:///{tmp_path}/s.db", "app_id": "a", "anchor": "true", **extra}
    with pytest.raises(ConfigurationError) as err:
        StoreSinkOptions.parse(options)
    assert all(w in str(err.value) for w in words), str(err.value)
    assert not os.path.exists(tmp_path / "s.db")


def test_sink_anchor_option_values(tmp_path):
    url = f"sqlite:///{tmp_path}/s.db"
    assert store_sink_options(url, "a", anchor=True)["anchor"] == "true"
    assert "anchor" not in store_sink_options(url, "a")
    assert anchored(url, "file:///x/cp/").anchor_checkpoint == "/x/cp"
    assert StoreSinkOptions.parse({"store": url, "app_id": "a"}).anchor_checkpoint is None
    with pytest.raises(ConfigurationError, match="new_checkpoint.*anchor=true"):
        store_sink_options(url, "a", anchor=True, new_checkpoint="continue")


@pytest.mark.parametrize(("extra", "words"), [
    ({"starting.positions.store": "sqlite:////tmp/x.db"}, ["'starting.positions.store'", "needs",
                                                           "'starting.positions.app'"]),
    ({"starting.positions.app": "a"}, ["'starting.positions.app'", "'a'", "needs", "'starting.positions.store'"]),
    ({"starting.positions.store": "http://x", "starting.positions.app": "a"}, ["store URL", "'http://x'"]),
    ({"starting.positions.store": "redis://:secret@h/0", "starting.positions.app": "a b"},
     ["'starting.positions.app'", "'a b'"]),
])
def test_source_store_options_refused_with_key_value_and_allowed(extra, words):
    with pytest.raises(ConfigurationError) as err:
        parse_kafka_source_options({**BROKER, **extra})
    assert all(w in str(err.value) for w in words), str(err.value)
    assert "secret" not in str(err.value)


def planner(cluster, url, **kw):
    o = parse_kafka_source_options({**BROKER, "starting.positions.store": url, "starting.positions.app": "a", **kw})
    assert "secret" not in repr(o)
    return KafkaSourcePlanner(o, metadata=lambda: cluster)


def test_source_starts_from_the_stored_positions_and_records_the_first_batch_starts(tmp_path):
    url = f"sqlite:///{tmp_path}/s.db"
    cluster = FakeKafkaCluster({"t": [(0, 10), (0, 6)]})
    assert planner(cluster, url).initial_offset() == {"t": {"0": 10, "1": 6}}  # nothing stored: startingOffsets
    assert not os.path.exists(tmp_path / "s.db")  # reading the store created nothing
    with open_store(url, "a") as s:
        s.commit(s.start_epoch(), PlannedBatch(0, 0, (OffsetRange("t", 0, 0, 4),)), Writes())
    p = planner(cluster, url, startingOffsets="earliest")
    start = p.initial_offset()
    assert start == {"t": {"0": 4, "1": 0}}  # t-1 has no stored position: startingOffsets
    end = p.latest_offset(start)
    assert end == {"t": {"0": 10, "1": 6}, "@from": {"t": {"0": 4, "1": 0}}}
    assert [r.toTuple() for r in ranges_between({}, end)] == [("t", 0, 4, 10), ("t", 1, 0, 6)]
    cluster.produce("t", 0, 2)
    assert "@from" not in p.latest_offset(end)  # later batches start where the previous one ended


def aof_doc(*entries):
    """An aof offset: ``entries`` of (file id, from, until)."""
    from dstream_exactly_once.files._ranges import FileRange

    files = {}
    for file_id, start, until in entries:
        r = FileRange(file_id, f"/logs/{file_id}.log", start, until, fingerprint="ab" * 8, sample_length=16)
        files[r.position_key] = {"from": start, "until": until, "meta": r.position_meta()}
    return {"v": 1, "files": files, "events": {}}


def test_aof_positions_are_anchored_too(tmp_path):
    url, cp1, cp2 = f"sqlite:///{tmp_path}/s.db", str(tmp_path / "cp1"), str(tmp_path / "cp2")
    one = Writes().incr("n", "k", 1)
    log_offsets(cp1, 0, aof_doc(("a", 0, 100)))
    log_offsets(cp1, 1, aof_doc(("a", 0, 100), ("b", 0, 40)))
    log_offsets(cp1, 2, aof_doc(("a", 100, 180), ("b", 0, 40)))
    for b in (0, 1, 2):
        assert commit_batch(anchored(url, cp1), [one], b, QueryRun("q1", "r1")) is CommitOutcome.APPLIED
    with open_store(url, "a") as s:
        assert {k: p.offset for k, p in s.load_positions().items()} == {"file:a": 180, "file:b": 40}
        assert s.load_positions()["file:a"].meta["path"] == "/logs/a.log"
        assert [(r.position_key, r.start, r.end) for r in s.get_batch(2).ranges] == [("file:a", 100, 180)]
    # a new checkpoint whose source started from the stored positions: unread files' entries are empty
    log_offsets(cp2, 0, aof_doc(("a", 180, 200), ("b", 40, 40)))
    assert commit_batch(anchored(url, cp2), [one], 0, QueryRun("q2", "r2")) is CommitOutcome.APPLIED
    # one that read a file from its start again is refused, nothing written
    log_offsets(str(tmp_path / "cp3"), 0, aof_doc(("a", 0, 200), ("b", 0, 40)))
    with pytest.raises(OffsetConflictError, match=r"file:a stored 200, batch from 0"):
        commit_batch(anchored(url, str(tmp_path / "cp3")), [one], 0, QueryRun("q3", "r3"))
    assert state(url) == (4, {"file:a": 200, "file:b": 40}, 3)


def test_an_application_keeps_the_mode_it_was_committed_in(tmp_path):
    url, cp = f"sqlite:///{tmp_path}/s.db", str(tmp_path / "cp")
    plain = StoreSinkOptions.parse(store_sink_options(url, "a"))
    log_offsets(cp, 0, {"t": {"0": 3}, "@from": {"t": {"0": 0}}})
    commit_batch(anchored(url, cp), [Writes().incr("n", "k", 1)], 0, QueryRun("q", "r"))
    with pytest.raises(OffsetConflictError, match="committed with anchor=true.*nothing was written"):
        commit_batch(plain, [Writes().incr("n", "k", 1)], 1, QueryRun("q", "r"))
    other = f"sqlite:///{tmp_path}/o.db"
    commit_batch(StoreSinkOptions.parse(store_sink_options(other, "a")), [Writes().incr("n", "k", 1)], 0,
                 QueryRun("q", "r"))
    with pytest.raises(OffsetConflictError, match="committed without anchor=true.*nothing was written"):
        commit_batch(anchored(other, cp), [Writes().incr("n", "k", 1)], 1, QueryRun("q", "r"))
    assert state(url)[0] == 1 and state(other)[0] == 1


def test_dstream_eo_offsets_show_lists_an_anchored_querys_positions(tmp_path, capsys):
    from dstream_exactly_once.cli._main import main

    url, cp = f"sqlite:///{tmp_path}/s.db", str(tmp_path / "cp")
    log_offsets(cp, 0, {"t": {"0": 3, "1": 5}, "@from": {"t": {"0": 0, "1": 1}}})
    commit_batch(anchored(url, cp), [Writes().incr("n", "k", 1)], 0, QueryRun("q", "r"))
    assert main(["offsets", "show", "--store", url, "--app", "a"]) == 0
    rows = [line.split()[:2] for line in capsys.readouterr().out.splitlines() if line.startswith("t/")]
    assert rows == [["t/0", "3"], ["t/1", "5"]]
