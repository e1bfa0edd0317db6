"""Doris Stream Load: an HTTP client for the protocol and an exactly-once DStream sink on top of it.

Protocol (Apache Doris "Stream Load" and "Stream Load 2PC" docs)
----------------------------------------------------------------
``PUT http://fe/api/{db}/{table}/_stream_load`` with the rows as the body and the load options as
headers (``label``, ``format``, ``columns``, ``column_separator``, ``timeout``, …), basic auth and
``Expect: 100-continue``. The FE answers ``307`` with a BE address *before* the body is sent; the
client re-sends the request — credentials and body included, like ``curl --location-trusted`` —
to the BE, which loads the rows and answers a JSON document whose ``Status`` is:

- ``Success`` / ``Publish Timeout`` — loaded (the latter becomes visible shortly);
- ``Label Already Exists`` — this label was used before; ``ExistingJobStatus`` says whether that
  job is ``FINISHED`` (its rows are in: a replay, nothing loaded now), ``RUNNING`` (another attempt
  is loading it: wait) or ``PRECOMMITTED`` (a two-phase transaction holds it: in doubt);
- ``Fail`` — nothing loaded; the label may be used again.

With ``two_phase_commit: true`` a successful load is only *pre-committed*: invisible, holding its
label, with a ``TxnId``. ``PUT /api/{db}/_stream_load_2pc`` with ``txn_operation: commit|abort``
and ``txn_id`` (or ``label``) finishes it. Doris aborts a pre-committed transaction after
``stream_load_default_precommit_timeout_second`` (1 h) and forgets finished labels after
``streaming_label_keep_max_second`` (12 h). ``GET /api/{db}/get_load_state?label=…`` reports a
label's state: ``PREPARE``, ``PRECOMMITTED``, ``COMMITTED``, ``VISIBLE``, ``ABORTED`` or ``UNKNOWN``.

Who decides (two-phase mode)
----------------------------
The offset store is the single source of truth. For each partition of a batch:

1. the label's store record is checked: already recorded → the partition was committed before; make
   sure its Doris transaction is committed and report a replay;
2. the rows are pre-committed under the deterministic label (one Stream Load per partition);
3. ONE store transaction records the label, the transaction id and the partition's new offsets
   (offset compare-and-set + epoch check) — this is the commit point;
4. the Doris transaction is committed (``already committed`` counts as success).

A crash between 2 and 3 leaves a pre-committed transaction the store does not know: it is aborted
(by the failing writer itself, or by :meth:`DorisSink.recover` after a restart took a new epoch,
or by Doris after the pre-commit timeout) and the replay loads the rows again. A crash between 3
and 4 leaves one the store recorded: the next attempt or :meth:`DorisSink.recover` commits it.
Only the writer that created a transaction records it, and other parties abort only transactions
of fenced (older-epoch) writers, so a transaction the store recorded is never aborted by us.

Delivery guarantee
------------------
- two-phase mode (default): exactly-once, provided an in-doubt transaction is resolved within
  Doris's pre-commit timeout (1 h). Past it Doris has aborted data the store counted; recovery
  then raises :class:`~dstream_exactly_once.errors.SinkError` naming the label (loud, not silent).
- labels only (``two_phase_commit=False``): exactly-once while a replay happens within Doris's
  label memory (12 h): a re-sent load finds ``Label Already Exists`` and is counted as a replay.
  An older replay loads the rows again (at-least-once for that partition).
- labels disabled (``use_labels=False``): at-least-once — a crash between the load and the store
  commit loads the partition twice on replay.
"""

from __future__ import annotations

import base64
import enum
import http.client
import io
import json
import logging
import re
import select
import socket
import ssl
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, TypeVar, Union

from ..errors import ConfigurationError, SinkError
from ..offsets import OffsetRange
from ..stores.base import CommitOutcome, PlannedBatch, TransactionalStore, Writes
from .labels import LabelGenerator

