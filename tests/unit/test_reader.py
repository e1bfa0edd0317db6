"""The executor reader's own record-batch decoding, consumer cache and fetch sizing (no broker, no Spark).

Also checks that the reader side (``dstream_exactly_once.kafka``) does not import Spark.
"""

from __future__ import annotations

import pytest

from dstream_exactly_once import DecodeError, OffsetRange


def _batch(records, compression=0, base_offset=0):
    """A v2 record batch of ``records`` = [(offset delta, timestamp, key, value, headers)]."""
    import struct

    from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(magic=2, compression_type=compression, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=2 ** 30)
    for rec in records:
        builder.append(*rec)
    raw = bytearray(builder.build())
    struct.pack_into(">q", raw, 0, base_offset)  # the base offset is not covered by the CRC
    return DefaultRecordBatch(bytes(raw))


BATCH_CASES = {
    "null keys, 100-byte values": [(i, 1_700_000_000_000 + i, None, b"v" * 100, []) for i in range(300)],
    "keys, nulls, empties, headers": [
        (0, 1_700_000_000_000, b"k", b"v", []),
        (1, 1_700_000_000_005, None, None, []),
        (2, 1_699_999_000_000, b"", b"", [("h", b"x"), ("h2", None)]),
        (3, 1_700_000_000_000, "ключ".encode(), "значение".encode(), [("h", b"y" * 300)]),
    ],
    "gaps (compaction) and multi-byte varints": [
        (0, 1_700_000_000_000, b"a" * 70, b"x" * 20_000, []),
        (5, 1_700_000_000_000, None, b"y" * 9_000, []),
        (300, 1_800_000_000_000, b"b" * 200, b"z", []),
        (70_000, 1_700_000_000_000, None, b"w" * 3_000_000, []),
    ],
}


@pytest.mark.parametrize("compression", [0, 1], ids=["uncompressed", "gzip"])
@pytest.mark.parametrize("case", sorted(BATCH_CASES))
def test_batch_decoding_matches_kafka_python(case, compression):
    from dstream_exactly_once.kafka._fetch import Batch

    expected = [(r.offset, r.key, r.value) for r in _batch(BATCH_CASES[case], compression, 1000)]
    offsets = [o for o, _, _ in expected]
    block = Batch(_batch(BATCH_CASES[case], compression, 1000)).block("t", 0, 0, 10 ** 9, False)
    assert list(zip(block.offsets, block.keys, block.values, strict=True)) == expected
    # clipped to a range that starts and ends inside the batch
    lo, hi = offsets[1], offsets[-1]
    block = Batch(_batch(BATCH_CASES[case], compression, 1000)).block("t", 0, lo, hi, False)
    assert list(zip(block.offsets, block.keys, block.values, strict=True)) == [
        e for e in expected if lo <= e[0] < hi]
    assert Batch(_batch(BATCH_CASES[case], compression, 1000)).block("t", 0, hi + 1, hi + 5, False) is None
    # metadata=True: timestamps, timestamp types and headers exactly as kafka-python decodes them
    full = Batch(_batch(BATCH_CASES[case], compression, 1000)).block("t", 0, 0, 10 ** 9, True)
    records = list(_batch(BATCH_CASES[case], compression, 1000))
    assert full.offsets == offsets and full.values == [r.value for r in records]
    assert full.keys == [r.key for r in records]
    assert full.timestamps == [r.timestamp for r in records] and full.headers == [r.headers for r in records]
    assert full.timestamp_types == [r.timestamp_type for r in records] == [0] * len(records)
    clipped = Batch(_batch(BATCH_CASES[case], compression, 1000)).block("t", 0, lo, hi, True)
    inside = [r for r in records if lo <= r.offset < hi]
    assert clipped.offsets == [r.offset for r in inside]
    assert clipped.timestamps == [r.timestamp for r in inside] and clipped.headers == [r.headers for r in inside]


