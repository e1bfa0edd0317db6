"""HTTP transport for Doris: one request on a raw socket with ``Expect: 100-continue``, plus redirects.

Why not plain ``http.client``: a Stream Load goes to the FE, which answers ``307`` with a BE
address *before* the body is sent. ``http.client`` sends headers and body in one go, so the whole
body would travel to the FE only to be thrown away (and some FEs reset the connection while it is
still being written). Here the headers go first; the body follows on ``100 Continue``, or after
``expect_continue_timeout_s`` when the server (or a proxy) never sends one; a final answer that
comes before the body (the redirect, ``401``) is read without sending the body at all.

Redirects are followed by re-sending the request — every header (credentials included, like
``curl --location-trusted``) and the body — to the new address. The transport holds no secrets
itself: credentials arrive as request headers and are never logged; URLs are logged through
:func:`~dstream_exactly_once.stores._url.redact_url`.

The transport does not retry and does not interpret answers: that is the client's job
(:mod:`._client`). Connection failures surface as the exceptions in :data:`CONNECTION_ERRORS`.
"""

from __future__ import annotations

import http.client
import io
import logging
import select
import socket
import ssl
import urllib.parse
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from ..._redaction import redact_url

__all__ = ["CONNECTION_ERRORS", "HttpResponse", "HttpTransport"]

logger = logging.getLogger(__name__)

#: What a failed connection, a reset or a malformed answer raises (worth retrying).
CONNECTION_ERRORS = (OSError, http.client.HTTPException)

_REDIRECTS = (301, 302, 303, 307, 308)
_MAX_LINE = 65537


@dataclass(frozen=True)
class HttpResponse:
    """A complete HTTP answer: status, headers, the whole body and the URL that gave it."""

    status: int
    reason: str
    headers: http.client.HTTPMessage
    body: bytes
    url: str

    def text(self) -> str:
        """The body as text (UTF-8, undecodable bytes replaced), stripped."""
        return self.body.decode("utf-8", "replace").strip()

    def snippet(self) -> str:
        """The start of the body, for error messages (at most 300 characters)."""
        text = self.text()
        return text if len(text) <= 300 else text[:300] + "…"


class _PrefixedRaw(io.RawIOBase):
    """Bytes already read from a socket, then the rest of the buffered socket file."""

    def __init__(self, prefix: bytes, rest: io.BufferedReader) -> None:
        self._prefix = prefix
        self._rest = rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        if self._prefix:
            n = min(len(view), len(self._prefix))
            view[:n] = self._prefix[:n]
            self._prefix = self._prefix[n:]
            return n
        data = self._rest.read1(len(view))
        view[: len(data)] = data
        return len(data)


class _ResponseSource:
    """What ``http.client.HTTPResponse`` reads from: our buffered socket file (plus a peeked line)."""

    def __init__(self, fp: io.BufferedReader, prefix: bytes) -> None:
        self._fp = fp
        self._prefix = prefix

    def makefile(self, mode: str, *args: Any, **kwargs: Any) -> io.BufferedReader:
        if not self._prefix:
            return self._fp
        return io.BufferedReader(_PrefixedRaw(self._prefix, self._fp))


def _readable(sock: socket.socket, timeout: float) -> bool:
    if isinstance(sock, ssl.SSLSocket) and sock.pending():
        return True
    readable, _, _ = select.select([sock], [], [], timeout)
    return bool(readable)


def _status_code(status_line: bytes) -> Optional[int]:
    parts = status_line.split(None, 2)
    if len(parts) >= 2 and parts[0].startswith(b"HTTP/") and parts[1].isdigit():
        return int(parts[1])
    return None


