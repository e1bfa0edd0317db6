"""Checks of the Doris client's settings: FE URL, names, numbers, columns, extra Stream Load headers.

Each check returns the normalised value or raises
:class:`~dstream_exactly_once.errors.ConfigurationError` naming the setting, the bad value (a URL
only with its password redacted) and what is allowed — before any request is sent.
"""

from __future__ import annotations

import urllib.parse
from typing import Any, Dict, Mapping, Optional

from ..._redaction import redact_url
from ...errors import ConfigurationError
from ._protocol import RESERVED_HEADERS, TxnRef

__all__ = ["check_columns", "check_fe_url", "check_name", "check_number", "check_properties", "check_txn"]


def check_name(what: str, value: object) -> str:
    """A database or table name: a non-empty str without ``/`` or whitespace."""
    if not isinstance(value, str) or not value.strip():
        raise ConfigurationError(f"Doris {what} must be a non-empty str, got {value!r}")
    if "/" in value or any(ch.isspace() for ch in value):
        raise ConfigurationError(f"Doris {what} must not contain '/' or whitespace, got {value!r}")
    return value


def check_number(what: str, value: Any, *, minimum: float, integer: bool = False) -> Any:
    """An int (``integer=True``) or a number, not a bool, at least ``minimum``."""
    wrong_kind = isinstance(value, bool) or not isinstance(value, int if integer else (int, float))
    if wrong_kind or value < minimum:
        kind = "an int" if integer else "a number"
        raise ConfigurationError(f"{what} must be {kind} >= {minimum}, got {value!r}")
    return value


def check_fe_url(fe_url: object) -> str:
    """``http(s)://host[:port]`` without credentials, path or query; returned without a trailing ``/``."""
    if not isinstance(fe_url, str) or not fe_url:
        raise ConfigurationError(f"Doris fe_url must be a non-empty str like 'http://fe:8030', got "
                                 f"{redact_url(fe_url) if isinstance(fe_url, str) else type(fe_url).__name__!r}")
    try:
        parts = urllib.parse.urlsplit(fe_url)
        parts.port  # noqa: B018 - validates the port
    except ValueError as exc:
        raise ConfigurationError(f"Doris fe_url {redact_url(fe_url)!r} is not a valid URL: {exc}") from None
    if parts.username is not None or parts.password is not None:
        raise ConfigurationError(
            f"Doris fe_url {redact_url(fe_url)!r} must not carry credentials; pass user= and password="
        )
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigurationError(f"Doris fe_url must be http(s)://host[:port], got {redact_url(fe_url)!r}")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ConfigurationError(f"Doris fe_url must have no path or query (pass user= and password= to the "
                                 f"client), got {redact_url(fe_url)!r}")
    return f"{parts.scheme}://{parts.netloc}"


def check_columns(columns: object) -> Optional[str]:
    """``None``, or column names (a list, or one comma-separated str) as Doris's ``columns`` header."""
    if columns is None:
        return None
    names = columns.split(",") if isinstance(columns, str) else columns
    if not isinstance(names, (list, tuple)) or not names or not all(isinstance(c, str) and c.strip() for c in names):
        raise ConfigurationError(f"columns must be a non-empty list of column names, got {columns!r}")
    return ",".join(c.strip() for c in names)


def check_properties(properties: object) -> Dict[str, str]:
    """Extra Stream Load headers; those the client sets itself (label, format, …) are refused."""
    if properties is None:
        return {}
    if not isinstance(properties, Mapping):
        raise ConfigurationError(f"properties must be a mapping of Stream Load headers, got {properties!r}")
    out: Dict[str, str] = {}
    for key, value in properties.items():
        if not isinstance(key, str) or not key or not isinstance(value, (str, int, float)):
            raise ConfigurationError(f"Stream Load property {key!r}={value!r} must be str: str")
        if key.lower() in RESERVED_HEADERS:
            raise ConfigurationError(f"Stream Load property {key!r} is set by the client itself (use its own argument)")
        out[key] = str(value)
    return out


def check_txn(txn: object) -> TxnRef:
    """A transaction reference: an int id >= 0 (not a bool) or a non-empty printable label."""
    if isinstance(txn, bool) or not isinstance(txn, (int, str)) or (
        isinstance(txn, int) and txn < 0) or (isinstance(txn, str) and not (txn and txn.isprintable())
    ):
        raise ConfigurationError(f"a transaction is named by an int id >= 0 or a label, got {txn!r}")
    return txn
