"""The Doris Stream Load client over real HTTP against the protocol double (and, opt-in, a real FE)."""

from __future__ import annotations

import json
import logging
import os
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator

import pytest

from dstream_exactly_once.errors import ConfigurationError, LoadRejectedError, SinkError
from dstream_exactly_once.sinks.doris import DorisStreamLoadClient, LoadState, TxnOutcome
from dstream_exactly_once.testing._doris_double import DorisProtocolDouble

PASSWORD = "p4ss-" + uuid.uuid4().hex[:8]
DB, TABLE = "sales", "orders"


@pytest.fixture
def doris() -> Iterator[DorisProtocolDouble]:
    with DorisProtocolDouble(user="loader", password=PASSWORD) as double:
        yield double


def make_client(doris: DorisProtocolDouble, **kwargs: object) -> DorisStreamLoadClient:
    args: dict = {"user": "loader", "password": PASSWORD, "backoff_s": 0.01, "max_backoff_s": 0.05,
                  "poll_interval_s": 0.02, "request_timeout_s": 10, "column_separator": ","}
    args.update(kwargs)
    return DorisStreamLoadClient(doris.fe_url, DB, TABLE, **args)


@pytest.fixture
def client(doris: DorisProtocolDouble) -> DorisStreamLoadClient:
    return make_client(doris)


def label() -> str:
    return "lbl_" + uuid.uuid4().hex[:12]


# ---------------------------------------------------------------- Stream Load
def test_load_follows_the_redirect_with_credentials_and_body(doris: DorisProtocolDouble,
                                                             client: DorisStreamLoadClient) -> None:
    lbl = label()
    result = client.load(lbl, [(1, "a"), (2, None)])
    assert result.status == "Success" and not result.replayed
    assert result.loaded_rows == 2 and result.label == lbl and result.txn_id is not None
    assert doris.rows(DB, TABLE) == [("1", "a"), ("2", None)]
    fe, be = doris.requests_to("fe", "stream_load"), doris.requests_to("be", "stream_load")
    assert len(fe) == len(be) == 1
    assert fe[0]["authorized"] and fe[0]["body_bytes"] == 0  # the body waited for the BE
    assert be[0]["authorized"] and be[0]["body_bytes"] == len(b"1,a\n2,\\N\n")
    assert be[0]["headers"]["label"] == lbl and be[0]["headers"]["expect"] == "100-continue"
    assert be[0]["headers"]["column_separator"] == ","


def test_json_load_with_columns(doris: DorisProtocolDouble) -> None:
    c = make_client(doris, format="json", columns=["id", "name"])
    c.load(label(), [{"id": 1, "name": "x"}, {"id": 2, "name": "y"}])
    assert doris.rows(DB, TABLE) == [{"id": 1, "name": "x"}, {"id": 2, "name": "y"}]
    headers = doris.requests_to("be", "stream_load")[0]["headers"]
    assert headers["strip_outer_array"] == "true" and headers["columns"] == "id,name"


def test_duplicate_label_is_applied_once(doris: DorisProtocolDouble, client: DorisStreamLoadClient) -> None:
    lbl = label()
    first = client.load(lbl, [(1, "a")])
    second = client.load(lbl, [(1, "a")])
    assert not first.replayed and second.replayed
    assert second.status == "Label Already Exists" and second.existing_job_status == "FINISHED"
    assert second.loaded_rows == 0 and second.txn_id == first.txn_id
    assert doris.rows(DB, TABLE) == [("1", "a")]


def test_labels_are_per_database(doris: DorisProtocolDouble, client: DorisStreamLoadClient) -> None:
    lbl = label()
    client.load(lbl, [(1, "a")])
    other = DorisStreamLoadClient(doris.fe_url, "other_db", TABLE, user="loader", password=PASSWORD)
    assert not other.load(lbl, [(1, "a")]).replayed
    assert doris.rows("other_db", TABLE) == [("1", "a")]


