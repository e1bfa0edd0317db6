"""Doris Stream Load client without a server: configuration checks, bodies, headers, secrecy."""

from __future__ import annotations

import ast
import logging
import pathlib
import pickle

import pytest

import dstream_exactly_once
import dstream_exactly_once.sinks.doris as doris_package
from dstream_exactly_once import errors
from dstream_exactly_once.errors import ConfigurationError, LoadRejectedError, SinkError
from dstream_exactly_once.sinks.doris import DorisSink, DorisStreamLoadClient, LoadState, TxnOutcome

SECRET = "s3cr3t-Pa55"


def client(**kwargs: object) -> DorisStreamLoadClient:
    args: dict = {"user": "loader", "password": SECRET}
    args.update(kwargs)
    return DorisStreamLoadClient("http://fe.example:8030", "sales", "orders", **args)


# ---------------------------------------------------------------- configuration
@pytest.mark.parametrize("fmt", ["parquet", "CSVX", "", None, "arrow"])
def test_format_must_be_csv_or_json(fmt: object) -> None:
    with pytest.raises(ConfigurationError, match="format"):
        client(format=fmt)


def test_format_is_case_insensitive() -> None:
    assert client(format="JSON").format == "json"


@pytest.mark.parametrize("table", ["", "  ", None, "a/b", "a b"])
def test_bad_table(table: object) -> None:
    with pytest.raises(ConfigurationError, match="table"):
        DorisStreamLoadClient("http://fe:8030", "db", table)  # type: ignore[arg-type]


@pytest.mark.parametrize("db", ["", None, "x/y"])
def test_bad_database(db: object) -> None:
    with pytest.raises(ConfigurationError, match="database"):
        DorisStreamLoadClient("http://fe:8030", db, "t")  # type: ignore[arg-type]


@pytest.mark.parametrize("url", ["", "fe:8030", "ftp://fe:8030", "http://", "http://fe:8030/api", "http://fe:99999",
                                 "http://fe:8030?x=1"])
def test_bad_fe_url(url: str) -> None:
    with pytest.raises(ConfigurationError, match="fe_url"):
        DorisStreamLoadClient(url, "db", "t")