class HttpTransport:
    """Requests to one HTTP(S) server (the Doris FE), following its redirects; no retries.

    ``base_url`` is ``scheme://host[:port]`` (already validated by the client);
    ``request_timeout_s`` bounds each socket operation, ``expect_continue_timeout_s`` is how long
    the body waits for ``100 Continue``, ``max_redirects`` how many redirects one request follows.
    A new connection per request (``Connection: close``): a Stream Load is large and rare, and a
    redirect changes the host anyway. Pickles (it holds settings only).
    """

    def __init__(self, base_url: str, *, request_timeout_s: float, expect_continue_timeout_s: float,
                 max_redirects: int) -> None:
        self.base_url = base_url
        self.request_timeout_s = request_timeout_s
        self.expect_continue_timeout_s = expect_continue_timeout_s
        self.max_redirects = max_redirects

    def __repr__(self) -> str:
        return (f"HttpTransport({redact_url(self.base_url)!r}, request_timeout_s={self.request_timeout_s:g}, "
                f"max_redirects={self.max_redirects})")

    def request(self, method: str, path: str, headers: Mapping[str, str], body: bytes = b"", *,
                expect_continue: bool = False) -> HttpResponse:
        """Send ``method path`` to the server, following redirects (headers and body re-sent).

        Raises one of :data:`CONNECTION_ERRORS` on a connection failure, a redirect without a
        ``Location``, to a non-HTTP URL, or more than ``max_redirects`` redirects.
        """
        url = self.base_url + path
        for _ in range(self.max_redirects + 1):
            response = self.send_once(method, url, headers, body, expect_continue=expect_continue)
            if response.status not in _REDIRECTS:
                return response
            location = response.headers.get("Location")
            if not location:
                raise http.client.HTTPException(f"HTTP {response.status} redirect without a Location header")
            url = urllib.parse.urljoin(url, location)
            if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
                raise http.client.HTTPException(f"redirect to unsupported URL {redact_url(url)!r}")
            logger.debug("Doris %s %s redirected to %s", method, path, redact_url(url))
        raise http.client.HTTPException(f"more than {self.max_redirects} redirects")

    def send_once(self, method: str, url: str, headers: Mapping[str, str], body: bytes, *,
                  expect_continue: bool = False) -> HttpResponse:
        """One request to ``url`` on a new connection; the answer as is (redirects included)."""
        parts = urllib.parse.urlsplit(url)
        conn_cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        conn = conn_cls(parts.hostname or "", parts.port, timeout=self.request_timeout_s)
        fp: Optional[io.BufferedReader] = None
        try:
            conn.putrequest(method, parts.path + (f"?{parts.query}" if parts.query else ""),
                            skip_accept_encoding=True)
            for name, value in headers.items():
                conn.putheader(name, value)
            if method in ("PUT", "POST"):
                conn.putheader("Content-Length", str(len(body)))
            if body and expect_continue:
                conn.putheader("Expect", "100-continue")
            conn.putheader("Connection", "close")
            conn.endheaders()  # headers only: the body waits for "100 Continue"
            sock = conn.sock
            if sock is None:  # endheaders() connects; a None here is a broken connection
                raise http.client.HTTPException(f"no connection to {redact_url(url)!r}")
            fp = sock.makefile("rb")
            prefix = b""
            if body:
                send_body = True
                if expect_continue and _readable(sock, self.expect_continue_timeout_s):
                    line = fp.readline(_MAX_LINE)
                    if _status_code(line) == 100:  # interim answer: skip it, then send
                        while fp.readline(_MAX_LINE) not in (b"\r\n", b"\n", b""):
                            pass
                    else:  # a final answer before the body (the FE's redirect, 401, …)
                        prefix, send_body = line, False
                if send_body:
                    try:
                        sock.sendall(body)
                    except OSError:
                        if not _readable(sock, 0):  # no early answer to read: a connection error
                            raise
            response = http.client.HTTPResponse(_ResponseSource(fp, prefix), method=method)  # type: ignore[arg-type]
            response.begin()
            data = response.read()
            return HttpResponse(response.status, response.reason, response.headers, data, url)
        finally:
            if fp is not None:
                fp.close()
            conn.close()