def _log_append_time(batch):
    """``batch`` as a broker with log-append time returns it: attribute bit 3 set, CRC recomputed."""
    import struct

    from kafka.record.default_records import DefaultRecordBatch
    from kafka.record.util import calc_crc32c

    raw = bytearray(batch._buffer)
    struct.pack_into(">h", raw, 21, struct.unpack_from(">h", raw, 21)[0] | 0x08)
    struct.pack_into(">I", raw, 17, calc_crc32c(bytes(raw[21:])))
    return DefaultRecordBatch(bytes(raw))


def test_varint_width_boundaries_decode_as_kafka_python_does():
    """Every field at the one/two/three-byte varint boundaries (zigzag 63/64, 8191/8192), negative
    timestamp deltas and offset gaps; the decoders inline one- and two-byte varints."""
    import random

    from dstream_exactly_once.kafka._fetch import Batch

    rng = random.Random(16)
    sizes = [-1, 0, 1, 63, 64, 65, 8191, 8192, 8193]
    records, delta = [], 0
    for _ in range(120):
        delta += rng.choice([1, 1, 1, 2, 60, 8000])

        def blob(size, fill):
            return None if size < 0 else bytes([fill]) * size

        headers = [(f"h{j}", blob(rng.choice(sizes), 104)) for j in range(rng.choice([0, 0, 1, 2, 70]))]
        records.append((delta, 1_700_000_000_000 + rng.choice([0, 63, 64, -64, -65, 8191, 8192, -8193, 10 ** 7]),
                        blob(rng.choice(sizes), 107), blob(rng.choice(sizes), 118), headers))
    expected = list(_batch(records, 0, 5000))
    for metadata in (False, True):
        block = Batch(_batch(records, 0, 5000)).block("t", 0, 0, 10 ** 9, metadata)
        assert block.offsets == [r.offset for r in expected] and block.keys == [r.key for r in expected]
        assert block.values == [r.value for r in expected]
        if metadata:
            assert block.timestamps == [r.timestamp for r in expected]
            assert block.headers == [r.headers for r in expected]


def test_log_append_time_batches_give_every_record_the_batch_time():
    from dstream_exactly_once.kafka._fetch import Batch

    raw = _log_append_time(_batch(BATCH_CASES["keys, nulls, empties, headers"], 0, 40))
    records = list(_log_append_time(_batch(BATCH_CASES["keys, nulls, empties, headers"], 0, 40)))
    assert raw.validate_crc() and {r.timestamp_type for r in records} == {1}
    block = Batch(raw).block("t", 0, 0, 10 ** 9, True)
    assert block.timestamps == [r.timestamp for r in records] == [records[0].timestamp] * 4
    assert block.timestamp_types == [1] * 4 and block.headers == [r.headers for r in records]


def test_corrupt_batches_raise_corrupt_record_error_with_metadata_too():
    from kafka.errors import CorruptRecordError

    from dstream_exactly_once.kafka._fetch import parse_v2_meta

    raw = bytes(_batch(BATCH_CASES["keys, nulls, empties, headers"])._buffer)
    assert parse_v2_meta(raw, 61, 4, 0, 5, None)[4][2] == [("h", b"x"), ("h2", None)]
    for bad_raw, count in ((raw[:-3], 4), (raw + b"\x00", 4), (raw, 5)):
        with pytest.raises(CorruptRecordError):
            parse_v2_meta(bad_raw, 61, count, 0, 5, None)
    bad = bytearray(raw)
    bad[61] += 2  # first record claims one byte more than it has
    with pytest.raises(CorruptRecordError):
        parse_v2_meta(bytes(bad), 61, 4, 0, 5, None)


def test_message_handler_decodes_lazily_and_names_a_bad_record():
    from dstream_exactly_once import utf8_decoder
    from dstream_exactly_once.kafka._range_reader import _Decoding
    from dstream_exactly_once.kafka._records import RecordBlock

    block = RecordBlock("t", 2, [4, 5], [None, b"k"], [b"ok", b"\xff"], [10, 11], [0, 0], [[], [("h", b"v")]])
    seen = list(_Decoding(utf8_decoder, utf8_decoder, lambda m: m)([block]))
    assert [(m.offset, m.timestamp, m.key, m.headers) for m in seen] == [(4, 10, None, []), (5, 11, "k", [("h", b"v")])]
    assert seen[0].message == "ok"
    with pytest.raises(DecodeError, match=r"t-2 offset 5"):
        seen[1].message  # noqa: B018 - the lazy decoding raises on access
    clean = RecordBlock("t", 2, [4], [b"k"], [b"v"], [10], [1], [[]])
    assert list(_Decoding(utf8_decoder, utf8_decoder, lambda m: (m.offset, m.timestampType, m.key, m.message))(
        [clean])) == [(4, 1, "k", "v")]