@pytest.mark.parametrize("url", [f"http://root:{SECRET}@fe:8030", f"http://root:{SECRET}@fe:99999"])
def test_credentials_in_url_are_refused_without_echoing_them(url: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        DorisStreamLoadClient(url, "db", "t")
    assert SECRET not in str(info.value)
    assert "fe_url" in str(info.value)


@pytest.mark.parametrize(("name", "value"), [
    ("max_retries", -1), ("max_retries", 1.5), ("backoff_s", -0.1), ("timeout_s", 0), ("timeout_s", 300000),
    ("max_redirects", -1), ("poll_interval_s", "1"), ("wait_timeout_s", True),
])
def test_bad_numbers(name: str, value: object) -> None:
    with pytest.raises(ConfigurationError, match=name):
        client(**{name: value})


@pytest.mark.parametrize("columns", [[], [""], "", [1, 2], {"a": 1}])
def test_bad_columns(columns: object) -> None:
    with pytest.raises(ConfigurationError, match="columns"):
        client(columns=columns)


def test_separator_must_differ_from_line_delimiter() -> None:
    with pytest.raises(ConfigurationError, match="differ"):
        client(column_separator="\n")
    with pytest.raises(ConfigurationError, match="column_separator"):
        client(column_separator="")


@pytest.mark.parametrize("key", ["label", "LABEL", "two_phase_commit", "Authorization", "txn_id", "format"])
def test_reserved_properties_are_refused(key: str) -> None:
    with pytest.raises(ConfigurationError, match="set by the client"):
        client(properties={key: "x"})


def test_user_must_be_non_empty() -> None:
    with pytest.raises(ConfigurationError, match="user"):
        client(user="")


# ---------------------------------------------------------------- headers and bodies
def test_csv_headers() -> None:
    c = client(columns=["id", "name"], timeout_s=30, properties={"max_filter_ratio": "0.1"})
    headers = c.load_headers("lbl_1_2")
    assert headers == {
        "format": "csv", "timeout": "30", "label": "lbl_1_2", "columns": "id,name",
        "column_separator": "\\x09", "max_filter_ratio": "0.1",
    }
    assert "two_phase_commit" not in headers
    assert c.load_headers("l", two_phase_commit=True)["two_phase_commit"] == "true"
    assert "label" not in c.load_headers(None)


def test_json_headers_strip_outer_array() -> None:
    headers = client(format="json").load_headers("l")
    assert headers["format"] == "json" and headers["strip_outer_array"] == "true"
    assert "column_separator" not in headers


def test_printable_separator_is_sent_as_is_and_others_in_hex() -> None:
    assert client(column_separator=",").load_headers("l")["column_separator"] == ","
    headers = client(column_separator="\x01", line_delimiter="\x02").load_headers("l")
    assert headers["column_separator"] == "\\x01" and headers["line_delimiter"] == "\\x02"


def test_headers_never_carry_the_password() -> None:
    assert SECRET not in repr(client().load_headers("l"))


def test_csv_body() -> None:
    c = client(column_separator=",")
    assert c.encode_rows([(1, "a", None), [2, "b", True], "3,c,x", b"4,d,y"]) == (
        b"1,a,\\N\n2,b,true\n3,c,x\n4,d,y\n")
    assert c.encode_rows([]) == b""


def test_csv_value_with_separator_or_newline_is_refused() -> None:
    c = client(column_separator=",")
    with pytest.raises(ConfigurationError, match="row 1 .*column separator"):
        c.encode_rows([(1, "ok"), (2, "a,b")])
    with pytest.raises(ConfigurationError, match="line delimiter"):
        c.encode_rows([(1, "a\nb")])
    with pytest.raises(ConfigurationError, match="csv format"):
        c.encode_rows([{"id": 1}])


def test_json_body() -> None:
    c = client(format="json")
    assert c.encode_rows([{"id": 1, "name": "é"}, {"id": 2, "name": None}]) == (
        '[{"id":1,"name":"é"},{"id":2,"name":null}]'.encode())
    with pytest.raises(ConfigurationError, match="JSON"):
        c.encode_rows([{"x": object()}])
    with pytest.raises(ConfigurationError, match="JSON"):
        c.encode_rows([{"x": float("nan")}])


# ---------------------------------------------------------------- secrecy and pickling
def test_repr_hides_the_password_and_pickle_round_trips() -> None:
    c = client()
    text = repr(c)
    assert SECRET not in text
    assert "sales" in text and "orders" in text and "loader" in text
    clone = pickle.loads(pickle.dumps(c))
    assert clone.load_headers("x") == c.load_headers("x")
    assert SECRET not in repr(DorisSink(c))


def test_invalid_two_phase_arguments() -> None:
    c = client()
    for bad in ("", "a\r\nX-Evil: 1", None):
        with pytest.raises(ConfigurationError, match="label"):
            c.precommit(bad, [(1,)])  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError, match="label"):
            c.get_load_state(bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="label"):
        c.load("a\nb", [(1,)])
    with pytest.raises(ConfigurationError, match="decision"):
        c.resolve_in_doubt("l", 1, "maybe")
    with pytest.raises(ConfigurationError, match="txn_id"):
        c.resolve_in_doubt("l", -5, "commit")
    with pytest.raises(ConfigurationError, match="transaction"):
        c.commit_txn(-1)
    with pytest.raises(ConfigurationError, match="transaction"):
        c.abort_txn(True)  # type: ignore[arg-type]


def test_sink_configuration() -> None:
    c = client()
    with pytest.raises(ConfigurationError, match="use_labels"):
        DorisSink(c, two_phase_commit=True, use_labels=False)
    with pytest.raises(ConfigurationError, match="client"):
        DorisSink("http://fe:8030")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="strict=True"):
        DorisSink(c, label_app_id="has space")
    sink = DorisSink(c, label_app_id="has space", strict_labels=True)
    assert sink.label_for("ignored", 1, 2).endswith("_1_2")


def test_sink_labels_include_the_table() -> None:
    sink_a = DorisSink(client())
    sink_b = DorisSink(DorisStreamLoadClient("http://fe:8030", "sales", "refunds"))
    assert sink_a.label_for("app-1", 5, 0) == "app_1_orders_5_0"
    assert sink_a.label_for("app-1", 5, 0) != sink_b.label_for("app-1", 5, 0)


