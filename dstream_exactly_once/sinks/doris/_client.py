"""The Doris Stream Load client: loads, label states, two-phase commit and in-doubt resolution.

Everything :class:`~._sink.DorisSink` needs is public here: :meth:`~DorisStreamLoadClient.stream_load`
(an encoded body), :meth:`~DorisStreamLoadClient.get_load_state`, :meth:`~DorisStreamLoadClient.commit_txn`,
:meth:`~DorisStreamLoadClient.abort_txn`, :meth:`~DorisStreamLoadClient.resolve_in_doubt` and
:meth:`~DorisStreamLoadClient.describe` (the words that name a load in messages). HTTP itself —
sockets, ``Expect: 100-continue``, redirects, timeouts — is :mod:`._transport`'s job; what the
answers mean is :mod:`._protocol`'s; retries are :mod:`._retry`'s and setting checks
:mod:`._settings`'. This module holds the credentials and drives the requests.
"""

from __future__ import annotations

import base64
import json
import logging
import time
import urllib.parse
from typing import Any, Callable, Dict, Iterable, Mapping, Optional, Sequence, TypeVar, Union

from ..._checks import is_int
from ..._redaction import register_secret
from ...errors import ConfigurationError, LoadRejectedError, SinkError
from ._protocol import (
    ALREADY_ABORTED,
    ALREADY_COMMITTED,
    FINISHED_JOB_STATUSES,
    FORMATS,
    LABEL_EXISTS,
    NOT_FOUND,
    OK_STATUSES,
    LoadResult,
    LoadState,
    TxnOutcome,
    TxnRef,
    check_label,
    encode_rows,
    header_separator,
)
from ._retry import Final, Retry, with_retries
from ._settings import check_columns, check_fe_url, check_name, check_number, check_properties, check_txn
from ._transport import CONNECTION_ERRORS, HttpTransport

__all__ = ["DorisStreamLoadClient"]

logger = logging.getLogger(__name__)

T = TypeVar("T")


