"""The one conf parser (core/_options.py): kinds, bounds, one error shape, unknown keys listed."""

from __future__ import annotations

import pytest

from dstream_exactly_once._checks import is_int, is_number
from dstream_exactly_once.core._options import Option, check_known, parse_duration
from dstream_exactly_once.errors import ConfigurationError
from dstream_exactly_once.files._options import FileSourceOptions
from dstream_exactly_once.kafka._planner import RateLimit
from dstream_exactly_once.kafka.spark._direct import ReadOptions
from dstream_exactly_once.streaming._backpressure import rate_controller_from_conf


@pytest.mark.parametrize(("option", "raw", "expected"), [
    (Option("k", "int", 0, low=0), " 12 ", 12),
    (Option("k", "bool", False), "TRUE", True),
    (Option("k", "float", 0.0, low=0), "0.5", 0.5),
    (Option("k", "duration", 1.0), "500ms", 0.5),
    (Option("k", "duration", 1.0), "2min", 120.0),
    (Option("k", "duration", 1.0), "90", 90.0),
    (Option("k", "enum", "a", allowed=("a", "b")), " B ", "b"),
    (Option("k", "str", None), "x", "x"),
])
def test_conf_strings_become_typed_values(option, raw, expected):
    assert option.read({"k": raw}) == expected
    assert option.read({}) == option.default
    assert option.read(None) == option.default


@pytest.mark.parametrize(("option", "raw", "allowed"), [
    (Option("k", "int", 0, low=1, high=9), "0", "an integer in [1, 9]"),
    (Option("k", "int", 0, low=1), "1.5", "an integer >= 1"),
    (Option("k", "int", 0), True, "an integer"),
    (Option("k", "bool", False), "yes", "true or false"),
    (Option("k", "float", 0.0, low=0), "-1", "a number >= 0"),
    (Option("k", "float", 0.0), "nan", "a number"),
    (Option("k", "duration", 1.0), "soon", "a duration such as"),
    (Option("k", "enum", "a", allowed=("a", "b")), "c", "one of ['a', 'b']"),
    (Option("k", "str", None), "", "a non-empty string"),
])
def test_one_error_shape_names_key_allowed_and_value(option, raw, allowed):
    with pytest.raises(ConfigurationError) as info:
        option.read({"k": raw})
    message = str(info.value)
    assert message.startswith(f"Spark conf 'k' must be {allowed}") and message.endswith(f"got {raw!r}"), message


def test_unknown_option_lists_every_allowed_option():
    with pytest.raises(ConfigurationError, match=r"unknown thing option 'c' in options; known options: \['a', 'b'\]"):
        check_known(["a", "c"], ["b", "a"], "thing option", "options")
    with pytest.raises(ConfigurationError) as info:
        FileSourceOptions.from_mapping({"no.such": 1})
    for name in ("bytes.max", "exclude", "fail.on.data.loss", "line.overflow", "starting.offsets"):
        assert repr(name) in str(info.value)


def test_a_bad_option_table_is_refused():
    with pytest.raises(ConfigurationError, match="kind must be one of"):
        Option("k", "sequence")
    with pytest.raises(ConfigurationError, match="allowed values go with kind 'enum' only"):
        Option("k", "int", allowed=("a",))


def test_durations_in_spark_units():
    assert parse_duration("x", "1h") == 3600.0
    assert parse_duration("x", 3) == 3.0
    with pytest.raises(ConfigurationError, match="'x' must be a duration"):
        parse_duration("'x'", "-3s")


def test_readers_share_the_parser():
    """The Kafka read options, rate limits, backpressure and file options refuse through one shape."""
    cases = [
        (lambda: ReadOptions({"spark.streaming.kafka.failOnDataLoss": "maybe"}),
         "Spark conf 'spark.streaming.kafka.failOnDataLoss' must be true or false, got 'maybe'"),
        (lambda: ReadOptions({"spark.network.timeout": "two minutes"}),
         "Spark conf 'spark.network.timeout' must be a duration"),
        (lambda: RateLimit.from_spark_conf({"spark.streaming.kafka.minRatePerPartition": "-1"}),
         "Spark conf 'spark.streaming.kafka.minRatePerPartition' must be an integer >= 0, got '-1'"),
        (lambda: rate_controller_from_conf({"spark.streaming.backpressure.enabled": "true",
                                            "spark.streaming.backpressure.pid.integral": "-1"}, 1000),
         "Spark conf 'spark.streaming.backpressure.pid.integral' must be a number >= 0, got '-1'"),
        (lambda: FileSourceOptions.from_mapping({"bytes.max": "3"}), "option 'bytes.max' must be an integer in [5, "),
    ]
    for build, message in cases:
        with pytest.raises(ConfigurationError) as info:
            build()
        assert str(info.value).startswith(message), str(info.value)


def test_read_options_from_conf():
    opts = ReadOptions({"spark.network.timeout": "30s", "spark.streaming.kafka.failOnDataLoss": "false"})
    assert (opts.poll_timeout_ms, opts.fail_on_data_loss) == (30000, False)
    assert ReadOptions({"spark.streaming.kafka.consumer.poll.ms": "250"}).poll_timeout_ms == 250
    assert ReadOptions(None).poll_timeout_ms == 120000


def test_is_int_and_is_number_refuse_bools():
    assert is_int(3) and not is_int(True) and not is_int(3.0)
    assert is_number(3) and is_number(2.5) and not is_number(False) and not is_number("3")


def test_unknown_store_options_have_one_message(tmp_path):
    from dstream_exactly_once.stores import open_store

    messages = []
    for url, options in ((f"sqlite:///{tmp_path}/x.db", {"bogus": 1}), (f"sqlite:///{tmp_path}/x.db?bogus=1", {})):
        with pytest.raises(ConfigurationError) as info:
            open_store(url, "app", **options)
        messages.append(str(info.value))
    assert messages[0] == "unknown store option(s) bogus for sqlite:// stores; supported: timeout, create_dirs"
    assert messages[1].startswith("unknown store option(s) bogus in 'sqlite:///") and messages[1].endswith(
        "; supported: timeout, create_dirs")
    assert not list(tmp_path.iterdir())
