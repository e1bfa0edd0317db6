"""A protocol double for Doris Stream Load: a local HTTP server that follows Doris's documented rules.

It is NOT Doris (Doris cannot be installed here). It implements the parts of the HTTP contract that
exactly-once loading depends on, as the Doris docs describe them, so the client can be tested with
real HTTP:

- an "FE" port that checks basic auth and answers ``PUT /api/{db}/{table}/_stream_load`` (and
  ``_stream_load_2pc``) with ``307`` to a "BE" port *without* sending ``100 Continue`` — a client
  that follows the redirect must re-send credentials and body to the BE;
- a "BE" port that sends ``100 Continue``, reads the body (csv or json with
  ``strip_outer_array``) and loads it; a finished or running label of the same database answers
  ``Label Already Exists`` with ``ExistingJobStatus`` (``FINISHED`` / ``RUNNING`` /
  ``PRECOMMITTED``) and the message ``Label [l] has already been used, relate to txn [id]``; an
  aborted label may be used again;
- two-phase commit: ``two_phase_commit: true`` pre-commits (invisible rows, a ``TxnId``);
  ``_stream_load_2pc`` commits / aborts by ``txn_id`` or ``label``, with Doris's messages for
  already committed / already aborted / unknown transactions;
- ``GET /api/{db}/get_load_state?label=…`` → ``{"code": 0, "data": "VISIBLE", …}``.

Fault injection (cancel with :meth:`reset_faults`): :meth:`fail_next` (HTTP 500),
:meth:`fail_next_loads` (``Status: Fail``),
:meth:`drop_next_after_apply` (the load is applied, then the connection is closed without an
answer — the classic "did it apply?" case), :attr:`delay_s`, :attr:`hold_s` (keeps loads running,
so a concurrent load of the label sees ``RUNNING``), :meth:`expire_precommitted` (the pre-commit
timeout) and :meth:`forget_labels` (the end of Doris's label memory).
"""

from __future__ import annotations

import base64
import json
import logging
import socket
import threading
import time
import urllib.parse
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional, Tuple

__all__ = ["DorisProtocolDouble"]

logger = logging.getLogger(__name__)

_JOB_STATUS = {"PREPARE": "RUNNING", "PRECOMMITTED": "PRECOMMITTED", "COMMITTED": "FINISHED",
               "VISIBLE": "FINISHED"}


@dataclass
class _Txn:
    txn_id: int
    db: str
    table: str
    label: str
    two_phase: bool
    status: str = "PREPARE"
    rows: List[Any] = field(default_factory=list)
    reason: str = ""


def _decode_separator(value: str) -> str:
    if value.startswith("\\x"):
        return bytes.fromhex(value.replace("\\x", "")).decode("utf-8")
    return value


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    double: DorisProtocolDouble
    role: str  # "fe" or "be"

    def handle_expect_100(self) -> bool:
        if self.role == "fe":  # the FE redirects before the body is sent: no "100 Continue"
            return True
        return super().handle_expect_100()

    def do_PUT(self) -> None:  # noqa: N802 - http.server's naming
        self.double._dispatch(self, "PUT")

    def do_GET(self) -> None:  # noqa: N802
        self.double._dispatch(self, "GET")

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
        logger.debug("doris double %s: " + format, self.role, *args)


