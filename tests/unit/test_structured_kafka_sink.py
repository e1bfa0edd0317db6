"""The deo-kafka sink's Spark-free part: options, the row shape, the marker and the store checks."""

from __future__ import annotations

import os

import pytest

from dstream_exactly_once.errors import ConfigurationError, FencedError, OffsetConflictError, SinkError
from dstream_exactly_once.kafka.structured._marker import Decision, Marker, RecordDigest, check_replay, decide
from dstream_exactly_once.kafka.structured._sink import (
    KafkaPartitionCommit,
    KafkaSinkOptions,
    check_kafka_schema,
    commit_kafka_batch,
    kafka_sink_options,
    to_record,
    write_partition,
)
from dstream_exactly_once.stores import open_store
from dstream_exactly_once.stores._writes import Writes
from dstream_exactly_once.structured._sink_runs import QueryRun
from dstream_exactly_once.structured._store_sink import commit_batch

UNREACHABLE = "127.0.0.1:1"  # a test that reaches Kafka through it fails


def options(tmp_path, **extra):
    return {"store": f"sqlite:///{tmp_path}/s.db", "app": "q", "topic": "out",
            "kafka.bootstrap.servers": UNREACHABLE, **extra}


def digest(*records):
    d = RecordDigest()
    for r in records:
        d.add(*r)
    return d


# ---- marker
def test_digest_ignores_order_and_sees_every_field():
    a, b = ("t", None, b"k", b"1", []), ("t", None, b"k", b"2", [("h", b"x")])
    assert digest(a, b).hexdigest() == digest(b, a).hexdigest()
    assert digest(a, a).hexdigest() != digest(a).hexdigest()  # duplicates count
    base = digest(a).hexdigest()
    for other in (("u", None, b"k", b"1", []), ("t", 0, b"k", b"1", []), ("t", None, None, b"1", []),
                  ("t", None, b"k", b"1", [("h", b"")]), ("t", None, b"k1", b"", [])):
        assert digest(other).hexdigest() != base, other


def test_marker_round_trip_and_foreign_offsets():
    m = Marker.of(7, digest(("t", None, None, b"v", [])))
    assert m.next_batch == 8 and m.records == 1
    assert Marker.parse(8, m.metadata()) == m
    assert len(m.metadata()) < 200
    assert Marker.parse(None, None) is None and Marker.parse(-1, "") is None
    with pytest.raises(OffsetConflictError, match=r"offset 5 with metadata 'consumer'.*another client"):
        Marker.parse(5, "consumer")
    with pytest.raises(OffsetConflictError, match="not a deo-kafka marker"):
        Marker.parse(9, m.metadata())  # the offset must be the recorded batch + 1


def test_decide():
    m = Marker(next_batch=5, records=0, digest="0" * 32)
    assert decide(None, 0, "w") is Decision.PRODUCE
    assert decide(m, 5, "w") is Decision.PRODUCE and decide(m, 9, "w") is Decision.PRODUCE
    assert decide(m, 4, "w") is Decision.DONE
    with pytest.raises(OffsetConflictError, match=r"^w: Kafka already holds the output of batch 4, after batch 3"):
        decide(m, 3, "w")


def test_check_replay():
    d = digest(("t", None, None, b"v", []))
    assert check_replay(Marker.of(3, d), digest(("t", None, None, b"v", [])), "w") is None
    mismatch = check_replay(Marker.of(3, d), digest(("t", None, None, b"w", [])), "w")
    assert mismatch is not None and "batch 3 is replayed with other records" in mismatch
    assert "1 records" in mismatch and "not deterministic" in mismatch


# ---- options
@pytest.mark.parametrize("change, message", [
    ({"topic": None}, r"'topic' is required"),
    ({"kafka.bootstrap.servers": None}, r"'kafka.bootstrap.servers' is required"),
    ({"topics": "x"}, r"unknown deo-kafka option\(s\) \['topics'\]; allowed"),
    ({"on_replay_mismatch": "ignore"}, r"'on_replay_mismatch' must be one of \['fail', 'keep'\], got 'ignore'"),
    ({"transaction_timeout_ms": "soon"}, r"'transaction_timeout_ms' must be an int from 1 to 2147483647 .*got 'soon'"),
    ({"transaction_timeout_ms": str(2**40)}, r"'transaction_timeout_ms' must be an int from 1 to 2147483647 "
                                             r".*transaction\.max\.timeout\.ms.*got '1099511627776'"),
    ({"kafka.group.idd": "g"}, r"kafka\.\* are Kafka client settings.*'group.idd'"),
    ({"epoch": "1"}, r"'epoch' \('1'\) is no longer used"),
    ({"new_checkpoint": "yes"}, r"'new_checkpoint' must be one of \['refuse', 'continue'\], got 'yes'"),
    ({"app": "has space"}, r"app"),
    ({"store": "mysql://u:hunter2@h/db"}, r"'store' must be a sqlite://"),
    ({"prefix": "a b"}, r"prefix must be a non-empty str without spaces"),
])
def test_options_refused(tmp_path, change, message):
    opts = {k: v for k, v in {**options(tmp_path), **change}.items() if v is not None}
    with pytest.raises(ConfigurationError, match=message) as info:
        KafkaSinkOptions.parse(opts)
    assert "hunter2" not in str(info.value)


