"""One secret scrubber (_redaction.py): store URL passwords and Doris passwords are registered where
they are parsed, so no repr, error message or log line (DEBUG included) shows them."""

from __future__ import annotations

import base64
import logging
import socket
from typing import List

import pytest

from dstream_exactly_once._redaction import redact, redact_exception_chain
from dstream_exactly_once.errors import DStreamExactlyOnceError
from dstream_exactly_once.sinks.doris import DorisStreamLoadClient
from dstream_exactly_once.stores import open_store
from dstream_exactly_once.stores._url import parse_url
from dstream_exactly_once.stores.redis._store import RedisStore
from dstream_exactly_once.stores.sql._postgres import PostgresStore


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def texts(caplog: pytest.LogCaptureFixture) -> List[str]:
    """Every log line as a handler would write it (message and traceback)."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(name)s %(message)s"))
    return [handler.format(r) for r in caplog.records]


@pytest.mark.parametrize("scheme", ["postgresql", "redis"])
def test_store_url_password_never_shown(scheme: str, caplog: pytest.LogCaptureFixture) -> None:
    password = f"{scheme}-Pw-7q%40Zk"  # percent-encoded '@' in the URL
    decoded = password.replace("%40", "@")
    url = f"{scheme}://deo:{password}@127.0.0.1:{closed_port()}/0?connect_timeout=1"
    with caplog.at_level(logging.DEBUG):
        store = {"postgresql": PostgresStore, "redis": RedisStore}[scheme](url, "secret-app")
        with pytest.raises(DStreamExactlyOnceError) as info:
            open_store(url, "secret-app")  # connects eagerly: the server is not there
        logging.getLogger("some.driver").debug("connecting with %s (password %s)", url, decoded)
    shown = [repr(store), str(info.value), repr(info.value), repr(info.value.__cause__)] + texts(caplog)
    assert any("connecting with" in t for t in shown)
    for text in shown:
        assert password not in text and decoded not in text, text


def test_store_url_spellings_are_scrubbed_from_backend_text() -> None:
    parsed = parse_url("postgresql://u:a%2Fb-Sec@h/db?password=q-Sec2")
    backend = RuntimeError("could not connect: password=a/b-Sec, a%2Fb-Sec and q-Sec2 refused")
    wrapped = ValueError("wrapped")
    wrapped.__cause__ = backend
    redact_exception_chain(wrapped)
    assert str(backend) == "could not connect: password=***, *** and *** refused"
    assert parsed.scrub("a/b-Sec") == "***" and redact("q-Sec2") == "***"
    assert "a/b-Sec" not in repr(parsed) and "a%2Fb-Sec" not in repr(parsed)


def test_doris_password_and_basic_token_never_shown(caplog: pytest.LogCaptureFixture) -> None:
    password = "Doris-Pw-3vX"
    client = DorisStreamLoadClient(f"http://127.0.0.1:{closed_port()}", "db", "t", user="root",
                                   password=password, max_retries=0, backoff_s=0, request_timeout_s=1)
    token = base64.b64encode(f"root:{password}".encode()).decode("ascii")
    with caplog.at_level(logging.DEBUG):
        with pytest.raises(DStreamExactlyOnceError) as info:
            client.load("lbl", [("a", 1)])
        logging.getLogger("some.http").debug("headers %r, password %s", {"Authorization": f"Basic {token}"},
                                             password)
    shown = [repr(client), str(info.value), repr(info.value.__cause__)] + texts(caplog)
    assert any("headers" in t for t in shown)
    for text in shown:
        assert password not in text and token not in text, text