def test_retries_after_injected_500s(doris: DorisProtocolDouble, client: DorisStreamLoadClient) -> None:
    doris.fail_next(3, status=500, endpoint="stream_load")
    result = client.load(label(), [(1, "a")])
    assert result.attempts == 4 and not result.replayed
    assert doris.rows(DB, TABLE) == [("1", "a")]


def test_gives_up_after_max_retries(doris: DorisProtocolDouble, caplog: pytest.LogCaptureFixture) -> None:
    c = make_client(doris, max_retries=2)
    doris.fail_next(10, status=503)
    lbl = label()
    with caplog.at_level(logging.DEBUG), pytest.raises(SinkError) as info:
        c.load(lbl, [(1, "a")])
    message = str(info.value)
    assert f"{DB}.{TABLE}" in message and lbl in message and "3 attempts" in message and "503" in message
    assert info.value.retriable
    assert not isinstance(info.value, LoadRejectedError)
    assert doris.rows(DB, TABLE) == []
    assert PASSWORD not in caplog.text and PASSWORD not in message


def test_doris_fail_status_is_retried_then_reported(doris: DorisProtocolDouble) -> None:
    c = make_client(doris, max_retries=1)
    doris.fail_next_loads(1, message="[INTERNAL_ERROR]tablet writer failed")
    assert c.load(label(), [(1, "a")]).attempts == 2
    doris.fail_next_loads(5, message="[INTERNAL_ERROR]too many versions")
    lbl = label()
    with pytest.raises(SinkError, match=r"too many versions") as info:
        c.load(lbl, [(1, "b")])
    assert lbl in str(info.value)
    assert doris.rows(DB, TABLE) == [("1", "a")]


def test_connection_dropped_after_apply_is_counted_once(doris: DorisProtocolDouble,
                                                         client: DorisStreamLoadClient) -> None:
    lbl = label()
    doris.drop_next_after_apply()
    result = client.load(lbl, [(1, "a"), (2, "b")])
    assert result.replayed and result.attempts == 2
    assert result.existing_job_status == "FINISHED"
    assert doris.rows(DB, TABLE) == [("1", "a"), ("2", "b")]  # exactly once


def test_connection_dropped_without_label_duplicates(doris: DorisProtocolDouble,
                                                      client: DorisStreamLoadClient) -> None:
    """Without a label the retry cannot be recognised: at-least-once, as documented."""
    doris.drop_next_after_apply()
    client.load(None, [(1, "a")])
    assert doris.rows(DB, TABLE) == [("1", "a"), ("1", "a")]


def test_running_label_is_waited_for(doris: DorisProtocolDouble, client: DorisStreamLoadClient) -> None:
    lbl = label()
    doris.hold_s = 0.5
    first: dict = {}
    thread = threading.Thread(target=lambda: first.setdefault("r", client.load(lbl, [(1, "a")])))
    thread.start()
    try:
        deadline = 50
        while doris.label_state(DB, lbl) != "PREPARE" and deadline:
            threading.Event().wait(0.01)
            deadline -= 1
        assert client.get_load_state(lbl) is LoadState.PREPARE
        doris.hold_s = 0.0
        second = client.load(lbl, [(1, "a")])
    finally:
        thread.join()
    assert second.replayed and not first["r"].replayed
    assert doris.rows(DB, TABLE) == [("1", "a")]


def test_wrong_password_is_a_clear_error_without_the_password(doris: DorisProtocolDouble) -> None:
    wrong = "wrong-" + PASSWORD
    c = make_client(doris, password=wrong)
    with pytest.raises(SinkError) as info:
        c.load(label(), [(1, "a")])
    message = str(info.value)
    assert "credentials" in message and "'loader'" in message and "401" in message
    assert wrong not in message and PASSWORD not in message
    assert not info.value.retriable
    assert isinstance(info.value, LoadRejectedError)
    assert len(doris.requests_to("fe")) == 1  # not retried
    assert doris.rows(DB, TABLE) == []
    with pytest.raises(SinkError, match="credentials"):
        c.get_load_state("x")