def test_unreachable_server_raises_sink_error_after_retries() -> None:
    c = DorisStreamLoadClient("http://127.0.0.1:9", "db", "t", password=SECRET, max_retries=2, backoff_s=0,
                              request_timeout_s=2)
    with pytest.raises(SinkError) as info:
        c.load("lbl", [(1,)])
    message = str(info.value)
    assert "db.t" in message and "'lbl'" in message and "3 attempts" in message
    assert SECRET not in message
    assert info.value.retriable


def test_enums_are_strings() -> None:
    assert LoadState("VISIBLE") is LoadState.VISIBLE
    assert TxnOutcome.ALREADY_COMMITTED == "already_committed"


# ---------------------------------------------------------------- package layout and public client API
def test_import_paths_and_the_rejected_load_error() -> None:
    from dstream_exactly_once import sinks
    from dstream_exactly_once.sinks.doris._client import DorisStreamLoadClient as Client

    assert sinks.DorisSink is DorisSink and sinks.DorisStreamLoadClient is DorisStreamLoadClient is Client
    assert sinks.LoadRejectedError is LoadRejectedError is errors.LoadRejectedError
    assert issubclass(LoadRejectedError, SinkError) and not LoadRejectedError.retriable
    assert "LoadRejectedError" in errors.__all__ and "LoadRejectedError" in (errors.__doc__ or "")
    assert "LoadRejectedError" in dstream_exactly_once.__all__  # every error a user may catch (issue #17)


def test_sink_uses_only_public_client_methods() -> None:
    source = pathlib.Path(doris_package.__file__).with_name("_sink.py").read_text()
    private = [node.attr for node in ast.walk(ast.parse(source))
               if isinstance(node, ast.Attribute) and node.attr.startswith("_")
               and isinstance(node.value, ast.Attribute) and node.value.attr == "client"]
    assert private == []


def test_stream_load_refuses_a_body_that_is_not_bytes() -> None:
    with pytest.raises(ConfigurationError, match="bytes"):
        client().stream_load("l", [(1,)])  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="label"):
        client().stream_load("a\nb", b"1\n")


def test_new_client_api_keeps_the_password_out_of_errors_and_reprs() -> None:
    c = DorisStreamLoadClient("http://127.0.0.1:9", "db", "t", password=SECRET, max_retries=0,
                              request_timeout_s=2)
    with pytest.raises(SinkError) as info:
        c.stream_load("lbl", c.encode_rows([(1,)]), two_phase_commit=True)
    assert "db.t" in str(info.value) and SECRET not in str(info.value)
    assert not isinstance(info.value, LoadRejectedError)  # a connection error may pass: retriable
    assert SECRET not in repr(c.transport) and SECRET not in c.describe("lbl")
    assert SECRET not in repr(pickle.loads(pickle.dumps(c)).transport)


def test_doris_retries_run_on_the_core_retry_policy(caplog: pytest.LogCaptureFixture) -> None:
    """One retry engine: Doris's attempts are paced and logged by core.retry.RetryPolicy."""
    from dstream_exactly_once.sinks.doris._retry import Retry, with_retries

    seen: list = []

    def flaky(number: int) -> object:
        seen.append(number)
        return "loaded" if number == 3 else Retry(f"HTTP 503 on attempt {number}")

    with caplog.at_level(logging.WARNING, logger="dstream_exactly_once.core._retry"):
        assert with_retries("load db.t", flaky, max_retries=4, backoff_s=0, max_backoff_s=0) == "loaded"
    assert seen == [1, 2, 3]
    assert [r.name for r in caplog.records] == ["dstream_exactly_once.core._retry"] * 2
    assert "HTTP 503 on attempt 1" in caplog.records[0].getMessage()
    cause = OSError("connection refused")
    with pytest.raises(SinkError, match=r"load db.t failed after 2 attempts: down") as info:
        with_retries("load db.t", lambda n: Retry("down", cause), max_retries=1, backoff_s=0, max_backoff_s=0)
    assert info.value.__cause__ is cause and info.value.retriable