__all__ = [
    "DorisSink",
    "DorisStreamLoadClient",
    "LoadResult",
    "LoadState",
    "PartitionWrite",
    "TxnOutcome",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")
TxnRef = Union[int, str]  # a transaction id, or the label that names it

_FORMATS = ("csv", "json")
_OK_STATUSES = ("Success", "Publish Timeout")
_FINISHED_JOB_STATUSES = ("FINISHED", "VISIBLE", "COMMITTED")
_REDIRECTS = (301, 302, 303, 307, 308)
_RESERVED_HEADERS = frozenset({
    "label", "format", "columns", "column_separator", "line_delimiter", "timeout", "two_phase_commit",
    "strip_outer_array", "txn_id", "txn_operation", "authorization", "expect", "content-length",
    "host", "connection", "transfer-encoding",
})
_LABEL_EXISTS = re.compile(r"Label \[(.*)\] has already been used, relate to txn \[(\d+)\]")
_ALREADY_COMMITTED = re.compile(r"is already (COMMITTED|VISIBLE)\b", re.IGNORECASE)
_ALREADY_ABORTED = re.compile(r"is already aborted", re.IGNORECASE)
_NOT_FOUND = re.compile(r"not found|does not exist|doesn't exist", re.IGNORECASE)
_CONNECTION_ERRORS = (OSError, http.client.HTTPException)


class LoadState(str, enum.Enum):
    """A label's state as ``get_load_state`` reports it."""

    PREPARE = "PREPARE"  # loading
    PRECOMMITTED = "PRECOMMITTED"  # two-phase: loaded, invisible, waiting for commit/abort
    COMMITTED = "COMMITTED"  # committed, being published
    VISIBLE = "VISIBLE"  # committed and visible
    ABORTED = "ABORTED"  # nothing loaded; the label may be used again
    UNKNOWN = "UNKNOWN"  # never used, or forgotten (~12 h after the load finished)


class TxnOutcome(str, enum.Enum):
    """What a commit / abort / in-doubt resolution did."""

    COMMITTED = "committed"
    ALREADY_COMMITTED = "already_committed"
    ABORTED = "aborted"
    ALREADY_ABORTED = "already_aborted"
    UNKNOWN = "unknown"  # Doris no longer knows the label: nothing can be checked or done


@dataclass(frozen=True)
class LoadResult:
    """The outcome of one Stream Load (after redirects and retries).

    ``replayed`` — the label was already loaded (``Label Already Exists`` with a finished job):
    nothing was loaded by this call and ``loaded_rows`` is 0. ``attempts`` counts HTTP attempts.
    """

    label: Optional[str]
    status: str
    txn_id: Optional[int]
    replayed: bool
    two_phase_commit: bool
    loaded_rows: int
    filtered_rows: int
    message: str
    existing_job_status: Optional[str]
    attempts: int
    error_url: Optional[str] = None
    response: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class PartitionWrite:
    """What :meth:`DorisSink.write_partition` did for one partition of one batch.

    ``outcome`` is the store's (APPLIED, or REPLAYED when the partition was committed before);
    ``doris_replayed`` says Doris already had the label's rows (a re-sent load).
    """

    label: Optional[str]
    outcome: CommitOutcome
    txn_id: Optional[int]
    loaded_rows: int
    doris_replayed: bool


@dataclass(frozen=True)
class _Retry:
    """An attempt that failed in a way worth retrying."""

    reason: str
    cause: Optional[BaseException] = None


@dataclass(frozen=True)
class _Final:
    """An attempt that failed for good (retrying cannot help)."""

    reason: str


@dataclass(frozen=True)
class _Response:
    status: int
    reason: str
    headers: http.client.HTTPMessage
    body: bytes
    url: str

    def snippet(self) -> str:
        text = self.body.decode("utf-8", "replace").strip()
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


def _header_separator(value: str) -> str:
    """Doris's notation for a separator: printable ASCII as is, anything else as ``\\xNN`` bytes."""
    if value.isascii() and value.isprintable() and value.strip():
        return value
    return "".join(f"\\x{b:02x}" for b in value.encode("utf-8"))


def _csv_field(value: Any) -> str:
    if value is None:
        return "\\N"  # Doris's NULL in CSV
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _int_or_none(value: Any) -> Optional[int]:
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return number if number >= 0 else None


def _redact_url(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urllib.parse.urlunsplit(parts._replace(netloc="***@" + parts.netloc.rpartition("@")[2]))


def _check_label(label: object) -> str:
    if not isinstance(label, str) or not label or not label.isprintable():
        raise ConfigurationError(f"a Doris label must be a non-empty printable str, got {label!r}")
    return label


def _check_name(what: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigurationError(f"Doris {what} must be a non-empty str, got {value!r}")
    if "/" in value or any(ch.isspace() for ch in value):
        raise ConfigurationError(f"Doris {what} must not contain '/' or whitespace, got {value!r}")
    return value


def _check_number(what: str, value: Any, *, minimum: float, integer: bool = False) -> Any:
    wrong_kind = isinstance(value, bool) or not isinstance(value, int if integer else (int, float))
    if wrong_kind or value < minimum:
        kind = "an int" if integer else "a number"
        raise ConfigurationError(f"{what} must be {kind} >= {minimum}, got {value!r}")
    return value


class DorisStreamLoadClient:
    """Stream Load into one Doris table, with redirects, retries, labels and two-phase commit.

    Unit of parallelism: one HTTP Stream Load per call; :class:`DorisSink` makes one call per
    Spark partition per batch. The rows of a call are held in memory (they are re-sent after a
    redirect or a retry); Doris recommends Stream Loads well under 1 GB.

    Delivery guarantee of a single :meth:`load`: a call with a label is idempotent while Doris
    remembers the label — a retried or re-sent load whose label finished reports ``replayed=True``
    and loads nothing. Without a label every call loads (at-least-once under retries).

    Retries: connection errors, HTTP 5xx and ``Status: Fail`` are retried ``max_retries`` times
    with exponential backoff (``backoff_s`` doubling, at most ``max_backoff_s``), then
    :class:`~dstream_exactly_once.errors.SinkError` names db, table, label and Doris's message.
    Refused credentials (HTTP 401/403) are not retried. The password never appears in ``repr``,
    logs or errors; it does travel with the pickled client to executors.
    """

    def __init__(
        self,
        fe_url: str,
        db: str,
        table: str,
        *,
        user: str = "root",
        password: str = "",
        format: str = "csv",
        columns: Union[str, Sequence[str], None] = None,
        column_separator: str = "\t",
        line_delimiter: str = "\n",
        timeout_s: int = 600,
        properties: Optional[Mapping[str, str]] = None,
        max_retries: int = 4,
        backoff_s: float = 1.0,
        max_backoff_s: float = 30.0,
        wait_timeout_s: Optional[float] = None,
        poll_interval_s: float = 1.0,
        expect_continue_timeout_s: float = 1.0,
        request_timeout_s: Optional[float] = None,
        max_redirects: int = 5,
    ) -> None:
        self.fe_url = self._check_fe_url(fe_url)
        self.db = _check_name("database", db)
        self.table = _check_name("table", table)
        if not isinstance(user, str) or not user:
            raise ConfigurationError(f"Doris user must be a non-empty str, got {user!r}")
        if not isinstance(password, str):
            raise ConfigurationError("Doris password must be a str")
        self.user = user
        self._password = password
        fmt = format.lower() if isinstance(format, str) else format
        if fmt not in _FORMATS:
            raise ConfigurationError(f"Doris format must be one of {_FORMATS}, got {format!r}")
        self.format: str = fmt
        self.columns = self._check_columns(columns)
        for what, sep in (("column_separator", column_separator), ("line_delimiter", line_delimiter)):
            if not isinstance(sep, str) or not sep:
                raise ConfigurationError(f"{what} must be a non-empty str, got {sep!r}")
        if column_separator in line_delimiter or line_delimiter in column_separator:
            raise ConfigurationError(
                f"column_separator {column_separator!r} and line_delimiter {line_delimiter!r} must differ"
            )
        self.column_separator = column_separator
        self.line_delimiter = line_delimiter
        self.timeout_s = int(_check_number("timeout_s", timeout_s, minimum=1, integer=True))
        if self.timeout_s > 259200:
            raise ConfigurationError(f"timeout_s must be at most 259200 (Doris's limit), got {timeout_s!r}")
        self.properties = self._check_properties(properties)
        self.max_retries = int(_check_number("max_retries", max_retries, minimum=0, integer=True))
        self.backoff_s = float(_check_number("backoff_s", backoff_s, minimum=0))
        self.max_backoff_s = float(_check_number("max_backoff_s", max_backoff_s, minimum=0))
        self.wait_timeout_s = float(_check_number(
            "wait_timeout_s", self.timeout_s if wait_timeout_s is None else wait_timeout_s, minimum=0))
        self.poll_interval_s = float(_check_number("poll_interval_s", poll_interval_s, minimum=0))
        self.expect_continue_timeout_s = float(
            _check_number("expect_continue_timeout_s", expect_continue_timeout_s, minimum=0))
        self.request_timeout_s = float(_check_number(
            "request_timeout_s", self.timeout_s + 60 if request_timeout_s is None else request_timeout_s,
            minimum=0.001))
        self.max_redirects = int(_check_number("max_redirects", max_redirects, minimum=0, integer=True))

    # ------------------------------------------------------------------ configuration checks
    @staticmethod
    def _check_fe_url(fe_url: object) -> str:
        if not isinstance(fe_url, str) or not fe_url:
            raise ConfigurationError(f"Doris fe_url must be a non-empty str like 'http://fe:8030', got {fe_url!r}")
        try:
            parts = urllib.parse.urlsplit(fe_url)
            parts.port  # noqa: B018 - validates the port
        except ValueError as exc:
            raise ConfigurationError(f"Doris fe_url {_redact_url(fe_url)!r} is not a valid URL: {exc}") from None
        if parts.username is not None or parts.password is not None:
            raise ConfigurationError(
                f"Doris fe_url {_redact_url(fe_url)!r} must not carry credentials; pass user= and password="
            )
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigurationError(f"Doris fe_url must be http(s)://host[:port], got {fe_url!r}")
        if parts.path not in ("", "/") or parts.query or parts.fragment:
            raise ConfigurationError(f"Doris fe_url must have no path or query, got {fe_url!r}")
        return f"{parts.scheme}://{parts.netloc}"

    @staticmethod
    def _check_columns(columns: object) -> Optional[str]:
        if columns is None:
            return None
        names = columns.split(",") if isinstance(columns, str) else columns
        if not isinstance(names, (list, tuple)) or not names or not all(
            isinstance(c, str) and c.strip() for c in names
        ):
            raise ConfigurationError(f"columns must be a non-empty list of column names, got {columns!r}")
        return ",".join(c.strip() for c in names)

    @staticmethod
    def _check_properties(properties: object) -> Dict[str, str]:
        if properties is None:
            return {}
        if not isinstance(properties, Mapping):
            raise ConfigurationError(f"properties must be a mapping of Stream Load headers, got {properties!r}")
        out: Dict[str, str] = {}
        for key, value in properties.items():
            if not isinstance(key, str) or not key or not isinstance(value, (str, int, float)):
                raise ConfigurationError(f"Stream Load property {key!r}={value!r} must be str: str")
            if key.lower() in _RESERVED_HEADERS:
                raise ConfigurationError(
                    f"Stream Load property {key!r} is set by the client itself (use its own argument)"
                )
            out[key] = str(value)
        return out

    def __repr__(self) -> str:
        return (f"DorisStreamLoadClient({self.fe_url!r}, db={self.db!r}, table={self.table!r}, "
                f"user={self.user!r}, format={self.format!r})")

    # ------------------------------------------------------------------ body and headers
    def encode_rows(self, rows: Iterable[Any]) -> bytes:
        """The Stream Load body for ``rows``.

        ``csv``: a row is a ``str``/``bytes`` line, or a sequence of values joined by
        ``column_separator`` (``None`` → ``\\N``); a value containing the separator or the line
        delimiter raises :class:`ConfigurationError` (Doris would split it). ``json``: rows are
        JSON values, sent as one array with ``strip_outer_array: true``.
        """
        if self.format == "json":
            try:
                return json.dumps(list(rows), ensure_ascii=False, separators=(",", ":"),
                                  allow_nan=False).encode("utf-8")
            except (TypeError, ValueError) as exc:
                raise ConfigurationError(f"rows for {self.db}.{self.table} are not JSON-serialisable: {exc}") from exc
        lines: List[str] = []
        for index, row in enumerate(rows):
            if isinstance(row, (str, bytes)):
                line = row.decode("utf-8") if isinstance(row, bytes) else row
                values = [line]
            elif isinstance(row, (list, tuple)):
                values = [_csv_field(v) for v in row]
                for value in values:
                    if self.column_separator in value:
                        raise ConfigurationError(
                            f"row {index} for {self.db}.{self.table}: value {value[:80]!r} contains the "
                            f"column separator {self.column_separator!r}"
                        )
                line = self.column_separator.join(values)
            else:
                raise ConfigurationError(
                    f"row {index} for {self.db}.{self.table} must be a str, bytes, list or tuple in csv "
                    f"format, got {type(row).__name__}"
                )
            if self.line_delimiter in line:
                raise ConfigurationError(
                    f"row {index} for {self.db}.{self.table}: {line[:80]!r} contains the line delimiter "
                    f"{self.line_delimiter!r}"
                )
            lines.append(line)
        if not lines:
            return b""
        return (self.line_delimiter.join(lines) + self.line_delimiter).encode("utf-8")

    def _auth_headers(self) -> Dict[str, str]:
        token = base64.b64encode(f"{self.user}:{self._password}".encode()).decode("ascii")
        return {"Authorization": f"Basic {token}"}

    def load_headers(self, label: Optional[str], *, two_phase_commit: bool = False) -> Dict[str, str]:
        """The Stream Load headers for ``label`` (credentials excluded)."""
        headers: Dict[str, str] = {"format": self.format, "timeout": str(self.timeout_s)}
        if label is not None:
            headers["label"] = label
        if self.columns:
            headers["columns"] = self.columns
        if self.format == "csv":
            headers["column_separator"] = _header_separator(self.column_separator)
            if self.line_delimiter != "\n":
                headers["line_delimiter"] = _header_separator(self.line_delimiter)
        else:
            headers["strip_outer_array"] = "true"
        if two_phase_commit:
            headers["two_phase_commit"] = "true"
        headers.update(self.properties)
        return headers

    # ------------------------------------------------------------------ HTTP plumbing
    def _send_once(self, method: str, url: str, headers: Mapping[str, str], body: bytes,
                   expect_continue: bool) -> _Response:
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
            assert sock is not None
            fp = sock.makefile("rb")
            prefix = b""
            if body:
                send_body = True
                if expect_continue and _readable(sock, self.expect_continue_timeout_s):
                    line = fp.readline(65537)
                    if _status_code(line) == 100:  # interim answer: skip it, then send
                        while fp.readline(65537) not in (b"\r\n", b"\n", b""):
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
            return _Response(response.status, response.reason, response.headers, data, url)
        finally:
            if fp is not None:
                fp.close()
            conn.close()

    def _http(self, method: str, path: str, headers: Mapping[str, str], body: bytes = b"", *,
              expect_continue: bool = False) -> _Response:
        """One request, following redirects (re-sending credentials and body), no retries."""
        url = self.fe_url + path
        all_headers = {**headers, **self._auth_headers()}
        for _ in range(self.max_redirects + 1):
            response = self._send_once(method, url, all_headers, body, expect_continue)
            if response.status not in _REDIRECTS:
                return response
            location = response.headers.get("Location")
            if not location:
                raise http.client.HTTPException(f"HTTP {response.status} redirect without a Location header")
            url = urllib.parse.urljoin(url, location)
            if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
                raise http.client.HTTPException(f"redirect to unsupported URL {_redact_url(url)!r}")
            logger.debug("Doris %s %s redirected to %s", method, path, _redact_url(url))
        raise http.client.HTTPException(f"more than {self.max_redirects} redirects")

    def _auth_error(self, response: _Response, what: str) -> SinkError:
        error = SinkError(
            f"{what}: Doris refused the credentials of user {self.user!r} "
            f"(HTTP {response.status} {response.reason}): {response.snippet()}"
        )
        error.retriable = False
        return error

    def _backoff(self, retry: int) -> float:
        return min(self.max_backoff_s, self.backoff_s * (2 ** (retry - 1)))

    def _with_retries(self, what: str, attempt: Callable[[int], Union[T, _Retry]]) -> T:
        failure = _Retry("no attempt made")
        for number in range(1, self.max_retries + 2):
            if number > 1:
                time.sleep(self._backoff(number - 1))
            outcome = attempt(number)
            if not isinstance(outcome, _Retry):
                return outcome
            failure = outcome
            logger.warning("%s: attempt %d of %d failed: %s", what, number, self.max_retries + 1, failure.reason)
        raise SinkError(f"{what} failed after {self.max_retries + 1} attempts: {failure.reason}") from failure.cause

    def _request_json(self, what: str, method: str, path: str, headers: Mapping[str, str],
                      body: bytes = b"", *, expect_continue: bool = False) -> Union[Any, _Retry]:
        """One attempt: the decoded JSON answer, a :class:`_Retry`, or a non-retriable SinkError."""
        try:
            response = self._http(method, path, headers, body, expect_continue=expect_continue)
        except _CONNECTION_ERRORS as exc:
            return _Retry(f"connection error: {type(exc).__name__}: {exc}", exc)
        if response.status in (401, 403):
            raise self._auth_error(response, what)
        if response.status >= 500:
            return _Retry(f"HTTP {response.status} {response.reason}: {response.snippet()}")
        text = response.body.decode("utf-8", "replace").strip()
        try:
            doc = json.loads(text) if text else None
        except ValueError:  # some Doris versions answer get_load_state in plain text
            doc = text if response.status == 200 else None
        if response.status != 200 and not isinstance(doc, dict):
            error = SinkError(f"{what}: HTTP {response.status} {response.reason}: {response.snippet()}")
            error.retriable = False
            raise error
        if doc is None:
            return _Retry(f"answer is not JSON: {response.snippet()!r}")
        return doc

    # ------------------------------------------------------------------ Stream Load
    def _describe(self, label: Optional[str]) -> str:
        return f"Doris Stream Load into {self.db}.{self.table} (label {label!r})"

    def _stream_load(self, label: Optional[str], body: bytes, *, two_phase_commit: bool) -> LoadResult:
        if label is not None:
            _check_label(label)
        what = self._describe(label)
        headers = self.load_headers(label, two_phase_commit=two_phase_commit)
        path = "/api/{}/{}/_stream_load".format(*(urllib.parse.quote(p, safe="") for p in (self.db, self.table)))

        def attempt(number: int) -> Union[LoadResult, _Retry]:
            doc = self._request_json(what, "PUT", path, headers, body, expect_continue=True)
            if isinstance(doc, _Retry):
                return doc
            if not isinstance(doc, dict):
                return _Retry(f"unexpected answer {doc!r}")
            status = str(doc.get("Status", ""))
            message = str(doc.get("Message", "") or doc.get("msg", ""))
            if status in _OK_STATUSES:
                return self._result(label, doc, number, replayed=False, two_phase=two_phase_commit)
            if status == "Label Already Exists":
                return self._label_exists(what, label, doc, number, two_phase_commit)
            detail = f"Doris status {status!r}: {message}"
            if doc.get("ErrorURL"):
                detail += f" (rejected rows: {doc['ErrorURL']})"
            return _Retry(detail)

        return self._with_retries(what, attempt)

    def _result(self, label: Optional[str], doc: Mapping[str, Any], attempts: int, *, replayed: bool,
                two_phase: bool, txn_id: Optional[int] = None) -> LoadResult:
        return LoadResult(
            label=str(doc.get("Label") or label) if (doc.get("Label") or label) else None,
            status=str(doc.get("Status", "")),
            txn_id=txn_id if txn_id is not None else _int_or_none(doc.get("TxnId")),
            replayed=replayed,
            two_phase_commit=two_phase,
            loaded_rows=0 if replayed else int(doc.get("NumberLoadedRows", 0) or 0),
            filtered_rows=0 if replayed else int(doc.get("NumberFilteredRows", 0) or 0),
            message=str(doc.get("Message", "") or ""),
            existing_job_status=doc.get("ExistingJobStatus"),
            attempts=attempts,
            error_url=doc.get("ErrorURL") or None,
            response=dict(doc),
        )

    def _label_exists(self, what: str, label: Optional[str], doc: Mapping[str, Any], attempts: int,
                      two_phase: bool) -> Union[LoadResult, _Retry]:
        message = str(doc.get("Message", ""))
        match = _LABEL_EXISTS.search(message)
        txn_id = int(match.group(2)) if match else None
        job = str(doc.get("ExistingJobStatus", "")).upper()
        if job == "RUNNING" and label is not None:  # another attempt is loading it: wait for its end
            state = self._wait_while_running(what, label)
            if state in (LoadState.VISIBLE, LoadState.COMMITTED):
                job = "FINISHED"
            elif state is LoadState.PRECOMMITTED:
                job = "PRECOMMITTED"
            else:  # it failed and freed the label: load again
                return _Retry(f"an earlier load of label {label!r} ended {state.value}; loading again")
        if job in _FINISHED_JOB_STATUSES:
            logger.info("%s: label already loaded (%s); counted as a replay", what, job)
            return self._result(label, doc, attempts, replayed=True, two_phase=two_phase, txn_id=txn_id)
        if job == "PRECOMMITTED":
            error = SinkError(
                f"{what}: the label is held by pre-committed transaction {txn_id} of another attempt; it "
                "stays in doubt until the offset store decides (DorisSink.recover after a new epoch, or "
                f"resolve_in_doubt). Doris: {message}"
            )
            error.retriable = False
            raise error
        return _Retry(f"Doris status 'Label Already Exists' with job status {job!r}: {message}")

    def _wait_while_running(self, what: str, label: str) -> LoadState:
        deadline = time.monotonic() + self.wait_timeout_s
        while True:
            state = self.get_load_state(label)
            if state is not LoadState.PREPARE:
                return state
            if time.monotonic() >= deadline:
                raise SinkError(f"{what}: another load of this label is still running after "
                                f"{self.wait_timeout_s:g} s")
            time.sleep(self.poll_interval_s)

    def load(self, label: Optional[str], rows: Iterable[Any]) -> LoadResult:
        """Load ``rows`` in one Stream Load under ``label`` (``None``: Doris picks one).

        A finished job with the same label → ``replayed=True`` (nothing loaded); a running one is
        waited for; a pre-committed one raises :class:`SinkError` (it is in doubt: see
        :meth:`resolve_in_doubt`).
        """
        return self._stream_load(label, self.encode_rows(rows), two_phase_commit=False)

    def precommit(self, label: str, rows: Iterable[Any]) -> int:
        """Phase one: load ``rows`` invisibly under ``label``; return the transaction id.

        If the label already finished, its transaction id is returned (committing it again is a
        no-op). A label held by another attempt's pre-committed transaction raises
        :class:`SinkError`: only the offset store may decide its fate.
        """
        _check_label(label)
        result = self._stream_load(label, self.encode_rows(rows), two_phase_commit=True)
        if result.txn_id is None:
            raise SinkError(f"{self._describe(label)}: Doris answered without a transaction id: {result.message}")
        return result.txn_id

    # ------------------------------------------------------------------ two-phase commit
    def _txn_operation(self, operation: str, txn: TxnRef,
                       classify: Callable[[bool, str], Union[TxnOutcome, _Retry, _Final]]) -> TxnOutcome:
        if isinstance(txn, bool) or not isinstance(txn, (int, str)) or (
            isinstance(txn, int) and txn < 0) or (isinstance(txn, str) and not (txn and txn.isprintable())
        ):
            raise ConfigurationError(f"a transaction is named by an int id >= 0 or a label, got {txn!r}")
        ref = f"transaction {txn}" if isinstance(txn, int) else f"transaction of label {txn!r}"
        what = f"Doris {operation} of {ref} in {self.db}.{self.table}"
        headers = {"txn_operation": operation, ("txn_id" if isinstance(txn, int) else "label"): str(txn)}
        path = f"/api/{urllib.parse.quote(self.db, safe='')}/_stream_load_2pc"

        def attempt(number: int) -> Union[TxnOutcome, _Retry]:
            doc = self._request_json(what, "PUT", path, headers)
            if isinstance(doc, _Retry):
                return doc
            if not isinstance(doc, dict):
                return _Retry(f"unexpected answer {doc!r}")
            status = str(doc.get("status", doc.get("Status", "")))
            message = str(doc.get("msg", doc.get("Message", "")))
            outcome = classify(status.lower() in ("success", "ok"), message)
            if isinstance(outcome, _Final):
                error = SinkError(f"{what}: {outcome.reason}")
                error.retriable = False
                raise error
            return outcome

        return self._with_retries(what, attempt)

    def commit_txn(self, txn: TxnRef) -> TxnOutcome:
        """Phase two: make pre-committed ``txn`` (an id, or its label) visible.

        ``COMMITTED``, or ``ALREADY_COMMITTED`` when it was committed before. A transaction Doris
        aborted (or no longer knows) raises :class:`SinkError`: its rows are gone.
        """
        def classify(ok: bool, message: str) -> Union[TxnOutcome, _Retry, _Final]:
            if ok:
                return TxnOutcome.COMMITTED
            if _ALREADY_COMMITTED.search(message):
                return TxnOutcome.ALREADY_COMMITTED
            if _ALREADY_ABORTED.search(message) or _NOT_FOUND.search(message):
                return _Final(f"cannot commit, Doris aborted it or does not know it (its rows are lost): {message}")
            return _Retry(f"Doris: {message}")

        return self._txn_operation("commit", txn, classify)

    def abort_txn(self, txn: TxnRef) -> TxnOutcome:
        """Abort pre-committed (or running) ``txn`` (an id, or its label); its label is freed.

        ``ABORTED``, or ``ALREADY_ABORTED`` when Doris already aborted / does not know it. A
        committed transaction raises :class:`SinkError`.
        """
        def classify(ok: bool, message: str) -> Union[TxnOutcome, _Retry, _Final]:
            if ok:
                return TxnOutcome.ABORTED
            if _ALREADY_COMMITTED.search(message):
                return _Final(f"cannot abort, Doris already committed it: {message}")
            if _ALREADY_ABORTED.search(message) or _NOT_FOUND.search(message):
                return TxnOutcome.ALREADY_ABORTED
            return _Retry(f"Doris: {message}")

        return self._txn_operation("abort", txn, classify)

    def get_load_state(self, label: str) -> LoadState:
        """The state of ``label`` in this database (``GET /api/{db}/get_load_state``)."""
        _check_label(label)
        what = f"Doris get_load_state of label {label!r} in {self.db}"
        path = (f"/api/{urllib.parse.quote(self.db, safe='')}/get_load_state?"
                + urllib.parse.urlencode({"label": label}))

        def attempt(number: int) -> Union[LoadState, _Retry]:
            doc = self._request_json(what, "GET", path, {})
            if isinstance(doc, _Retry):
                return doc
            if isinstance(doc, dict):
                if str(doc.get("code", 0)) not in ("0", "200"):
                    return _Retry(f"Doris: {doc.get('msg')!r} {doc.get('data')!r}")
                doc = doc.get("data")
            try:
                return LoadState(str(doc).upper())
            except ValueError:
                return _Retry(f"unrecognised load state {doc!r}")

        return self._with_retries(what, attempt)

    def resolve_in_doubt(self, label: str, txn_id: Optional[int], decision: str) -> TxnOutcome:
        """Finish an in-doubt two-phase load the way the offset store decided.

        ``decision`` is ``"commit"`` when the store recorded ``label`` (with ``txn_id``) in a
        committed transaction, else ``"abort"``; the store is the single source of truth. Commit:
        a pre-committed transaction is committed, a committed one is left alone; one Doris aborted
        raises :class:`SinkError` (the store counted rows that are gone — the pre-commit timeout
        passed); a label Doris forgot (``UNKNOWN``) is reported, with a warning. Abort: a running or
        pre-committed transaction is aborted; an aborted/unknown one is left alone; a committed one
        cannot be aborted — it is reported as ``ALREADY_COMMITTED`` with a warning, and the replay
        of its batch will find the label finished and record it.
        """
        if decision not in ("commit", "abort"):
            raise ConfigurationError(f"decision must be 'commit' or 'abort', got {decision!r}")
        if txn_id is not None and (isinstance(txn_id, bool) or not isinstance(txn_id, int) or txn_id < 0):
            raise ConfigurationError(f"txn_id must be None or an int >= 0, got {txn_id!r}")
        state = self.get_load_state(label)
        what = f"in-doubt load {label!r} (txn {txn_id}) in {self.db}.{self.table}"
        if decision == "commit":
            if state in (LoadState.VISIBLE, LoadState.COMMITTED):
                return TxnOutcome.ALREADY_COMMITTED
            if state is LoadState.PRECOMMITTED:
                return self.commit_txn(txn_id if txn_id is not None else label)
            if state is LoadState.UNKNOWN:
                logger.warning("%s: the store committed it but Doris no longer knows the label "
                               "(older than its label memory?); nothing to check or commit", what)
                return TxnOutcome.UNKNOWN
            error = SinkError(
                f"{what}: the offset store committed it but Doris has it {state.value}"
                + (" (rows lost: the pre-commit timeout passed before it was committed)"
                   if state is LoadState.ABORTED else "; retry later")
            )
            error.retriable = state is LoadState.PREPARE
            raise error
        if state in (LoadState.PRECOMMITTED, LoadState.PREPARE):
            return self.abort_txn(txn_id if txn_id is not None else label)
        if state in (LoadState.VISIBLE, LoadState.COMMITTED):
            logger.warning("%s: the store did not record it but Doris already committed it; left as is "
                           "(the replay of its batch finds the label finished and records it)", what)
            return TxnOutcome.ALREADY_COMMITTED
        return TxnOutcome.ALREADY_ABORTED


class DorisSink:
    """Exactly-once output of DStream partitions into one Doris table.

    Unit of parallelism: one Stream Load per Spark partition per batch, with the label
    ``app + batch id + partition id`` (the app part is ``{store.app_id}.{table}`` unless
    ``label_app_id`` is given, so two tables of one database never share labels). Partition
    ``p`` of a batch is the batch's offset range ``p`` (the KafkaRDD has one partition per range);
    its store commit advances that range only, and the driver marks the batch committed once all
    partitions are in (``TransactionalStore.mark_committed``).

    Delivery guarantee: exactly-once in two-phase mode (default) — see the module docstring for
    the protocol and the pre-commit-timeout caveat; with ``two_phase_commit=False`` exactly-once
    while replays happen within Doris's label memory (~12 h), at-least-once past it; with
    ``use_labels=False`` at-least-once.

    Call :meth:`write_partition` on executors (``store``, ``epoch`` and ``batch`` pickle) and
    :meth:`recover` on the driver after ``store.start_epoch()`` for each pending batch, before it
    is replayed.
    """

    def __init__(
        self,
        client: DorisStreamLoadClient,
        *,
        two_phase_commit: bool = True,
        use_labels: bool = True,
        strict_labels: bool = False,
        label_app_id: Optional[str] = None,
        namespace: str = "__doris__",
    ) -> None:
        if not isinstance(client, DorisStreamLoadClient):
            raise ConfigurationError(f"client must be a DorisStreamLoadClient, got {client!r}")
        if two_phase_commit and not use_labels:
            raise ConfigurationError("two_phase_commit=True needs labels (use_labels=True)")
        if label_app_id is not None:
            LabelGenerator(label_app_id, strict=strict_labels)  # validate now, not on an executor
        if not isinstance(namespace, str) or not namespace:
            raise ConfigurationError(f"namespace must be a non-empty str, got {namespace!r}")
        self.client = client
        self.two_phase_commit = bool(two_phase_commit)
        self.use_labels = bool(use_labels)
        self.strict_labels = bool(strict_labels)
        self.label_app_id = label_app_id
        self.namespace = namespace

    def __repr__(self) -> str:
        return (f"DorisSink({self.client!r}, two_phase_commit={self.two_phase_commit}, "
                f"use_labels={self.use_labels})")

    def labels(self, app_id: str) -> LabelGenerator:
        """The label generator of application ``app_id`` (the store's ``app_id``)."""
        source = self.label_app_id if self.label_app_id is not None else f"{app_id}.{self.client.table}"
        return LabelGenerator(source, strict=self.strict_labels)

    def label_for(self, app_id: str, batch_id: int, partition_id: int) -> str:
        """The label of partition ``partition_id`` of batch ``batch_id`` of ``app_id``."""
        return self.labels(app_id).label(batch_id, partition_id)

    # ------------------------------------------------------------------ store helpers
    def _writes(self, extra: Optional[Writes], label: Optional[str], record: Mapping[str, Any]) -> Writes:
        writes = extra.copy() if extra else Writes()
        if label is not None:
            writes.add_label(label)
            writes.put(self.namespace, label, {**record, "table": f"{self.client.db}.{self.client.table}"})
        return writes

    def _recorded_txn(self, store: TransactionalStore, label: str) -> Optional[int]:
        record = store.get_value(self.namespace, label)
        return _int_or_none(record.get("txn_id")) if isinstance(record, dict) else None

    @staticmethod
    def _ranges(batch: PlannedBatch, partition_id: int, ranges: Optional[Sequence[OffsetRange]]) -> List[OffsetRange]:
        if ranges is not None:
            return list(ranges)
        if isinstance(partition_id, bool) or not isinstance(partition_id, int) or not (
            0 <= partition_id < len(batch.ranges)
        ):
            raise ConfigurationError(
                f"partition id {partition_id!r} has no offset range in batch {batch.batch_id} "
                f"({len(batch.ranges)} ranges); pass ranges= explicitly"
            )
        return [batch.ranges[partition_id]]

    def _ensure_committed(self, store: TransactionalStore, label: str) -> Optional[TxnOutcome]:
        txn_id = self._recorded_txn(store, label)
        if txn_id is None:
            return None  # an empty partition, or a labels-only load: nothing pre-committed
        return self.client.resolve_in_doubt(label, txn_id, "commit")

    # ------------------------------------------------------------------ the write path
    def write_partition(
        self,
        store: TransactionalStore,
        epoch: int,
        batch: PlannedBatch,
        partition_id: int,
        rows: Iterable[Any],
        *,
        writes: Optional[Writes] = None,
        ranges: Optional[Sequence[OffsetRange]] = None,
    ) -> PartitionWrite:
        """Load ``rows`` of partition ``partition_id`` and commit its offsets, exactly once.

        ``writes`` (optional) are further results of this partition, committed in the same store
        transaction. Store errors (fencing, offset conflicts) propagate after the pre-committed
        Doris transaction is aborted; a failed Doris commit after the store commit raises
        :class:`SinkError` and leaves the decision (commit) to the next attempt or :meth:`recover`.
        """
        ranges_ = self._ranges(batch, partition_id, ranges)
        label = self.label_for(store.app_id, batch.batch_id, partition_id) if self.use_labels else None
        if label is not None and store.has_label(label):
            if self.two_phase_commit:
                self._ensure_committed(store, label)
            return PartitionWrite(label, CommitOutcome.REPLAYED, self._recorded_txn(store, label), 0, False)
        body = self.client.encode_rows(rows)

        def commit(record: Mapping[str, Any]) -> CommitOutcome:
            return store.commit(epoch, batch, self._writes(writes, label, record), ranges=ranges_,
                                complete_batch=False)

        if not body:  # nothing for Doris: record the label and offsets only
            return PartitionWrite(label, commit({"txn_id": None, "rows": 0}), None, 0, False)
        if not self.two_phase_commit:
            result = self.client._stream_load(label, body, two_phase_commit=False)
            outcome = commit({"txn_id": None, "rows": result.loaded_rows})
            return PartitionWrite(label, outcome, result.txn_id, result.loaded_rows, result.replayed)

        assert label is not None
        result = self.client._stream_load(label, body, two_phase_commit=True)
        if result.replayed:  # Doris finished this label before; the store decides whether it counts
            outcome = commit({"txn_id": result.txn_id, "rows": 0})
            return PartitionWrite(label, outcome, result.txn_id, 0, True)
        txn_id = result.txn_id
        if txn_id is None:
            self.client.abort_txn(label)
            raise SinkError(f"{self.client._describe(label)}: pre-commit answered without a transaction id")
        try:
            outcome = commit({"txn_id": txn_id, "rows": result.loaded_rows})
        except Exception as exc:  # on an interrupt the transaction stays in doubt for recover()
            if not self._after_failed_store_commit(store, label, txn_id, exc):
                raise
            outcome = CommitOutcome.APPLIED  # the store did commit (an ambiguous failure)
        if outcome is CommitOutcome.REPLAYED:
            # The offsets were committed before without this label: our rows must not count.
            self.client.abort_txn(txn_id)
            return PartitionWrite(label, outcome, txn_id, 0, False)
        try:
            self.client.commit_txn(txn_id)
        except SinkError as exc:
            raise SinkError(
                f"{self.client._describe(label)}: the offset store committed label {label!r} but the Doris "
                f"commit of transaction {txn_id} failed; the next attempt or DorisSink.recover commits it: {exc}"
            ) from exc
        return PartitionWrite(label, outcome, txn_id, result.loaded_rows, False)

    def _after_failed_store_commit(self, store: TransactionalStore, label: str, txn_id: int,
                                   exc: Exception) -> bool:
        """After a failed store commit: True if the store recorded our transaction anyway."""
        try:
            recorded = store.has_label(label) and self._recorded_txn(store, label) == txn_id
        except Exception as check_exc:  # noqa: BLE001 - the original error is what the caller sees
            logger.error("store commit of label %r failed (%s) and the store cannot be asked whether it "
                         "recorded it (%s); transaction %d stays in doubt until recover()", label, exc,
                         check_exc, txn_id)
            return False
        if recorded:
            logger.warning("store commit of label %r reported %s but recorded it; committing", label, exc)
            return True
        try:
            self.client.abort_txn(txn_id)
        except Exception as abort_exc:  # noqa: BLE001 - Doris aborts it after its pre-commit timeout
            logger.error("could not abort transaction %d of label %r after the store commit failed: %s",
                         txn_id, label, abort_exc)
        return False

    def recover(self, store: TransactionalStore, batch: PlannedBatch, *,
                partition_ids: Optional[Iterable[int]] = None) -> Dict[str, TxnOutcome]:
        """Resolve in-doubt two-phase loads of a logged batch, as the store decided.

        Call on the driver after ``store.start_epoch()`` (older writers are fenced then) and
        before replaying ``batch``. A label the store recorded is committed; a pre-committed or
        running one it did not record is aborted, freeing the label for the replay. Returns
        ``{label: outcome}`` for every label checked (``ALREADY_ABORTED`` also for a label never
        used); partitions the store recorded without a Doris load (empty ones) are skipped.
        No-op without two-phase commit.
        """
        if not self.two_phase_commit:
            return {}
        generator = self.labels(store.app_id)
        ids = range(len(batch.ranges)) if partition_ids is None else partition_ids
        out: Dict[str, TxnOutcome] = {}
        for partition_id in ids:
            label = generator.label(batch.batch_id, partition_id)
            if store.has_label(label):
                outcome = self._ensure_committed(store, label)
            else:
                outcome = self.client.resolve_in_doubt(label, None, "abort")
            if outcome is not None:
                out[label] = outcome
        return out
