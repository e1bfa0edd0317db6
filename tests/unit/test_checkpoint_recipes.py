"""Recipes that direct streams pickle into a Spark checkpoint (no Spark, no broker needed)."""

from __future__ import annotations

import pickle
from datetime import datetime

import pytest
from pyspark import SparkContext

from dstream_exactly_once import ConfigurationError, OffsetRange
from dstream_exactly_once.kafka._params import parse_kafka_params
from dstream_exactly_once.kafka._strategies import Subscribe
from dstream_exactly_once.kafka.spark._direct import DirectBatches, ReadOptions, _recover_batches
from dstream_exactly_once.streaming import _recovery as recovery
from dstream_exactly_once.streaming._dstream import RangeDStream
from dstream_exactly_once.streaming._recovery import batch_ms, forget, refuse_recovery, time_of_ms


def _recipe(password: str = "s3cret") -> dict:
    config = parse_kafka_params({"bootstrap.servers": "127.0.0.1:1", "security.protocol": "SASL_PLAINTEXT",
                                 "sasl.mechanism": "PLAIN", "sasl.username": "u", "sasl.password": password})
    return {"config": config, "strategy": Subscribe(["t"]), "opts": ReadOptions(None, config=config),
            "decoders": {"key_decoder": str, "value_decoder": str, "message_handler": None}, "seconds": 1.0,
            "auto_offset_reset": "earliest", "discovery_interval_s": 5.0,
            "current": {OffsetRange("t", 0, 0, 0).topicPartition(): 42}, "monitor_group": None}


def test_a_recovered_source_is_one_object_per_token_and_opens_only_when_used(monkeypatch):
    # a process without a SparkContext (the suite may have started one for other tests)
    monkeypatch.setattr(SparkContext, "_active_spark_context", None)
    token = "tok-unit-1"
    try:
        a = pickle.loads(pickle.dumps(_recover_batches_args(token)))
        b = pickle.loads(pickle.dumps(_recover_batches_args(token)))
        assert a is b  # several pickled functions refer to one stream: one recovered source
        assert "_recipe" in a.__dict__ and "planner" not in a.__dict__  # nothing connected while unpickling
        a.close()  # never opened: nothing to close, no connection made
        assert a.recovery_recipe()["current"] == _recipe()["current"]  # pickles again as the same recipe
        with pytest.raises(AttributeError):
            a.__wrapped__  # noqa: B018 - dunder lookups never open the source
        with pytest.raises(ConfigurationError, match="needs the SparkContext"):
            a.planner  # noqa: B018 - opening needs the recovered SparkContext (none in this process)
    finally:
        forget(token)
    assert pickle.loads(pickle.dumps(_recover_batches_args(token))) is not a  # forgotten: built again
    forget(token)


class _Args:
    def __init__(self, token):
        self.token = token

    def __reduce__(self):
        return (_recover_batches, (self.token, _recipe()))


def _recover_batches_args(token):
    return _Args(token)


def test_a_recipe_keeps_secrets_out_of_its_repr():
    source = DirectBatches.from_recipe("tok-unit-2", _recipe("hunter2-pw"))
    assert "hunter2-pw" not in repr(source.recovery_recipe())


def test_refused_recovery_raises_on_the_driver_and_is_a_stub_elsewhere(monkeypatch):
    monkeypatch.setattr(SparkContext, "_gateway", None)  # an executor's Python worker: no gateway
    stub = refuse_recovery("tok", "ExactlyOnceDStream", "the store is the source of truth")
    with pytest.raises(ConfigurationError):  # an executor only fails when it uses the stream
        stub.anything  # noqa: B018
    monkeypatch.setattr(SparkContext, "_gateway", object())
    with pytest.raises(ConfigurationError, match="getOrCreate cannot recover this ExactlyOnceDStream from a Spark "
                                                 "checkpoint: the store is the source of truth"):
        refuse_recovery("tok", "ExactlyOnceDStream", "the store is the source of truth")


def _restored_stream(batches: dict, tick_dir: str) -> RangeDStream:
    stream = RangeDStream.__new__(RangeDStream)
    stream._restore_plan_state({"batches": batches, "tick_dir": tick_dir}, _FakeRDD)
    stream._build = lambda t: _FakeRDD([OffsetRange("t", 0, 9, 12)])
    return stream


class _FakeRDD:
    def __init__(self, ranges):
        self.ranges = list(ranges)

    def offsetRanges(self):  # noqa: N802
        return self.ranges


def test_a_restored_stream_regenerates_checkpointed_batches_and_refuses_unknown_old_ones(tmp_path):
    t1, t2, t3 = (time_of_ms(ms) for ms in (1_000_000, 1_001_000, 1_002_000))
    stream = _restored_stream({batch_ms(t1): [OffsetRange("t", 0, 0, 5)], batch_ms(t3): [OffsetRange("t", 0, 5, 9)]},
                              str(tmp_path / "tick"))
    assert stream._rdd_for(t3).offsetRanges() == [OffsetRange("t", 0, 5, 9)]
    assert stream._rdd_for(t1).offsetRanges() == [OffsetRange("t", 0, 0, 5)]
    with pytest.raises(ConfigurationError, match="not newer than the checkpoint's last batch"):
        stream._rdd_for(t2)  # planning a past batch now would read other records
    later = time_of_ms(1_003_000)
    assert stream._rdd_for(later).offsetRanges() == [OffsetRange("t", 0, 9, 12)]  # after the checkpoint: planned
    assert stream._plan_state()["batches"][batch_ms(later)] == [OffsetRange("t", 0, 9, 12)]


def test_batch_times_round_trip_as_pyspark_hands_them_over():
    t = datetime.fromtimestamp(1_795_607_504_000 / 1000.0)
    assert time_of_ms(batch_ms(t)) == t
    assert recovery.batch_ms(t) == 1_795_607_504_000


@pytest.mark.parametrize("cls, recoverable, reason", [
    ("DirectKafkaDStream", False, "KafkaUtils.createStream resumes from its consumer group's committed offsets"),
    ("ExactlyOnceDStream", None, "the store has committed"),
    ("FileDStream", None, "its positions are not in the checkpoint"),
])
def test_streams_without_a_recipe_pickle_as_a_refusal(monkeypatch, cls, recoverable, reason):
    from dstream_exactly_once.files.spark import _utils as file_utils
    from dstream_exactly_once.kafka.spark import _commit_async as commit_async
    from dstream_exactly_once.streaming import _exactly_once as exactly_once

    klass = {"DirectKafkaDStream": commit_async.DirectKafkaDStream,
             "ExactlyOnceDStream": exactly_once.ExactlyOnceDStream, "FileDStream": file_utils.FileDStream}[cls]
    stream = klass.__new__(klass)
    stream._driver_token = "tok-refused"
    if recoverable is not None:
        stream._recoverable = recoverable
    data = pickle.dumps(stream)
    monkeypatch.setattr(SparkContext, "_gateway", object())  # unpickled on a driver, as getOrCreate does
    with pytest.raises(ConfigurationError, match=f"cannot recover this {cls} from a Spark checkpoint: .*{reason}"):
        pickle.loads(data)
