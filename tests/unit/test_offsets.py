"""Offset value types: the Spark 2.4 names, plus hashing and validation Spark 2.4 lacked."""

from __future__ import annotations

import pickle

import pytest

from dstream_exactly_once import (
    Broker,
    DecodeError,
    HasOffsetRanges,
    KafkaMessageAndMetadata,
    OffsetRange,
    OffsetRangeError,
    TopicAndPartition,
    utf8_decoder,
)


# ---------------------------------------------------------------- OffsetRange
def test_offset_range_equality_and_hash():
    a = OffsetRange("t", 0, 1, 5)
    b = OffsetRange("t", 0, 1, 5)
    assert a == b and not a != b
    assert hash(a) == hash(b)
    assert len({a, b, OffsetRange("t", 0, 1, 6)}) == 2
    assert {a: "batch-1"}[b] == "batch-1"
    assert a != OffsetRange("t", 1, 1, 5)
    assert a != OffsetRange("u", 0, 1, 5)
    assert a != ("t", 0, 1, 5)


def test_offset_range_accessors():
    r = OffsetRange("t", 3, 10, 25)
    assert (r.topic, r.partition, r.fromOffset, r.untilOffset) == ("t", 3, 10, 25)
    assert r.count() == 15
    assert OffsetRange("t", 3, 7, 7).count() == 0
    assert r.topicPartition() == TopicAndPartition("t", 3)
    assert r.toTuple() == ("t", 3, 10, 25)
    assert OffsetRange(*r.toTuple()) == r
    assert OffsetRange.create("t", 3, 10, 25) == r


def test_offset_range_str_is_spark_24_format():
    assert str(OffsetRange("t", 0, 1, 5)) == "OffsetRange(topic: 't', partition: 0, range: [1 -> 5])"


def test_offset_ranges_sort_by_topic_partition_offsets():
    ranges = [OffsetRange("b", 0, 0, 1), OffsetRange("a", 1, 0, 1), OffsetRange("a", 0, 5, 6),
              OffsetRange("a", 0, 0, 5)]
    assert [r.toTuple() for r in sorted(ranges)] == [("a", 0, 0, 5), ("a", 0, 5, 6), ("a", 1, 0, 1), ("b", 0, 0, 1)]


def test_offset_range_is_immutable_and_pickles():
    r = OffsetRange("t", 0, 1, 5)
    with pytest.raises(AttributeError):
        r.untilOffset = 9  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(r)) == r


@pytest.mark.parametrize(("args", "message"), [
    (("", 0, 0, 1), "topic must be a non-empty str, got ''"),
    ((None, 0, 0, 1), "topic must be a non-empty str, got None"),
    (("t", -1, 0, 1), "partition must be an int >= 0, got -1"),
    (("t", "0", 0, 1), "partition must be an int >= 0, got '0'"),
    (("t", True, 0, 1), "partition must be an int >= 0, got True"),
    (("t", 0, -5, 1), "fromOffset must be an int >= 0, got -5"),
    (("t", 0, 1.5, 2), "fromOffset must be an int >= 0, got 1.5"),
    (("t", 0, 0, -1), "untilOffset must be an int >= 0, got -1"),
    (("t", 0, 0, "9"), "untilOffset must be an int >= 0, got '9'"),
    (("t", 2, 9, 4), "fromOffset 9 > untilOffset 4 for t-2"),
])
def test_offset_range_validation_names_the_bad_value(args, message):
    with pytest.raises(OffsetRangeError) as info:
        OffsetRange(*args)
    assert str(info.value) == message
    assert isinstance(info.value, ValueError)


# ---------------------------------------------------------------- TopicAndPartition
def test_topic_and_partition_is_a_dict_key():
    offsets = {TopicAndPartition("t", 0): 10, TopicAndPartition("t", 1): 20}
    assert offsets[TopicAndPartition("t", 0)] == 10
    offsets[TopicAndPartition("t", 1)] = 21
    assert len(offsets) == 2 and offsets[TopicAndPartition("t", 1)] == 21
    assert TopicAndPartition("t", 0) != TopicAndPartition("t", 1)
    assert hash(TopicAndPartition("t", 0)) == hash(TopicAndPartition("t", 0))
    assert str(TopicAndPartition("orders", 3)) == "orders-3"
    assert sorted([TopicAndPartition("b", 0), TopicAndPartition("a", 2), TopicAndPartition("a", 1)]) == [
        TopicAndPartition("a", 1), TopicAndPartition("a", 2), TopicAndPartition("b", 0)]