class DorisProtocolDouble:
    """Doris's Stream Load HTTP protocol on two local ports (FE and BE), for tests.

    ``rows(db, table)`` returns what is visible in a table, so a test can assert exactly-once.
    Use as a context manager or call :meth:`start` / :meth:`stop`.
    """

    def __init__(self, *, user: str = "root", password: str = "", host: str = "127.0.0.1") -> None:
        self.user = user
        self.password = password
        self.host = host
        self.delay_s = 0.0  # before answering any request
        self.hold_s = 0.0  # a load stays PREPARE (RUNNING) this long before it is applied
        self.requests: List[Dict[str, Any]] = []
        self._lock = threading.RLock()
        self._txns: Dict[int, _Txn] = {}
        self._labels: Dict[Tuple[str, str], int] = {}
        self._tables: Dict[Tuple[str, str], List[Any]] = {}
        self._next_txn = 1000
        self._failures: List[Tuple[str, int]] = []
        self._fail_loads: List[str] = []
        self._drops = 0
        self._servers: Dict[str, ThreadingHTTPServer] = {}
        self._threads: List[threading.Thread] = []

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> DorisProtocolDouble:
        for role in ("fe", "be"):
            handler = type(f"_{role.upper()}Handler", (_Handler,), {"double": self, "role": role})
            server = ThreadingHTTPServer((self.host, 0), handler)
            server.daemon_threads = True
            thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                                      name=f"doris-double-{role}", daemon=True)
            thread.start()
            self._servers[role] = server
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        for server in self._servers.values():
            server.shutdown()
            server.server_close()
        for thread in self._threads:
            thread.join(timeout=5)
        self._servers.clear()
        self._threads.clear()

    def __enter__(self) -> DorisProtocolDouble:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _url(self, role: str) -> str:
        return f"http://{self.host}:{self._servers[role].server_address[1]}"

    @property
    def fe_url(self) -> str:
        return self._url("fe")

    @property
    def be_url(self) -> str:
        return self._url("be")

    # ------------------------------------------------------------------ inspection
    def rows(self, db: str, table: str) -> List[Any]:
        """Visible rows of ``db.table`` in load order (csv rows are tuples of str, ``\\N`` → None)."""
        with self._lock:
            return list(self._tables.get((db, table), []))

    def label_state(self, db: str, label: str) -> str:
        with self._lock:
            txn_id = self._labels.get((db, label))
            return self._txns[txn_id].status if txn_id is not None else "UNKNOWN"

    def labels(self, db: str) -> Dict[str, str]:
        """``{label: state}`` of every label Doris remembers in ``db`` (``VISIBLE`` = committed)."""
        with self._lock:
            return {label: self._txns[t].status for (d, label), t in self._labels.items() if d == db}

    def txn_status(self, txn_id: int) -> str:
        with self._lock:
            return self._txns[txn_id].status if txn_id in self._txns else "UNKNOWN"

    def requests_to(self, role: str, kind: Optional[str] = None) -> List[Dict[str, Any]]:
        with self._lock:
            return [r for r in self.requests if r["role"] == role and (kind is None or r["kind"] == kind)]

    # ------------------------------------------------------------------ fault injection
    def fail_next(self, n: int = 1, *, status: int = 500, endpoint: str = "any") -> None:
        """Answer the next ``n`` requests to ``endpoint`` (``stream_load``, ``2pc``,
        ``load_state`` or ``any``) with HTTP ``status``, doing nothing."""
        with self._lock:
            self._failures.extend([(endpoint, status)] * n)

    def fail_next_loads(self, n: int = 1, *, message: str = "[INTERNAL_ERROR]injected failure") -> None:
        """The next ``n`` loads answer ``Status: Fail`` (nothing loaded; the label stays free)."""
        with self._lock:
            self._fail_loads.extend([message] * n)

    def drop_next_after_apply(self, n: int = 1) -> None:
        """The next ``n`` loads are applied, then the connection closes without an answer."""
        with self._lock:
            self._drops += n

    def reset_faults(self) -> None:
        """Cancel pending injected failures, drops, delay and hold."""
        with self._lock:
            self._failures.clear()
            self._fail_loads.clear()
            self._drops = 0
            self.delay_s = self.hold_s = 0.0

    def expire_precommitted(self) -> List[int]:
        """Abort every pre-committed transaction, as Doris does after the pre-commit timeout."""
        with self._lock:
            expired = [t for t in self._txns.values() if t.status == "PRECOMMITTED"]
            for txn in expired:
                txn.status, txn.reason = "ABORTED", "timeout by txn manager"
            return [t.txn_id for t in expired]

    def forget_labels(self) -> None:
        """Forget finished and aborted labels, as Doris does after ``streaming_label_keep_max_second``."""
        with self._lock:
            for key, txn_id in list(self._labels.items()):
                if self._txns[txn_id].status in ("VISIBLE", "COMMITTED", "ABORTED"):
                    del self._labels[key]

    # ------------------------------------------------------------------ request handling
    @staticmethod
    def _reply(h: BaseHTTPRequestHandler, status: int, doc: Any = None, *,
               headers: Optional[Dict[str, str]] = None, close: bool = False) -> None:
        body = json.dumps(doc).encode() if doc is not None else b""
        h.send_response(status)
        h.send_header("Content-Type", "application/json; charset=utf-8")
        h.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            h.send_header(name, value)
        if close:
            h.send_header("Connection", "close")
            h.close_connection = True
        h.end_headers()
        h.wfile.write(body)

    def _authorized(self, h: BaseHTTPRequestHandler) -> bool:
        auth = h.headers.get("Authorization", "")
        if not auth.startswith("Basic "):
            return False
        try:
            user, _, password = base64.b64decode(auth[6:]).decode().partition(":")
        except ValueError:
            return False
        return (user, password) == (self.user, self.password)

    def _take_failure(self, kind: str) -> Optional[int]:
        with self._lock:
            for i, (endpoint, status) in enumerate(self._failures):
                if endpoint in ("any", kind):
                    del self._failures[i]
                    return status
        return None

    def _dispatch(self, h: BaseHTTPRequestHandler, method: str) -> None:
        role = getattr(h, "role", "fe")
        url = urllib.parse.urlsplit(h.path)
        parts = [urllib.parse.unquote(p) for p in url.path.strip("/").split("/")]
        kind = "unknown"
        if method == "PUT" and len(parts) == 4 and parts[0] == "api" and parts[3] == "_stream_load":
            kind = "stream_load"
        elif method == "PUT" and len(parts) in (3, 4) and parts[0] == "api" and parts[-1] == "_stream_load_2pc":
            kind = "2pc"
        elif method == "GET" and len(parts) == 3 and parts[0] == "api" and parts[2] == "get_load_state":
            kind = "load_state"
        expects_100 = h.headers.get("Expect", "").lower() == "100-continue"
        body = b""
        # The FE never reads a body announced with "Expect: 100-continue" (the client waits).
        if method == "PUT" and not (role == "fe" and expects_100):
            body = h.rfile.read(int(h.headers.get("Content-Length") or 0))
        with self._lock:
            self.requests.append({
                "role": role, "kind": kind, "method": method, "path": h.path,
                "authorized": self._authorized(h), "body_bytes": len(body),
                "headers": {k.lower(): v for k, v in h.headers.items() if k.lower() != "authorization"},
            })
        if self.delay_s:
            time.sleep(self.delay_s)
        failure = self._take_failure(kind)
        if failure is not None:
            self._reply(h, failure, {"status": "FAILED", "msg": f"injected HTTP {failure}"}, close=True)
            return
        if not self._authorized(h):
            self._reply(h, 401, {"code": 401, "msg": "Unauthorized",
                                 "data": f"Access denied for user '{self.user}'"}, close=True)
            return
        if kind in ("stream_load", "2pc") and role == "fe":
            location = f"{self.be_url}{h.path}"
            self._reply(h, 307, headers={"Location": location}, close=True)
            return
        if kind == "stream_load":
            self._stream_load(h, parts[1], parts[2], body)
        elif kind == "2pc":
            self._two_phase(h, parts[1], parts[2] if len(parts) == 4 else "")
        elif kind == "load_state":
            label = urllib.parse.parse_qs(url.query).get("label", [""])[0]
            self._reply(h, 200, {"msg": "success", "code": 0, "data": self.label_state(parts[1], label),
                                 "count": 0})
        else:
            self._reply(h, 404, {"status": "FAILED", "msg": f"no such endpoint {method} {url.path}"}, close=True)

    @staticmethod
    def _parse_rows(headers: Any, body: bytes) -> List[Any]:
        fmt = headers.get("format", "csv").lower()
        text = body.decode("utf-8")
        if fmt == "json":
            doc = json.loads(text) if text.strip() else []
            if headers.get("strip_outer_array", "false").lower() == "true":
                if not isinstance(doc, list):
                    raise ValueError("strip_outer_array is true but the body is not a JSON array")
                return doc
            return [doc]
        if fmt != "csv":
            raise ValueError(f"unsupported format {fmt}")
        sep = _decode_separator(headers.get("column_separator", "\t"))
        delim = _decode_separator(headers.get("line_delimiter", "\n"))
        lines = text.split(delim)
        if lines and lines[-1] == "":
            lines.pop()
        return [tuple(None if v == "\\N" else v for v in line.split(sep)) for line in lines]

    def _load_doc(self, txn: _Txn, status: str, message: str, nrows: int, nbytes: int) -> Dict[str, Any]:
        return {
            "TxnId": txn.txn_id, "Label": txn.label, "Comment": "",
            "TwoPhaseCommit": "true" if txn.two_phase else "false", "Status": status, "Message": message,
            "NumberTotalRows": nrows, "NumberLoadedRows": nrows if status != "Fail" else 0,
            "NumberFilteredRows": 0, "NumberUnselectedRows": 0, "LoadBytes": nbytes, "LoadTimeMs": 1,
            "BeginTxnTimeMs": 0, "StreamLoadPutTimeMs": 0, "ReadDataTimeMs": 0, "WriteDataTimeMs": 0,
            "CommitAndPublishTimeMs": 0,
        }

    def _new_txn(self, db: str, table: str, label: str, two_phase: bool) -> _Txn:
        self._next_txn += 1
        txn = _Txn(self._next_txn, db, table, label, two_phase)
        self._txns[txn.txn_id] = txn
        self._labels[(db, label)] = txn.txn_id
        return txn

    def _stream_load(self, h: BaseHTTPRequestHandler, db: str, table: str, body: bytes) -> None:
        label = h.headers.get("label") or f"double_{uuid.uuid4().hex}"
        two_phase = h.headers.get("two_phase_commit", "false").lower() == "true"
        with self._lock:
            existing_id = self._labels.get((db, label))
            if existing_id is not None and self._txns[existing_id].status != "ABORTED":
                existing = self._txns[existing_id]
                self._reply(h, 200, {
                    "TxnId": -1, "Label": label, "TwoPhaseCommit": "true" if two_phase else "false",
                    "Status": "Label Already Exists", "ExistingJobStatus": _JOB_STATUS[existing.status],
                    "Message": f"Label [{label}] has already been used, relate to txn [{existing.txn_id}]",
                })
                return
            txn = self._new_txn(db, table, label, two_phase)
            fail_message = self._fail_loads.pop(0) if self._fail_loads else None
            try:
                rows = self._parse_rows(h.headers, body)
            except (ValueError, UnicodeDecodeError) as exc:
                fail_message = f"[DATA_QUALITY_ERROR]{exc}"
                rows = []
            if fail_message is not None:
                txn.status, txn.reason = "ABORTED", fail_message
                self._reply(h, 200, self._load_doc(txn, "Fail", fail_message, len(rows), len(body)))
                return
        if self.hold_s:
            time.sleep(self.hold_s)  # the label is RUNNING meanwhile
        with self._lock:
            if txn.status != "PREPARE":  # aborted while it was running
                self._reply(h, 200, self._load_doc(txn, "Fail", f"[CANCELLED]{txn.reason}", 0, len(body)))
                return
            if two_phase:
                txn.status, txn.rows = "PRECOMMITTED", rows
            else:
                txn.status = "VISIBLE"
                self._tables.setdefault((db, table), []).extend(rows)
            drop = self._drops > 0
            if drop:
                self._drops -= 1
        if drop:  # applied, but the client never hears about it
            h.close_connection = True
            try:
                h.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        self._reply(h, 200, self._load_doc(txn, "Success", "OK", len(rows), len(body)))

    def _two_phase(self, h: BaseHTTPRequestHandler, db: str, table: str) -> None:
        operation = h.headers.get("txn_operation", "").lower()
        txn_id_header, label = h.headers.get("txn_id"), h.headers.get("label")
        with self._lock:
            if txn_id_header is not None:
                ref = f"transaction [{txn_id_header}]"
                found = self._txns.get(int(txn_id_header)) if txn_id_header.isdigit() else None
                if found is not None and found.db != db:
                    found = None
            elif label:
                ref = f"transaction with label [{label}]"
                found_id = self._labels.get((db, label))
                found = self._txns.get(found_id) if found_id is not None else None
            else:
                self._reply(h, 200, {"status": "Fail", "msg": "txn_id or label is required"})
                return
            if operation not in ("commit", "abort"):
                self._reply(h, 200, {"status": "Fail", "msg": f"unsupported txn_operation {operation!r}"})
                return
            if found is None:
                self._reply(h, 200, {"status": "Fail", "msg": f"{ref} not found"})
                return
            txn = found
            ref = f"transaction [{txn.txn_id}]"
            if operation == "commit":
                if txn.status == "PRECOMMITTED":
                    txn.status = "VISIBLE"
                    self._tables.setdefault((db, txn.table), []).extend(txn.rows)
                    doc = {"status": "Success", "msg": f"{ref} commit successfully."}
                elif txn.status in ("COMMITTED", "VISIBLE"):
                    doc = {"status": "Fail", "msg": f"{ref} is already {txn.status}, not pre-committed."}
                elif txn.status == "ABORTED":
                    doc = {"status": "Fail", "msg": f"{ref} is already aborted, abort reason: {txn.reason}"}
                else:
                    doc = {"status": "Fail", "msg": f"{ref} is {txn.status}, not pre-committed."}
            else:
                if txn.status in ("PRECOMMITTED", "PREPARE"):
                    txn.status, txn.reason, txn.rows = "ABORTED", "user abort", []
                    doc = {"status": "Success", "msg": f"{ref} abort successfully."}
                elif txn.status == "ABORTED":
                    doc = {"status": "Fail", "msg": f"{ref} is already aborted, abort reason: {txn.reason}"}
                else:
                    doc = {"status": "Fail", "msg": f"{ref} is already {txn.status}, could not abort."}
        self._reply(h, 200, doc)