def test_options_parse_and_names(tmp_path):
    opts = KafkaSinkOptions.parse({**options(tmp_path), "KAFKA.sasl.password": "s3cr#t", "kafka.sasl.username": "u",
                                   "kafka.sasl.mechanism": "PLAIN", "kafka.security.protocol": "SASL_PLAINTEXT",
                                   "store": "postgresql://deo@127.0.0.1:5/db", "store.password": "pw#1"})
    assert opts.topic == "out" and opts.app == "q" and opts.on_replay_mismatch == "fail"
    assert opts.transactional_id(3) == "deo.q.out.3" and opts.marker_group(3) == "deo.q.3"
    assert "s3cr" not in repr(opts) and "pw#1" not in repr(opts) and "pw%231" not in repr(opts)


def test_refused_start_takes_no_epoch(tmp_path):
    with pytest.raises(ConfigurationError, match="'topic' is required"):
        kafka_sink_options(f"sqlite:///{tmp_path}/s.db", "q", "", {"bootstrap.servers": UNREACHABLE})
    with pytest.raises(ConfigurationError, match="kafka_params must be a dict"):
        kafka_sink_options(f"sqlite:///{tmp_path}/s.db", "q", "out", "broker:9092")  # type: ignore[arg-type]
    assert not os.path.exists(tmp_path / "s.db")


# ---- rows
def test_schema():
    assert check_kafka_schema([("value", "binary"), ("offset", "bigint")]) == ("value",)
    assert check_kafka_schema([("headers", "array<struct<key:string,value:binary>>"), ("partition", "int"),
                               ("topic", "string"), ("key", "string"), ("value", "string")]) == (
        "value", "key", "topic", "partition", "headers")
    with pytest.raises(ConfigurationError, match=r"needs a 'value' column.*\['key'\]"):
        check_kafka_schema([("key", "string")])
    with pytest.raises(ConfigurationError, match="column 'partition' must be of type int, got bigint"):
        check_kafka_schema([("value", "string"), ("partition", "bigint")])


def test_to_record():
    assert to_record({"value": "v"}, ("value",), "out") == ("out", None, None, b"v", [])
    row = {"value": bytearray(b"v"), "key": "k", "topic": None, "partition": 1,
           "headers": [{"key": "h", "value": b"x"}]}
    assert to_record(row, ("value", "key", "topic", "partition", "headers"), "out") == ("out", 1, b"k", b"v",
                                                                                         [("h", b"x")])
    assert to_record({"value": "v", "topic": "t2"}, ("value", "topic"), "out")[0] == "t2"
    with pytest.raises(SinkError, match="both 'key' and 'value' null"):
        to_record({"value": None, "key": None}, ("value", "key"), "out")
    with pytest.raises(SinkError, match="column 'value' must hold strings or bytes, got int"):
        to_record({"value": 3}, ("value",), "out")


# ---- the store checks before anything reaches Kafka (the bootstrap is unreachable)
RUN, RUN2, NEW = QueryRun("query-1", "run-1"), QueryRun("query-1", "run-2"), QueryRun("query-2", "run-3")


def test_store_checks_come_first(tmp_path):
    opts = KafkaSinkOptions.parse(options(tmp_path))
    for b in range(3):
        commit_batch(opts.store, [Writes()], b, RUN)
    assert write_partition(opts, 2, 0, iter([{"value": "x"}]), ("value",), RUN).replayed  # committed: no Kafka
    with pytest.raises(OffsetConflictError, match=r"deo-kafka app q batch 0: batch 0 comes from query query-2, a new "
                                                  r"checkpoint.*nothing was written"):
        write_partition(opts, 0, 0, iter([{"value": "x"}]), ("value",), NEW)
    commit_batch(opts.store, [Writes()], 3, RUN2)  # the query started again: a new epoch
    with pytest.raises(FencedError, match=r"run run-1 of query query-1 was replaced"):
        write_partition(opts, 4, 0, iter([{"value": "x"}]), ("value",), RUN)
    with open_store(opts.store.store, "q") as s:
        s.start_epoch()  # a later start whose first commit is still to come
    with pytest.raises(FencedError, match=r"newer query \(epoch 3\).*\(epoch 2\)"):
        write_partition(opts, 4, 0, iter([{"value": "x"}]), ("value",), RUN2)


@pytest.mark.parametrize("n", [1, 2, 5])
def test_new_checkpoint_is_refused_whatever_the_number_of_batches(tmp_path, n):
    opts = KafkaSinkOptions.parse(options(tmp_path))
    for b in range(n):
        commit_batch(opts.store, [Writes()], b, RUN)
    with pytest.raises(OffsetConflictError, match=rf"batches up to {n - 1} were committed by query query-1"):
        write_partition(opts, 0, 0, iter([{"value": "x"}]), ("value",), NEW)
    with pytest.raises(OffsetConflictError, match=rf"batches up to {n - 1} were committed by query query-1"):
        commit_kafka_batch(opts, [KafkaPartitionCommit(0, 0, True, NEW)], 0)


def test_commit_needs_every_message(tmp_path):
    opts = KafkaSinkOptions.parse(options(tmp_path))
    with pytest.raises(ConfigurationError, match=r"batch 0: 1 task\(s\) sent no commit message"):
        commit_kafka_batch(opts, [None], 0)
    assert not os.path.exists(tmp_path / "s.db")