def test_topic_and_partition_validation():
    with pytest.raises(OffsetRangeError, match="partition must be an int >= 0, got -2"):
        TopicAndPartition("t", -2)
    with pytest.raises(OffsetRangeError, match="topic must be a non-empty str, got 5"):
        TopicAndPartition(5, 0)  # type: ignore[arg-type]


def test_broker_validation():
    assert Broker("kafka-1", 9092).port == 9092
    with pytest.raises(OffsetRangeError, match="port must be an int in 1..65535, got 70000"):
        Broker("kafka-1", 70000)
    with pytest.raises(OffsetRangeError, match="host must be a non-empty str, got ''"):
        Broker("", 9092)


# ---------------------------------------------------------------- KafkaMessageAndMetadata
class CountingDecoder:
    def __init__(self):
        self.calls = 0

    def __call__(self, raw):
        self.calls += 1
        return None if raw is None else raw.decode("utf-8").upper()


def test_message_decodes_lazily_with_its_decoders():
    kd, vd = CountingDecoder(), CountingDecoder()
    m = KafkaMessageAndMetadata("t", 1, 42, b"k", b"v", 1700000000000, 0, [("h", b"x")], kd, vd)
    assert (kd.calls, vd.calls) == (0, 0)
    assert m.key == "K" and m.message == "V"
    assert (kd.calls, vd.calls) == (1, 1)
    assert (m.topic, m.partition, m.offset) == ("t", 1, 42)
    assert (m.timestamp, m.timestampType, list(m.headers)) == (1700000000000, 0, [("h", b"x")])
    assert m.offsetRange() == OffsetRange("t", 1, 42, 43)
    assert str(m) == "KafkaMessageAndMetadata(topic: t, partition: 1, offset: 42, key and message...)"


def test_message_pickles_raw_bytes_and_decodes_after():
    raw_value = b"\xff\xfe not utf-8"
    m = KafkaMessageAndMetadata("t", 0, 7, None, raw_value, 123, 1, [("h", None)], CountingDecoder(),
                                lambda raw: len(raw))
    assert m.message == len(raw_value)
    copy = pickle.loads(pickle.dumps(m))
    assert copy._rawKey is None and copy._rawMessage == raw_value
    assert (copy.topic, copy.partition, copy.offset, copy.timestamp, copy.timestampType) == ("t", 0, 7, 123, 1)
    assert list(copy.headers) == [("h", None)]
    assert copy == m  # decoders are not part of equality
    assert copy.key is None  # a null key stays None under the default decoder
    with pytest.raises(DecodeError, match="not UTF-8"):  # undecodable bytes fail only when read
        _ = copy.message


def test_message_defaults_for_spark_24_constructor():
    m = KafkaMessageAndMetadata("t", 0, 0, b"k", b"v")
    assert (m.key, m.message, m.timestamp, m.timestampType, tuple(m.headers)) == ("k", "v", -1, -1, ())


def test_utf8_decoder():
    assert utf8_decoder(None) is None
    assert utf8_decoder(b"caf\xc3\xa9") == "café"
    assert utf8_decoder(b"") == ""
    with pytest.raises(DecodeError, match="not UTF-8: 'utf-8' codec can't decode byte 0xff") as info:
        utf8_decoder(b"\xff")
    assert isinstance(info.value, ValueError) and isinstance(info.value.__cause__, UnicodeDecodeError)


def test_has_offset_ranges_is_structural():
    class Batch:
        def offsetRanges(self):
            return [OffsetRange("t", 0, 0, 1)]

    assert isinstance(Batch(), HasOffsetRanges)
    assert not isinstance(object(), HasOffsetRanges)


def test_to_bytes_is_the_one_producer_encoding():
    from dstream_exactly_once.kafka._offsets import to_bytes

    assert to_bytes(None) is None and to_bytes(b"\xff") == b"\xff" and to_bytes("ключ") == "ключ".encode()
    assert to_bytes(42, stringify=True) == b"42"
    with pytest.raises(TypeError, match="must be bytes, str or None, got int: 42"):
        to_bytes(42)


def test_topic_and_partition_hash_is_cached_but_never_pickled():
    import os
    import subprocess
    import sys

    tp = TopicAndPartition("t", 1)
    assert hash(tp) == hash(("t", 1)) and {tp: 1}[TopicAndPartition("t", 1)] == 1
    payload = pickle.dumps({tp: 1})
    # another process hashes str differently: the unpickled key must hash as that process's own keys do
    code = ("import pickle, sys; from dstream_exactly_once.kafka._offsets import TopicAndPartition as T; "
            "d = pickle.loads(sys.stdin.buffer.read()); print(d[T('t', 1)])")
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code], input=payload, capture_output=True, env=env, check=True)
    assert out.stdout.strip() == b"1"