def test_handler_messages_behave_as_user_built_ones():
    import pickle

    from dstream_exactly_once import KafkaMessageAndMetadata, utf8_decoder
    from dstream_exactly_once.kafka._range_reader import _Decoding
    from dstream_exactly_once.kafka._records import RecordBlock

    block = RecordBlock("t", 2, [4, 6], [None, b"k"], [b"v", "\u00e9".encode()], [10, 11], [0, 1],
                        [[], [("h", b"x")]])
    decoded = list(_Decoding(utf8_decoder, utf8_decoder, lambda m: m)([block]))  # pre-decoded messages
    lazy = list(_Decoding(utf8_decoder, lambda raw: raw, lambda m: m)([block]))  # a custom decoder: lazy
    built = [KafkaMessageAndMetadata("t", 2, 4, None, b"v", 10, 0, []),
             KafkaMessageAndMetadata("t", 2, 6, b"k", "\u00e9".encode(), 11, 1, [("h", b"x")])]
    assert decoded == built and lazy == built
    assert [(m.key, m.message) for m in decoded] == [(None, "v"), ("k", "\u00e9")]
    assert [(m.key, m.message) for m in lazy] == [(None, b"v"), ("k", "\u00e9".encode())]
    for m, b in zip(decoded + lazy, built + built, strict=True):
        assert isinstance(m, KafkaMessageAndMetadata) and repr(m) == repr(b) and str(m) == str(b)
        assert (m.topic, m.partition, m.offset, m.timestamp, m.timestampType, m.headers, m._rawKey, m._rawMessage) \
            == (b.topic, b.partition, b.offset, b.timestamp, b.timestampType, b.headers, b._rawKey, b._rawMessage)
        copy = pickle.loads(pickle.dumps(m))  # raw bytes travel; the copy decodes with the default decoders
        assert type(copy) is KafkaMessageAndMetadata and copy == m and copy.message == b.message
        with pytest.raises(TypeError):
            hash(m)
    with pytest.raises(DecodeError, match=r"t-2 offset 6: ValueError: invalid literal"):
        list(_Decoding(utf8_decoder, lambda raw: raw.decode("ascii") if raw == b"v" else int("x"),
                       lambda m: m.message)([block]))


def test_corrupt_batches_raise_corrupt_record_error():
    from kafka.errors import CorruptRecordError

    from dstream_exactly_once.kafka._fetch import parse_v2

    raw = bytes(_batch(BATCH_CASES["keys, nulls, empties, headers"])._buffer)
    parse_v2(raw, 61, 4, 0)
    with pytest.raises(CorruptRecordError):
        parse_v2(raw[:-3], 61, 4, 0)  # truncated
    with pytest.raises(CorruptRecordError):
        parse_v2(raw + b"\x00", 61, 4, 0)  # trailing bytes
    with pytest.raises(CorruptRecordError):
        parse_v2(raw, 61, 5, 0)  # fewer records than the header says
    bad = bytearray(raw)
    bad[61] += 2  # first record claims one byte more than it has
    with pytest.raises(CorruptRecordError):
        parse_v2(bytes(bad), 61, 4, 0)


def test_decoder_failure_yields_the_records_before_it_and_names_the_offset():
    from dstream_exactly_once import utf8_decoder
    from dstream_exactly_once.kafka._range_reader import _Decoding
    from dstream_exactly_once.kafka._records import RecordBlock

    def picky(raw):
        if raw == b"bad":
            raise ValueError("no")
        return raw.decode()

    block = RecordBlock("t", 3, [7, 8, 9], [None, None, None], [b"a", b"bad", b"c"])
    it = _Decoding(utf8_decoder, picky, None)([block])
    assert next(it) == (None, "a")
    with pytest.raises(DecodeError, match=r"t-3 offset 8: ValueError: no"):
        next(it)