class DorisStreamLoadClient:
    """Stream Load into one Doris table, with redirects, retries, labels and two-phase commit.

    Unit of parallelism: one HTTP Stream Load per call; :class:`DorisSink` makes one call per
    Spark partition per batch. The rows of a call are held in memory (they are re-sent after a
    redirect or a retry); Doris recommends Stream Loads well under 1 GB.

    Delivery guarantee of a single :meth:`load`: a call with a label is idempotent while Doris
    remembers the label — a retried or re-sent load whose label finished reports ``replayed=True``
    and loads nothing. Without a label every call loads (at-least-once under retries).

    Retries: connection errors, HTTP 5xx and ``Status: Fail`` are retried ``max_retries`` times
    with the core :class:`~dstream_exactly_once.RetryPolicy` (jittered backoff from
    ``backoff_s`` doubling, at most ``max_backoff_s``), then
    :class:`~dstream_exactly_once.errors.SinkError` names db, table, label and Doris's message.
    What cannot succeed on a retry (refused credentials, HTTP 4xx, a label held by another
    transaction, …) raises :class:`~dstream_exactly_once.errors.LoadRejectedError` at once. The
    password never appears in ``repr``, logs or errors; it does travel with the pickled client to
    executors.
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
        self.fe_url = check_fe_url(fe_url)
        self.db = check_name("database", db)
        self.table = check_name("table", table)
        if not isinstance(user, str) or not user:
            raise ConfigurationError(f"Doris user must be a non-empty str, got {user!r}")
        if not isinstance(password, str):
            raise ConfigurationError("Doris password must be a str")
        self.user = user
        self._password = password
        register_secret(password)
        fmt = format.lower() if isinstance(format, str) else format
        if fmt not in FORMATS:
            raise ConfigurationError(f"Doris format must be one of {FORMATS}, got {format!r}")
        self.format: str = fmt
        self.columns = check_columns(columns)
        for what, sep in (("column_separator", column_separator), ("line_delimiter", line_delimiter)):
            if not isinstance(sep, str) or not sep:
                raise ConfigurationError(f"{what} must be a non-empty str, got {sep!r}")
        if column_separator in line_delimiter or line_delimiter in column_separator:
            raise ConfigurationError(
                f"column_separator {column_separator!r} and line_delimiter {line_delimiter!r} must differ"
            )
        self.column_separator = column_separator
        self.line_delimiter = line_delimiter
        self.timeout_s = int(check_number("timeout_s", timeout_s, minimum=1, integer=True))
        if self.timeout_s > 259200:
            raise ConfigurationError(f"timeout_s must be at most 259200 (Doris's limit), got {timeout_s!r}")
        self.properties = check_properties(properties)
        self.max_retries = int(check_number("max_retries", max_retries, minimum=0, integer=True))
        self.backoff_s = float(check_number("backoff_s", backoff_s, minimum=0))
        self.max_backoff_s = float(check_number("max_backoff_s", max_backoff_s, minimum=0))
        self.wait_timeout_s = float(check_number(
            "wait_timeout_s", self.timeout_s if wait_timeout_s is None else wait_timeout_s, minimum=0))
        self.poll_interval_s = float(check_number("poll_interval_s", poll_interval_s, minimum=0))
        self.transport = HttpTransport(
            self.fe_url,
            expect_continue_timeout_s=float(
                check_number("expect_continue_timeout_s", expect_continue_timeout_s, minimum=0)),
            request_timeout_s=float(check_number(
                "request_timeout_s", self.timeout_s + 60 if request_timeout_s is None else request_timeout_s,
                minimum=0.001)),
            max_redirects=int(check_number("max_redirects", max_redirects, minimum=0, integer=True)),
        )

    def __repr__(self) -> str:
        return (f"DorisStreamLoadClient({self.fe_url!r}, db={self.db!r}, table={self.table!r}, "
                f"user={self.user!r}, format={self.format!r})")

    def describe(self, label: Optional[str]) -> str:
        """How messages name a load under ``label``: ``Doris Stream Load into db.table (label '…')``."""
        return f"Doris Stream Load into {self.db}.{self.table} (label {label!r})"

    # ------------------------------------------------------------------ body and headers
    def encode_rows(self, rows: Iterable[Any]) -> bytes:
        """The Stream Load body for ``rows`` in this client's format (see :func:`._protocol.encode_rows`)."""
        return encode_rows(rows, format=self.format, column_separator=self.column_separator,
                           line_delimiter=self.line_delimiter, target=f"{self.db}.{self.table}")

    def load_headers(self, label: Optional[str], *, two_phase_commit: bool = False) -> Dict[str, str]:
        """The Stream Load headers for ``label`` (credentials excluded)."""
        headers: Dict[str, str] = {"format": self.format, "timeout": str(self.timeout_s)}
        if label is not None:
            headers["label"] = label
        if self.columns:
            headers["columns"] = self.columns
        if self.format == "csv":
            headers["column_separator"] = header_separator(self.column_separator)
            if self.line_delimiter != "\n":
                headers["line_delimiter"] = header_separator(self.line_delimiter)
        else:
            headers["strip_outer_array"] = "true"
        if two_phase_commit:
            headers["two_phase_commit"] = "true"
        headers.update(self.properties)
        return headers

    # ------------------------------------------------------------------ requests and retries
    def _auth_headers(self) -> Dict[str, str]:
        token = base64.b64encode(f"{self.user}:{self._password}".encode()).decode("ascii")
        register_secret(self._password)  # in this process too (an executor gets the client unpickled)
        register_secret(token)
        return {"Authorization": f"Basic {token}"}

    def _with_retries(self, what: str, attempt: Callable[[int], Union[T, Retry]]) -> T:
        return with_retries(what, attempt, max_retries=self.max_retries, backoff_s=self.backoff_s,
                            max_backoff_s=self.max_backoff_s)

    def _request_json(self, what: str, method: str, path: str, headers: Mapping[str, str],
                      body: bytes = b"", *, expect_continue: bool = False) -> Union[Any, Retry]:
        """One attempt: the decoded JSON answer, a :class:`Retry`, or :class:`LoadRejectedError`."""
        try:
            response = self.transport.request(method, path, {**headers, **self._auth_headers()}, body,
                                              expect_continue=expect_continue)
        except CONNECTION_ERRORS as exc:
            return Retry(f"connection error: {type(exc).__name__}: {exc}", exc)
        if response.status in (401, 403):
            raise LoadRejectedError(
                f"{what}: Doris refused the credentials of user {self.user!r} "
                f"(HTTP {response.status} {response.reason}): {response.snippet()}"
            )
        if response.status >= 500:
            return Retry(f"HTTP {response.status} {response.reason}: {response.snippet()}")
        text = response.text()
        try:
            doc = json.loads(text) if text else None
        except ValueError:  # some Doris versions answer get_load_state in plain text
            doc = text if response.status == 200 else None
        if response.status != 200 and not isinstance(doc, dict):
            raise LoadRejectedError(f"{what}: HTTP {response.status} {response.reason}: {response.snippet()}")
        if doc is None:
            return Retry(f"answer is not JSON: {response.snippet()!r}")
        return doc

    # ------------------------------------------------------------------ Stream Load
    def stream_load(self, label: Optional[str], body: bytes, *, two_phase_commit: bool = False) -> LoadResult:
        """Send ``body`` (from :meth:`encode_rows`) in one Stream Load under ``label``.

        ``label=None`` lets Doris pick one (no idempotence). With ``two_phase_commit`` a success
        is only pre-committed (``txn_id`` set) until :meth:`commit_txn`. A label that finished
        before → ``replayed=True`` (nothing loaded); one that is loading is waited for; one held by
        a pre-committed transaction raises :class:`LoadRejectedError` (in doubt: see
        :meth:`resolve_in_doubt`).
        """
        if label is not None:
            check_label(label)
        if not isinstance(body, (bytes, bytearray)):
            raise ConfigurationError(f"a Stream Load body must be bytes (see encode_rows), got {type(body).__name__}")
        what = self.describe(label)
        headers = self.load_headers(label, two_phase_commit=two_phase_commit)
        path = "/api/{}/{}/_stream_load".format(*(urllib.parse.quote(p, safe="") for p in (self.db, self.table)))

        def attempt(number: int) -> Union[LoadResult, Retry]:
            doc = self._request_json(what, "PUT", path, headers, bytes(body), expect_continue=True)
            if isinstance(doc, Retry):
                return doc
            if not isinstance(doc, dict):
                return Retry(f"unexpected answer {doc!r}")
            status = str(doc.get("Status", ""))
            message = str(doc.get("Message", "") or doc.get("msg", ""))
            if status in OK_STATUSES:
                return LoadResult.from_answer(label, doc, number, replayed=False, two_phase=two_phase_commit)
            if status == "Label Already Exists":
                return self._label_exists(what, label, doc, number, two_phase_commit)
            detail = f"Doris status {status!r}: {message}"
            if doc.get("ErrorURL"):
                detail += f" (rejected rows: {doc['ErrorURL']})"
            return Retry(detail)

        return self._with_retries(what, attempt)

    def _label_exists(self, what: str, label: Optional[str], doc: Mapping[str, Any], attempts: int,
                      two_phase: bool) -> Union[LoadResult, Retry]:
        message = str(doc.get("Message", ""))
        match = LABEL_EXISTS.search(message)
        txn_id = int(match.group(2)) if match else None
        job = str(doc.get("ExistingJobStatus", "")).upper()
        if job == "RUNNING" and label is not None:  # another attempt is loading it: wait for its end
            state = self._wait_while_running(what, label)
            if state in (LoadState.VISIBLE, LoadState.COMMITTED):
                job = "FINISHED"
            elif state is LoadState.PRECOMMITTED:
                job = "PRECOMMITTED"
            else:  # it failed and freed the label: load again
                return Retry(f"an earlier load of label {label!r} ended {state.value}; loading again")
        if job in FINISHED_JOB_STATUSES:
            logger.info("%s: label already loaded (%s); counted as a replay", what, job)
            return LoadResult.from_answer(label, doc, attempts, replayed=True, two_phase=two_phase, txn_id=txn_id)
        if job == "PRECOMMITTED":
            raise LoadRejectedError(
                f"{what}: the label is held by pre-committed transaction {txn_id} of another attempt; it "
                "stays in doubt until the offset store decides (DorisSink.recover after a new epoch, or "
                f"resolve_in_doubt). Doris: {message}"
            )
        return Retry(f"Doris status 'Label Already Exists' with job status {job!r}: {message}")

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
        """Load ``rows`` in one (visible) Stream Load under ``label``: :meth:`stream_load` of :meth:`encode_rows`."""
        if label is not None:
            check_label(label)
        return self.stream_load(label, self.encode_rows(rows), two_phase_commit=False)

    def precommit(self, label: str, rows: Iterable[Any]) -> int:
        """Phase one: load ``rows`` invisibly under ``label``; return the transaction id.

        If the label already finished, its transaction id is returned (committing it again is a
        no-op). A label held by another attempt's pre-committed transaction raises
        :class:`LoadRejectedError`: only the offset store may decide its fate.
        """
        check_label(label)
        result = self.stream_load(label, self.encode_rows(rows), two_phase_commit=True)
        if result.txn_id is None:
            raise SinkError(f"{self.describe(label)}: Doris answered without a transaction id: {result.message}")
        return result.txn_id

    # ------------------------------------------------------------------ label state and two-phase commit
    def get_load_state(self, label: str) -> LoadState:
        """The state of ``label`` in this database (``GET /api/{db}/get_load_state``)."""
        check_label(label)
        what = f"Doris get_load_state of label {label!r} in {self.db}"
        path = (f"/api/{urllib.parse.quote(self.db, safe='')}/get_load_state?"
                + urllib.parse.urlencode({"label": label}))

        def attempt(number: int) -> Union[LoadState, Retry]:
            doc = self._request_json(what, "GET", path, {})
            if isinstance(doc, Retry):
                return doc
            if isinstance(doc, dict):
                if str(doc.get("code", 0)) not in ("0", "200"):
                    return Retry(f"Doris: {doc.get('msg')!r} {doc.get('data')!r}")
                doc = doc.get("data")
            try:
                return LoadState(str(doc).upper())
            except ValueError:
                return Retry(f"unrecognised load state {doc!r}")

        return self._with_retries(what, attempt)

    def _txn_operation(self, operation: str, txn: TxnRef,
                       classify: Callable[[bool, str], Union[TxnOutcome, Retry, Final]]) -> TxnOutcome:
        check_txn(txn)
        ref = f"transaction {txn}" if isinstance(txn, int) else f"transaction of label {txn!r}"
        what = f"Doris {operation} of {ref} in {self.db}.{self.table}"
        headers = {"txn_operation": operation, ("txn_id" if isinstance(txn, int) else "label"): str(txn)}
        path = f"/api/{urllib.parse.quote(self.db, safe='')}/_stream_load_2pc"

        def attempt(number: int) -> Union[TxnOutcome, Retry]:
            doc = self._request_json(what, "PUT", path, headers)
            if isinstance(doc, Retry):
                return doc
            if not isinstance(doc, dict):
                return Retry(f"unexpected answer {doc!r}")
            status = str(doc.get("status", doc.get("Status", "")))
            message = str(doc.get("msg", doc.get("Message", "")))
            outcome = classify(status.lower() in ("success", "ok"), message)
            if isinstance(outcome, Final):
                raise LoadRejectedError(f"{what}: {outcome.reason}")
            return outcome

        return self._with_retries(what, attempt)

    def commit_txn(self, txn: TxnRef) -> TxnOutcome:
        """Phase two: make pre-committed ``txn`` (an id, or its label) visible.

        ``COMMITTED``, or ``ALREADY_COMMITTED`` when it was committed before. A transaction Doris
        aborted (or no longer knows) raises :class:`LoadRejectedError`: its rows are gone.
        """
        def classify(ok: bool, message: str) -> Union[TxnOutcome, Retry, Final]:
            if ok:
                return TxnOutcome.COMMITTED
            if ALREADY_COMMITTED.search(message):
                return TxnOutcome.ALREADY_COMMITTED
            if ALREADY_ABORTED.search(message) or NOT_FOUND.search(message):
                return Final(f"cannot commit, Doris aborted it or does not know it (its rows are lost): {message}")
            return Retry(f"Doris: {message}")

        return self._txn_operation("commit", txn, classify)

    def abort_txn(self, txn: TxnRef) -> TxnOutcome:
        """Abort pre-committed (or running) ``txn`` (an id, or its label); its label is freed.

        ``ABORTED``, or ``ALREADY_ABORTED`` when Doris already aborted / does not know it. A
        committed transaction raises :class:`LoadRejectedError`.
        """
        def classify(ok: bool, message: str) -> Union[TxnOutcome, Retry, Final]:
            if ok:
                return TxnOutcome.ABORTED
            if ALREADY_COMMITTED.search(message):
                return Final(f"cannot abort, Doris already committed it: {message}")
            if ALREADY_ABORTED.search(message) or NOT_FOUND.search(message):
                return TxnOutcome.ALREADY_ABORTED
            return Retry(f"Doris: {message}")

        return self._txn_operation("abort", txn, classify)

    def resolve_in_doubt(self, label: str, txn_id: Optional[int], decision: str) -> TxnOutcome:
        """Finish an in-doubt two-phase load the way the offset store decided.

        ``decision`` is ``"commit"`` when the store recorded ``label`` (with ``txn_id``) in a
        committed transaction, else ``"abort"``; the store is the single source of truth. Commit:
        a pre-committed transaction is committed, a committed one is left alone; one Doris aborted
        raises :class:`LoadRejectedError` (the store counted rows that are gone — the pre-commit
        timeout passed); one still loading raises a retriable :class:`SinkError`; a label Doris
        forgot (``UNKNOWN``) is reported, with a warning. Abort: a running or pre-committed
        transaction is aborted; an aborted/unknown one is left alone; a committed one cannot be
        aborted — it is reported as ``ALREADY_COMMITTED`` with a warning, and the replay of its
        batch will find the label finished and record it.
        """
        if decision not in ("commit", "abort"):
            raise ConfigurationError(f"decision must be 'commit' or 'abort', got {decision!r}")
        if txn_id is not None and (not is_int(txn_id) or txn_id < 0):
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
            if state is LoadState.PREPARE:
                raise SinkError(f"{what}: the offset store committed it but Doris has it PREPARE; retry later")
            raise LoadRejectedError(f"{what}: the offset store committed it but Doris has it {state.value} "
                                    "(rows lost: the pre-commit timeout passed before it was committed)")
        if state in (LoadState.PRECOMMITTED, LoadState.PREPARE):
            return self.abort_txn(txn_id if txn_id is not None else label)
        if state in (LoadState.VISIBLE, LoadState.COMMITTED):
            logger.warning("%s: the store did not record it but Doris already committed it; left as is "
                           "(the replay of its batch finds the label finished and records it)", what)
            return TxnOutcome.ALREADY_COMMITTED
        return TxnOutcome.ALREADY_ABORTED
