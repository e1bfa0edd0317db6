"""The Doris Stream Load wire format: states, outcomes, load results, request bodies, answer patterns.

Pure values and functions, no I/O: what a Stream Load sends (the body for a batch of rows) and
what Doris's answers mean (statuses, label states, the messages of the 2PC endpoint). The client
(:mod:`._client`) does the talking.
"""

from __future__ import annotations

import enum
import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, List, Mapping, Optional, Union

from ...errors import ConfigurationError

__all__ = [
    "LoadResult",
    "LoadState",
    "TxnOutcome",
    "TxnRef",
    "check_label",
    "encode_rows",
    "header_separator",
    "int_or_none",
]

TxnRef = Union[int, str]  # a transaction id, or the label that names it

FORMATS = ("csv", "json")
OK_STATUSES = ("Success", "Publish Timeout")
FINISHED_JOB_STATUSES = ("FINISHED", "VISIBLE", "COMMITTED")
#: Headers the client sets itself; ``properties`` may not override them.
RESERVED_HEADERS = frozenset({
    "label", "format", "columns", "column_separator", "line_delimiter", "timeout", "two_phase_commit",
    "strip_outer_array", "txn_id", "txn_operation", "authorization", "expect", "content-length",
    "host", "connection", "transfer-encoding",
})
LABEL_EXISTS = re.compile(r"Label \[(.*)\] has already been used, relate to txn \[(\d+)\]")
ALREADY_COMMITTED = re.compile(r"is already (COMMITTED|VISIBLE)\b", re.IGNORECASE)
ALREADY_ABORTED = re.compile(r"is already aborted", re.IGNORECASE)
NOT_FOUND = re.compile(r"not found|does not exist|doesn't exist", re.IGNORECASE)


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


def int_or_none(value: Any) -> Optional[int]:
    """``value`` as an int >= 0, or None when it is missing, not a number or negative."""
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return number if number >= 0 else None


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

    @classmethod
    def from_answer(cls, label: Optional[str], doc: Mapping[str, Any], attempts: int, *, replayed: bool,
                    two_phase: bool, txn_id: Optional[int] = None) -> LoadResult:
        """The result described by Doris's JSON answer ``doc`` to a load under ``label``."""
        return cls(
            label=str(doc.get("Label") or label) if (doc.get("Label") or label) else None,
            status=str(doc.get("Status", "")),
            txn_id=txn_id if txn_id is not None else int_or_none(doc.get("TxnId")),
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


def check_label(label: object) -> str:
    """``label`` if it can travel in a header, else :class:`ConfigurationError`."""
    if not isinstance(label, str) or not label or not label.isprintable():
        raise ConfigurationError(f"a Doris label must be a non-empty printable str, got {label!r}")
    return label


def header_separator(value: str) -> str:
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


def encode_rows(rows: Iterable[Any], *, format: str, column_separator: str, line_delimiter: str,
                target: str) -> bytes:
    """The Stream Load body for ``rows`` (``target`` names the table in error messages).

    ``csv``: a row is a ``str``/``bytes`` line, or a sequence of values joined by
    ``column_separator`` (``None`` → ``\\N``); a value containing the separator or the line
    delimiter raises :class:`ConfigurationError` (Doris would split it). ``json``: rows are JSON
    values, sent as one array (to be loaded with ``strip_outer_array: true``).
    """
    if format == "json":
        try:
            return json.dumps(list(rows), ensure_ascii=False, separators=(",", ":"),
                              allow_nan=False).encode("utf-8")
        except (TypeError, ValueError) as exc:
            raise ConfigurationError(f"rows for {target} are not JSON-serialisable: {exc}") from exc
    lines: List[str] = []
    for index, row in enumerate(rows):
        if isinstance(row, (str, bytes)):
            line = row.decode("utf-8") if isinstance(row, bytes) else row
        elif isinstance(row, (list, tuple)):
            values = [_csv_field(v) for v in row]
            for value in values:
                if column_separator in value:
                    raise ConfigurationError(
                        f"row {index} for {target}: value {value[:80]!r} contains the "
                        f"column separator {column_separator!r}"
                    )
            line = column_separator.join(values)
        else:
            raise ConfigurationError(
                f"row {index} for {target} must be a str, bytes, list or tuple in csv "
                f"format, got {type(row).__name__}"
            )
        if line_delimiter in line:
            raise ConfigurationError(
                f"row {index} for {target}: {line[:80]!r} contains the line delimiter {line_delimiter!r}"
            )
        lines.append(line)
    if not lines:
        return b""
    return (line_delimiter.join(lines) + line_delimiter).encode("utf-8")