def test_consumer_cache_prefers_the_partition_then_any_idle_consumer_of_the_config():
    from dstream_exactly_once.kafka._consumers import ConsumerCache
    from dstream_exactly_once.kafka._params import parse_kafka_params

    config = parse_kafka_params({"bootstrap.servers": "127.0.0.1:9"})
    cache = ConsumerCache()
    a, b = object(), object()
    cache.release(config, OffsetRange("t", 0, 0, 1), a)
    cache.release(config, OffsetRange("t", 1, 0, 1), b)
    assert cache.acquire(config, OffsetRange("t", 1, 5, 6), fresh=False) is b
    assert cache.acquire(config, OffsetRange("u", 7, 0, 1), fresh=False) is a  # reassigned, not a new one
    assert cache.created == 0


def test_fetch_size_follows_the_rest_of_the_range():
    from dstream_exactly_once.kafka import _fetch

    class Fetcher:
        config = {"max_partition_fetch_bytes": 0}

    _fetch._BYTES_PER_OFFSET.pop("sized", None)
    _fetch.size_next_fetch(Fetcher, "sized", 1000, 4 << 20)
    assert Fetcher.config["max_partition_fetch_bytes"] == 4 << 20  # nothing known yet: the maximum
    _fetch._BYTES_PER_OFFSET["sized"] = 1000.0
    _fetch.size_next_fetch(Fetcher, "sized", 1000, 4 << 20)
    assert Fetcher.config["max_partition_fetch_bytes"] == 1_250_000
    _fetch.size_next_fetch(Fetcher, "sized", 3, 4 << 20)
    assert Fetcher.config["max_partition_fetch_bytes"] == _fetch._MIN_FETCH_BYTES
    _fetch.size_next_fetch(Fetcher, "sized", 10 ** 6, 1 << 20)
    assert Fetcher.config["max_partition_fetch_bytes"] == 1 << 20


def test_nothing_under_kafka_imports_spark():
    import ast
    import pathlib

    import dstream_exactly_once.kafka as kafka_pkg

    offenders = []
    for path in sorted(pathlib.Path(kafka_pkg.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] == "pyspark" or "streaming" in n]
    assert offenders == []


class _Record:
    def __init__(self, offset):
        self.offset, self.key, self.value = offset, None, str(offset).encode()


class _ShrinkingLog:
    """A consumer double over offsets [earliest, end): reading below ``earliest`` is out of range."""

    def __init__(self, earliest, end):
        self.earliest, self.end, self.pos, self.closed = earliest, end, None, False

    def assign(self, tps):
        self.tp = tps[0]

    def seek(self, tp, offset):
        self.pos = offset

    def poll(self, timeout_ms, max_records):
        from kafka.errors import OffsetOutOfRangeError

        if self.pos < self.earliest:
            raise OffsetOutOfRangeError({self.tp: self.pos})
        recs = [_Record(o) for o in range(self.pos, min(self.pos + 7, self.end))]
        self.pos += len(recs)
        return {self.tp: recs} if recs else {}

    def position(self, tp):
        return self.pos

    def beginning_offsets(self, tps):
        return {tp: self.earliest for tp in tps}

    def close(self, autocommit):
        self.closed = True


def _cache_of(consumer):
    from dstream_exactly_once.kafka._consumers import ConsumerCache

    class OneConsumer(ConsumerCache):
        def __init__(self):
            super().__init__()
            self.fresh = []

        def acquire(self, config, r, fresh):
            self.fresh.append(fresh)
            return consumer

    return OneConsumer()