def test_bad_config_is_refused_before_any_request(doris: DorisProtocolDouble) -> None:
    with pytest.raises(ConfigurationError):
        DorisStreamLoadClient(doris.fe_url, DB, TABLE, format="parquet")
    with pytest.raises(ConfigurationError):
        DorisStreamLoadClient(doris.fe_url, DB, "")
    assert doris.requests == []


def test_empty_load_succeeds(doris: DorisProtocolDouble, client: DorisStreamLoadClient) -> None:
    assert client.load(label(), []).loaded_rows == 0


# ---------------------------------------------------------------- the public client API the sink uses
def test_stream_load_of_an_encoded_body(doris: DorisProtocolDouble, client: DorisStreamLoadClient) -> None:
    lbl = label()
    body = client.encode_rows([(1, "a"), (2, "b")])
    result = client.stream_load(lbl, body, two_phase_commit=True)
    assert result.two_phase_commit and result.txn_id is not None and result.loaded_rows == 2
    assert client.get_load_state(lbl) is LoadState.PRECOMMITTED and doris.rows(DB, TABLE) == []
    assert client.stream_load(lbl + "_v", body).status == "Success"
    assert client.commit_txn(result.txn_id) is TxnOutcome.COMMITTED
    assert sorted(doris.rows(DB, TABLE)) == [("1", "a"), ("1", "a"), ("2", "b"), ("2", "b")]
    assert client.describe(lbl) == f"Doris Stream Load into {DB}.{TABLE} (label {lbl!r})"


