"""The executor reader's own record-batch decoding, consumer cache and fetch sizing (no broker, no Spark)."""

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
    from dstream_exactly_once.kafka.reader import _Batch

    expected = [(r.offset, r.key, r.value) for r in _batch(BATCH_CASES[case], compression, 1000)]
    offsets = [o for o, _, _ in expected]
    block = _Batch(_batch(BATCH_CASES[case], compression, 1000)).block("t", 0, 0, 10 ** 9, False)
    assert list(zip(block.offsets, block.keys, block.values, strict=True)) == expected
    # clipped to a range that starts and ends inside the batch
    lo, hi = offsets[1], offsets[-1]
    block = _Batch(_batch(BATCH_CASES[case], compression, 1000)).block("t", 0, lo, hi, False)
    assert list(zip(block.offsets, block.keys, block.values, strict=True)) == [
        e for e in expected if lo <= e[0] < hi]
    assert _Batch(_batch(BATCH_CASES[case], compression, 1000)).block("t", 0, hi + 1, hi + 5, False) is None
    # metadata=True: kafka-python's own decoding of timestamps and headers
    full = _Batch(_batch(BATCH_CASES[case], compression, 1000)).block("t", 0, 0, 10 ** 9, True)
    records = list(_batch(BATCH_CASES[case], compression, 1000))
    assert full.offsets == offsets and full.values == [r.value for r in records]
    assert full.timestamps == [r.timestamp for r in records] and full.headers == [r.headers for r in records]


def test_corrupt_batches_raise_corrupt_record_error():
    from kafka.errors import CorruptRecordError

    from dstream_exactly_once.kafka.reader import _parse_v2

    raw = bytes(_batch(BATCH_CASES["keys, nulls, empties, headers"])._buffer)
    _parse_v2(raw, 61, 4, 0)
    with pytest.raises(CorruptRecordError):
        _parse_v2(raw[:-3], 61, 4, 0)  # truncated
    with pytest.raises(CorruptRecordError):
        _parse_v2(raw + b"\x00", 61, 4, 0)  # trailing bytes
    with pytest.raises(CorruptRecordError):
        _parse_v2(raw, 61, 5, 0)  # fewer records than the header says
    bad = bytearray(raw)
    bad[61] += 2  # first record claims one byte more than it has
    with pytest.raises(CorruptRecordError):
        _parse_v2(bytes(bad), 61, 4, 0)


def test_decoder_failure_yields_the_records_before_it_and_names_the_offset():
    from dstream_exactly_once import utf8_decoder
    from dstream_exactly_once.kafka.reader import RecordBlock
    from dstream_exactly_once.streaming.rdd import _Decoding

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
    from dstream_exactly_once.kafka.params import parse_kafka_params
    from dstream_exactly_once.kafka.reader import ConsumerCache

    config = parse_kafka_params({"bootstrap.servers": "127.0.0.1:9"})
    cache = ConsumerCache()
    a, b = object(), object()
    cache.release(config, OffsetRange("t", 0, 0, 1), a)
    cache.release(config, OffsetRange("t", 1, 0, 1), b)
    assert cache.acquire(config, OffsetRange("t", 1, 5, 6), fresh=False) is b
    assert cache.acquire(config, OffsetRange("u", 7, 0, 1), fresh=False) is a  # reassigned, not a new one
    assert cache.created == 0


def test_fetch_size_follows_the_rest_of_the_range():
    from dstream_exactly_once.kafka import reader

    class Fetcher:
        config = {"max_partition_fetch_bytes": 0}

    reader._BYTES_PER_OFFSET.pop("sized", None)
    reader._size_next_fetch(Fetcher, "sized", 1000, 4 << 20)
    assert Fetcher.config["max_partition_fetch_bytes"] == 4 << 20  # nothing known yet: the maximum
    reader._BYTES_PER_OFFSET["sized"] = 1000.0
    reader._size_next_fetch(Fetcher, "sized", 1000, 4 << 20)
    assert Fetcher.config["max_partition_fetch_bytes"] == 1_250_000
    reader._size_next_fetch(Fetcher, "sized", 3, 4 << 20)
    assert Fetcher.config["max_partition_fetch_bytes"] == reader._MIN_FETCH_BYTES
    reader._size_next_fetch(Fetcher, "sized", 10 ** 6, 1 << 20)
    assert Fetcher.config["max_partition_fetch_bytes"] == 1 << 20