def test_skipped_offsets_are_reported_to_the_callback_and_a_retry_gets_a_fresh_consumer():
    from dstream_exactly_once.kafka._params import parse_kafka_params
    from dstream_exactly_once.kafka._reader_kafka_python import read_range

    config = parse_kafka_params({"bootstrap.servers": "127.0.0.1:9"})
    skipped = []
    cache = _cache_of(_ShrinkingLog(earliest=12, end=40))
    blocks = list(read_range(config, OffsetRange("t", 0, 0, 30), fail_on_data_loss=False, cache=cache,
                             attempt=1, on_data_loss=skipped.append))
    assert [o for b in blocks for o in b.offsets] == list(range(12, 30))
    assert [(d.position_key, d.range_start, d.range_end, d.start, d.end, d.lost, d.unit) for d in skipped] == [
        ("t/0", 0, 30, 0, 12, 12, "offsets")]
    assert "log start 12" in skipped[0].reason
    assert cache.fresh == [True]
    # the whole range vanished: all of it is reported, nothing is read
    skipped.clear()
    cache = _cache_of(_ShrinkingLog(earliest=50, end=60))
    assert list(read_range(config, OffsetRange("t", 0, 5, 30), fail_on_data_loss=False, cache=cache,
                           on_data_loss=skipped.append)) == []
    assert [(d.start, d.end, d.lost) for d in skipped] == [(5, 30, 25)] and cache.fresh == [False]


def test_skipped_offsets_fail_the_read_by_default_and_the_callback_is_not_called():
    from dstream_exactly_once import DataLossError
    from dstream_exactly_once.kafka._params import parse_kafka_params
    from dstream_exactly_once.kafka._reader_kafka_python import read_range

    config = parse_kafka_params({"bootstrap.servers": "127.0.0.1:9"})
    skipped = []
    consumer = _ShrinkingLog(earliest=12, end=40)
    with pytest.raises(DataLossError, match=r"offsets \[0, 12\) of t-0 were deleted"):
        list(read_range(config, OffsetRange("t", 0, 0, 30), cache=_cache_of(consumer), on_data_loss=skipped.append))
    assert skipped == [] and consumer.closed


def test_driver_side_skip_counts_merge_per_partition_by_maximum():
    from dstream_exactly_once.kafka.spark._rdd import _MaxPerPartition

    param = _MaxPerPartition()
    total = param.zero({})
    for update in ({(1, 0): 5}, {(1, 1): 3}, {(1, 0): 5}, {(1, 0): 7, (2, 0): 1}):
        before = dict(total)
        merged = param.addInPlace(total, update)
        assert total == before  # a new dict: the driver may be reading the old one
        total = merged
    assert total == {(1, 0): 7, (1, 1): 3, (2, 0): 1}


class _DeletedTopic(_ShrinkingLog):
    """A consumer double whose topic is deleted once ``gone_at`` is reached."""

    def __init__(self, gone_at):
        super().__init__(earliest=0, end=100)
        self.gone_at = gone_at

    def poll(self, timeout_ms, max_records):
        from kafka.errors import UnknownTopicOrPartitionError

        if self.pos >= self.gone_at:
            raise UnknownTopicOrPartitionError("t-0")
        return super().poll(timeout_ms, max_records)


def test_a_deleted_topic_reports_the_rest_of_the_range_lost_or_fails():
    from dstream_exactly_once import DataLossError
    from dstream_exactly_once.kafka._params import parse_kafka_params
    from dstream_exactly_once.kafka._reader_kafka_python import read_range

    config = parse_kafka_params({"bootstrap.servers": "127.0.0.1:9"})
    reported = []
    consumer = _DeletedTopic(gone_at=14)
    blocks = list(read_range(config, OffsetRange("t", 0, 0, 30), fail_on_data_loss=False,
                             cache=_cache_of(consumer), on_data_loss=reported.append))
    assert [o for b in blocks for o in b.offsets] == list(range(14))
    assert [(d.start, d.end, d.lost) for d in reported] == [(14, 30, 16)]
    assert "topic or partition is gone" in reported[0].reason and consumer.closed  # not reused
    with pytest.raises(DataLossError):
        list(read_range(config, OffsetRange("t", 0, 0, 30), cache=_cache_of(_DeletedTopic(gone_at=14))))