def test_public_client_api_never_shows_the_password(doris: DorisProtocolDouble,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    wrong = "wr0ng-" + PASSWORD
    c = make_client(doris, password=wrong)
    calls = [lambda: c.stream_load(label(), c.encode_rows([(1, "a")]), two_phase_commit=True),
             lambda: c.commit_txn(1), lambda: c.abort_txn("some_label"),
             lambda: c.resolve_in_doubt("some_label", 1, "commit")]
    with caplog.at_level(logging.DEBUG):
        for call in calls:
            with pytest.raises(LoadRejectedError) as info:
                call()
            assert "credentials" in str(info.value) and not info.value.retriable
            assert wrong not in str(info.value) and PASSWORD not in str(info.value)
        make_client(doris).stream_load(label(), b"1,a\n")  # a redirect, logged at DEBUG
    assert "redirected" in caplog.text
    assert wrong not in caplog.text and PASSWORD not in caplog.text
    for text in (repr(c), repr(c.transport), repr(vars(c.transport))):
        assert wrong not in text


# ---------------------------------------------------------------- two-phase commit
def test_precommit_then_commit(doris: DorisProtocolDouble, client: DorisStreamLoadClient) -> None:
    lbl = label()
    txn = client.precommit(lbl, [(1, "a")])
    assert doris.requests_to("be", "stream_load")[0]["headers"]["two_phase_commit"] == "true"
    assert client.get_load_state(lbl) is LoadState.PRECOMMITTED
    assert doris.rows(DB, TABLE) == []  # invisible until committed
    assert client.commit_txn(txn) is TxnOutcome.COMMITTED
    assert client.get_load_state(lbl) is LoadState.VISIBLE
    assert doris.rows(DB, TABLE) == [("1", "a")]
    assert client.commit_txn(txn) is TxnOutcome.ALREADY_COMMITTED  # idempotent
    assert doris.rows(DB, TABLE) == [("1", "a")]
    assert doris.requests_to("be", "2pc")  # 2PC requests are redirected too
    with pytest.raises(SinkError, match="already committed") as info:
        client.abort_txn(txn)
    assert not info.value.retriable
    assert isinstance(info.value, LoadRejectedError)


def test_precommit_of_a_finished_label_returns_its_txn(client: DorisStreamLoadClient) -> None:
    lbl = label()
    txn = client.precommit(lbl, [(1, "a")])
    client.commit_txn(txn)
    assert client.precommit(lbl, [(1, "a")]) == txn
    assert client.commit_txn(txn) is TxnOutcome.ALREADY_COMMITTED


def test_abort_by_txn_id_and_by_label(doris: DorisProtocolDouble, client: DorisStreamLoadClient) -> None:
    lbl1, lbl2 = label(), label()
    txn1 = client.precommit(lbl1, [(1, "a")])
    client.precommit(lbl2, [(2, "b")])
    assert client.abort_txn(txn1) is TxnOutcome.ABORTED
    assert client.abort_txn(lbl2) is TxnOutcome.ABORTED
    assert client.abort_txn(txn1) is TxnOutcome.ALREADY_ABORTED
    assert client.get_load_state(lbl1) is LoadState.ABORTED
    with pytest.raises(SinkError, match="rows are lost") as info:
        client.commit_txn(txn1)
    assert not info.value.retriable
    assert isinstance(info.value, LoadRejectedError)
    assert doris.rows(DB, TABLE) == []
    # an aborted label may be used again
    txn3 = client.precommit(lbl1, [(3, "c")])
    assert txn3 != txn1
    client.commit_txn(lbl1)
    assert doris.rows(DB, TABLE) == [("3", "c")]


def test_commit_of_unknown_txn_fails(client: DorisStreamLoadClient) -> None:
    with pytest.raises(SinkError, match="not found"):
        client.commit_txn(987654)
    assert client.abort_txn(987654) is TxnOutcome.ALREADY_ABORTED


def test_precommitted_label_blocks_other_attempts(doris: DorisProtocolDouble, client: DorisStreamLoadClient) -> None:
    lbl = label()
    txn = client.precommit(lbl, [(1, "a")])
    for call in (client.precommit, client.load):
        with pytest.raises(SinkError, match=f"pre-committed transaction {txn}") as info:
            call(lbl, [(1, "a")])
        assert not info.value.retriable
        assert isinstance(info.value, LoadRejectedError)


def test_2pc_commit_retries_after_500(doris: DorisProtocolDouble, client: DorisStreamLoadClient) -> None:
    txn = client.precommit(label(), [(1, "a")])
    doris.fail_next(2, endpoint="2pc")
    assert client.commit_txn(txn) is TxnOutcome.COMMITTED
    assert doris.rows(DB, TABLE) == [("1", "a")]


def test_get_load_state_of_unknown_label(client: DorisStreamLoadClient) -> None:
    assert client.get_load_state(label()) is LoadState.UNKNOWN


def test_get_load_state_after_forgetting(doris: DorisProtocolDouble, client: DorisStreamLoadClient) -> None:
    lbl = label()
    client.load(lbl, [(1, "a")])
    assert client.get_load_state(lbl) is LoadState.VISIBLE
    doris.forget_labels()
    assert client.get_load_state(lbl) is LoadState.UNKNOWN
    assert not client.load(lbl, [(1, "a")]).replayed  # Doris's label memory is not forever
    assert len(doris.rows(DB, TABLE)) == 2


# ---------------------------------------------------------------- resolve_in_doubt
def test_resolve_commits_what_the_store_recorded(doris: DorisProtocolDouble, client: DorisStreamLoadClient) -> None:
    lbl = label()
    txn = client.precommit(lbl, [(1, "a")])
    assert client.resolve_in_doubt(lbl, txn, "commit") is TxnOutcome.COMMITTED
    assert client.resolve_in_doubt(lbl, txn, "commit") is TxnOutcome.ALREADY_COMMITTED
    lbl2 = label()
    client.precommit(lbl2, [(2, "b")])
    assert client.resolve_in_doubt(lbl2, None, "commit") is TxnOutcome.COMMITTED  # by label
    assert doris.rows(DB, TABLE) == [("1", "a"), ("2", "b")]


def test_resolve_aborts_what_the_store_did_not_record(doris: DorisProtocolDouble,
                                                      client: DorisStreamLoadClient) -> None:
    lbl = label()
    client.precommit(lbl, [(1, "a")])
    assert client.resolve_in_doubt(lbl, None, "abort") is TxnOutcome.ABORTED
    assert client.resolve_in_doubt(lbl, None, "abort") is TxnOutcome.ALREADY_ABORTED
    assert client.resolve_in_doubt(label(), None, "abort") is TxnOutcome.ALREADY_ABORTED  # never used
    assert doris.rows(DB, TABLE) == []


def test_resolve_abort_cannot_undo_a_visible_load(client: DorisStreamLoadClient) -> None:
    lbl = label()
    client.load(lbl, [(1, "a")])
    assert client.resolve_in_doubt(lbl, None, "abort") is TxnOutcome.ALREADY_COMMITTED


def test_resolve_commit_after_precommit_timeout_is_data_loss(doris: DorisProtocolDouble,
                                                              client: DorisStreamLoadClient) -> None:
    lbl = label()
    txn = client.precommit(lbl, [(1, "a")])
    doris.expire_precommitted()
    with pytest.raises(SinkError, match="ABORTED.*rows lost") as info:
        client.resolve_in_doubt(lbl, txn, "commit")
    assert lbl in str(info.value) and not info.value.retriable
    assert isinstance(info.value, LoadRejectedError)


def test_resolve_commit_of_forgotten_label_warns(doris: DorisProtocolDouble, client: DorisStreamLoadClient,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        assert client.resolve_in_doubt(label(), 5, "commit") is TxnOutcome.UNKNOWN
    assert "no longer knows" in caplog.text


# ---------------------------------------------------------------- opt-in: a real Doris FE
REAL_DORIS = "set DORIS_FE_URL (and DORIS_USER, DORIS_PASSWORD, DORIS_DB, DORIS_TABLE) to run against a real Doris"


@pytest.mark.skipif(not os.environ.get("DORIS_FE_URL"), reason=REAL_DORIS)
def test_real_doris_fe() -> None:
    """Against a real Doris: the table needs two columns (int, varchar). Leaves 2 rows behind."""
    c = DorisStreamLoadClient(
        os.environ["DORIS_FE_URL"], os.environ["DORIS_DB"], os.environ["DORIS_TABLE"],
        user=os.environ.get("DORIS_USER", "root"), password=os.environ.get("DORIS_PASSWORD", ""),
        column_separator=",", backoff_s=0.5, poll_interval_s=0.5,
    )
    lbl = "deo_test_" + uuid.uuid4().hex
    first = c.load(lbl, [(1, "exactly"), (2, "once")])
    assert first.loaded_rows == 2 and not first.replayed
    assert c.load(lbl, [(1, "exactly"), (2, "once")]).replayed
    assert c.get_load_state(lbl) in (LoadState.VISIBLE, LoadState.COMMITTED)
    lbl2 = lbl + "_2pc"
    txn = c.precommit(lbl2, [(3, "aborted")])
    assert c.get_load_state(lbl2) is LoadState.PRECOMMITTED
    assert c.abort_txn(txn) is TxnOutcome.ABORTED
    assert c.resolve_in_doubt(lbl2, None, "abort") is TxnOutcome.ALREADY_ABORTED


# ---------------------------------------------------------------- a BE that ignores "Expect: 100-continue"
class _NoContinueHandler(BaseHTTPRequestHandler):
    """HTTP/1.0: never sends "100 Continue"; waits for the body, like some proxies do."""

    def do_PUT(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers["Content-Length"]))
        doc = json.dumps({"Status": "Success", "TxnId": 1, "Label": self.headers["label"],
                          "NumberLoadedRows": body.count(b"\n"), "Message": "OK"}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(doc)))
        self.end_headers()
        self.wfile.write(doc)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


def test_body_is_sent_after_the_expect_timeout_when_no_100_continue_comes() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NoContinueHandler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        c = DorisStreamLoadClient(f"http://127.0.0.1:{server.server_address[1]}", DB, TABLE,
                                  expect_continue_timeout_s=0.2, request_timeout_s=5)
        assert c.load(label(), [(1,), (2,), (3,)]).loaded_rows == 3
    finally:
        server.shutdown()
        server.server_close()
