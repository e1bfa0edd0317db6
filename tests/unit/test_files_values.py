"""File source value types: FileRange (kind "file") and the options with the seed's names."""

from __future__ import annotations

import json
import pickle

import pytest

from dstream_exactly_once.core._ranges import check_ranges, decode_range, encode_range, range_kind
from dstream_exactly_once.errors import ConfigurationError, OffsetRangeError
from dstream_exactly_once.files import FileRange, FileSourceOptions


def _range(**kw):
    base = dict(file_id="abc123", path="/var/log/app.log", from_byte=10, until_byte=25, fingerprint="ff",
                sample_length=25, tail="ee", tail_length=15, dev=1, inode=2, aliases=((1, 9, 20),))
    base.update(kw)
    return FileRange(**base)


def test_file_range_reads_like_an_offset_range_and_round_trips():
    r = _range()
    assert (r.path, r.fromOffset, r.untilOffset, r.count()) == ("/var/log/app.log", 10, 25, 15)
    assert r.position_key == "file:abc123" and (r.start, r.end) == (10, 25)
    assert range_kind("file") is FileRange
    assert decode_range(json.loads(json.dumps(encode_range(r)))) == r
    assert pickle.loads(pickle.dumps(r)) == r and hash(r) == hash(_range())
    meta = r.position_meta()
    assert meta["fingerprint"] == "ff" and meta["sample_length"] == 25 and meta["path"] == r.path
    assert (meta["dev"], meta["inode"], meta["tail"], meta["aliases"]) == (1, 2, "ee", [[1, 9, 20]])
    assert FileRange.parse_position_key("file:abc123") == "abc123"
    assert FileRange.parse_position_key("topic/0") is None
    assert check_ranges([r, _range(file_id="other")], "ranges")


@pytest.mark.parametrize("kw, match", [
    (dict(from_byte=30), "from_byte 30 > until_byte 25"),
    (dict(path="relative.log"), "absolute"),
    (dict(file_id="a/b"), "file_id"),
    (dict(until_byte=-1), "until_byte"),
    (dict(tail_length=40, until_byte=30, from_byte=0), "tail_length"),
    (dict(aliases=((1, 2),)), "aliases"),
])
def test_file_range_refuses_bad_values(kw, match):
    with pytest.raises(OffsetRangeError, match=match):
        _range(**kw)


def test_options_defaults_are_the_seeds():
    o = FileSourceOptions.from_mapping()
    assert (o.starting_offsets, o.bytes_max, o.md5_check_enabled, o.md5_sample_length) == (
        "earliest", 2147483647, True, 1024)
    assert (o.line_decoding, o.line_overflow, o.line_max_bytes) == ("strict", "split", 1 << 20)
    assert o.fail_on_data_loss is False  # log shippers' behaviour: skip a lost range and report it


def test_fail_on_data_loss_from_spark_conf_or_options():
    assert FileSourceOptions.from_mapping(None, {"spark.aof.fail.on.data.loss": "true"}).fail_on_data_loss is True
    assert FileSourceOptions.from_mapping({"fail.on.data.loss": False},
                                          {"spark.aof.fail.on.data.loss": "true"}).fail_on_data_loss is False


def test_options_from_spark_conf_and_options_win():
    conf = {"spark.aof.bytes.max": "4096", "spark.aof.md5.check.enabled": "false", "spark.master": "local",
            "spark.aof.starting.offsets": "latest"}
    o = FileSourceOptions.from_mapping({"starting.offsets": "earliest", "exclude": "*.gz, *.tmp"}, conf)
    assert (o.bytes_max, o.md5_check_enabled, o.starting_offsets) == (4096, False, "earliest")
    assert o.exclude == ("*.gz", "*.tmp") and o.sample_length == 0


@pytest.mark.parametrize("options, match", [
    ({"starting.offsets": "middle"}, r"'starting\.offsets'.*\['earliest', 'latest'\].*'middle'"),
    ({"bytes.max": "0"}, r"'bytes\.max'.*\[5, 2147483647\].*0"),
    ({"bytes.max": "lots"}, r"'bytes\.max'.*'lots'"),
    ({"md5.check.enabled": "yes"}, r"'md5\.check\.enabled'.*true or false.*'yes'"),
    ({"fail.on.data.loss": "sometimes"}, r"'fail\.on\.data\.loss'.*true or false.*'sometimes'"),
    ({"md5.sample.length": -5}, r"'md5\.sample\.length'.*-5"),
    ({"line.decoding": "latin-1"}, r"'line\.decoding'.*'latin-1'"),
    ({"line.max.bytes": 100, "bytes.max": 100}, r"'line\.max\.bytes' \(100\) must be less than 'bytes\.max'"),
    ({"exclude.regex": "("}, r"'exclude\.regex'.*'\('"),
    ({"bytes.maximum": 3}, r"unknown file source option 'bytes\.maximum'"),
])
def test_bad_options_name_key_value_and_allowed(options, match):
    with pytest.raises(ConfigurationError, match=match):
        FileSourceOptions.from_mapping(options)


def test_unknown_spark_aof_conf_key_refused():
    with pytest.raises(ConfigurationError, match=r"'spark\.aof\.nope' in Spark conf"):
        FileSourceOptions.from_mapping(None, {"spark.aof.nope": "1"})


def test_files_package_never_imports_spark():
    import ast
    import pathlib

    import dstream_exactly_once.files as files

    for path in pathlib.Path(files.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                mods = [node.module or ""]
            else:
                continue
            assert not any(m.split(".")[0] in ("pyspark", "py4j") or "streaming" in m for m in mods), (path, mods)
