"""Keep secrets out of every log line: a process-wide set of secret strings, redacted at the source.

This is the library's one scrubber. Configuration parsers call :func:`register_secret` for each
password they see: kafkaParams' ``sasl.password`` / ``sasl.jaas.config`` / ``ssl.key.password``
(:mod:`~dstream_exactly_once.kafka._params`), store URL passwords (userinfo and ``password=`` query
items, :func:`~dstream_exactly_once.stores._url.parse_url`) and Doris passwords with their HTTP Basic
token (:class:`~dstream_exactly_once.sinks.doris.DorisStreamLoadClient`). Error messages built from a
backend's text go through :func:`redact` (and :func:`redact_exception_chain` for the chained cause);
every message, ``repr`` and log line that quotes a URL shows it through :func:`redact_url`.

From the first registration on, every :class:`logging.LogRecord` created in this
process — by this library, by kafka-python (which logs its whole configuration and the SASL PLAIN
token at DEBUG), by any library — is scrubbed when it is created, before any filter, handler or
formatter sees it. That is done by a log-record factory wrapped around the current one, so it
does not depend on which logger the record was created on (a filter on the ``kafka`` logger would
miss records of ``kafka.conn``: logger filters do not apply to records propagated from
children), nor on which handlers the application installs.

A record that mentions a secret — in its message, its arguments, its exception (with the whole
``__cause__``/``__context__`` chain) or its stack — has its message replaced by the formatted,
redacted text (``args`` emptied) and its exception replaced by the redacted traceback text in
``exc_text`` (``exc_info`` cleared, so no handler can format the original exception again).
Records without a secret are left untouched.

Each secret is also matched in the forms it takes inside other text: ``repr`` of the string and
of its UTF-8 bytes (so the SASL PLAIN token ``b'\\x00user\\x00password'`` is caught), JSON and
URL-quoted forms. Records that reach a process without going through the factory (a
``logging.handlers.SocketHandler`` receiver, ``logging.makeLogRecord``) can be scrubbed by adding
:class:`SecretFilter` to the handler.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import traceback
from typing import Any, Callable, FrozenSet, Optional, Set, Union
from urllib.parse import quote, quote_plus

__all__ = ["MASK", "SECRET_OPTIONS", "SecretFilter", "redact", "redact_exception_chain", "redact_url",
           "register_secret", "registered_secrets"]

#: what a secret is replaced with
MASK = "***"

_lock = threading.Lock()
_secrets: Set[str] = set()
_pattern: Optional[re.Pattern[str]] = None
_previous_factory: Optional[Callable[..., logging.LogRecord]] = None

_URL_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-_]*)://")
#: URL query items holding secrets (libpq's among them); a value runs to the next "&" (a "#" in it
#: is part of it, not a fragment)
SECRET_OPTIONS = ("password", "sslpassword", "oauth_client_secret", "scram_client_key", "scram_server_key")
_QUERY_SECRET = re.compile(r"((?:^|[?&;#])(?:" + "|".join(SECRET_OPTIONS) + r")=)[^&;]*", re.IGNORECASE)


def _encode(value: str) -> bytes:
    """UTF-8, with the bytes a ``surrogateescape`` decode kept (lone surrogates passed through)."""
    try:
        return value.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return value.encode("utf-8", "surrogatepass")


def _forms(value: str) -> Set[str]:
    """The texts ``value`` can appear as inside a log line or an exception message."""
    raw = _encode(value)
    bases = {value, repr(value)[1:-1], ascii(value)[1:-1], repr(raw)[2:-1], json.dumps(value)[1:-1],
             json.dumps(value, ensure_ascii=False)[1:-1], quote(raw, safe=""), quote_plus(raw, safe="")}
    out = set()
    for base in bases:
        # repr picks its quote character from the whole text it is part of, so both escapings occur
        out.update({base, base.replace("'", "\\'"), base.replace('"', '\\"')})
    out.discard("")
    return out


def register_secret(value: Union[str, bytes, None]) -> None:
    """Never let ``value`` appear in a log record of this process from now on.

    Empty values and ``None`` are ignored. Registering installs the redacting log-record factory
    (once per process). Call it wherever a password enters the library (config parsing, URL
    parsing, unpickling on an executor): the set is per process.
    """
    global _pattern
    if value is None:
        return
    if isinstance(value, bytes):
        text = value.decode("utf-8", "surrogateescape")
        forms = _forms(text) | {repr(value)[2:-1]}
    elif isinstance(value, str):
        forms = _forms(value)
    else:
        raise TypeError(f"register_secret takes str or bytes, got {type(value).__name__} (value hidden)")
    if not forms or forms <= _secrets:
        return
    with _lock:
        _secrets.update(forms)
        ordered = sorted(_secrets, key=len, reverse=True)  # the longest form wins where forms overlap
        _pattern = re.compile("|".join(re.escape(s) for s in ordered))
        _install()


def registered_secrets() -> FrozenSet[str]:
    """Every registered form (for tests and diagnostics; never log it)."""
    return frozenset(_secrets)


def redact(text: str) -> str:
    """``text`` with every registered secret replaced by :data:`MASK`."""
    pattern = _pattern
    return text if pattern is None else pattern.sub(MASK, text)


def redact_exception_chain(exc: BaseException) -> None:
    """Redact the string arguments of ``exc`` and of its ``__cause__``/``__context__`` chain in place:
    a translated error keeps the backend's exception as its cause, whose message may echo a
    connection string."""
    seen: Set[int] = set()
    node: Optional[BaseException] = exc
    while node is not None and id(node) not in seen:
        seen.add(id(node))
        if any(isinstance(a, str) and _has_secret(a) for a in node.args):
            node.args = tuple(redact(a) if isinstance(a, str) else a for a in node.args)
        node = node.__cause__ or node.__context__


def _has_secret(text: str) -> bool:
    pattern = _pattern
    return pattern is not None and pattern.search(text) is not None


def _safe_text(fn: Callable[[], str]) -> str:
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - a broken __repr__/__str__ must not break logging
        return f"<unprintable: {type(exc).__name__}>"


def _exception_chain_text(exc: BaseException) -> str:
    """The traceback text of ``exc`` and its chain, plus each exception's ``repr`` (its args)."""
    parts = [_safe_text(lambda: "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))]
    seen: Set[int] = set()
    current: Optional[BaseException] = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        parts.append(_safe_text(lambda e=current: repr(e)))  # type: ignore[misc]
        current = current.__cause__ or current.__context__
    return "\n".join(parts)


def scrub_record(record: logging.LogRecord) -> logging.LogRecord:
    """Redact ``record`` in place (see the module docstring); returns it."""
    if _pattern is None:
        return record
    if record.msg is not None or record.args:
        message = _safe_text(record.getMessage)
        if message.startswith("<unprintable"):
            message = f"{_safe_text(lambda: repr(record.msg))} % {_safe_text(lambda: repr(record.args))}"
        if _has_secret(message) or (record.args and _has_secret(_safe_text(lambda: repr(record.args)))):
            record.msg = redact(message)
            record.args = ()
    exc_info = record.exc_info
    if exc_info and exc_info[1] is not None:
        text = _exception_chain_text(exc_info[1])
        if _has_secret(text):
            record.exc_text = redact(_safe_text(lambda: "".join(
                traceback.format_exception(exc_info[0], exc_info[1], exc_info[2]))).rstrip("\n"))
            record.exc_info = None
    if record.exc_text and _has_secret(record.exc_text):
        record.exc_text = redact(record.exc_text)
    if record.stack_info and _has_secret(record.stack_info):
        record.stack_info = redact(record.stack_info)
    return record


def _factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
    assert _previous_factory is not None
    return scrub_record(_previous_factory(*args, **kwargs))


def _install() -> None:
    """Wrap the current log-record factory once (caller holds ``_lock``)."""
    global _previous_factory
    if _previous_factory is None:
        _previous_factory = logging.getLogRecordFactory()
        logging.setLogRecordFactory(_factory)


class SecretFilter(logging.Filter):
    """A filter for handlers that receive records not created in this process; never drops one."""

    def filter(self, record: logging.LogRecord) -> bool:
        scrub_record(record)
        return True


def redact_url(url: str) -> str:
    """``url`` with any password (in the userinfo or a ``password=`` query item) replaced by ``***``.

    The one function every message, ``repr`` and log line that quotes a URL goes through (store URLs,
    the Doris FE URL, Kafka broker addresses). Works on malformed URLs too, and on a
    ``user:password@host`` without a scheme: when in doubt, more is hidden rather than less.
    """
    text = str(url)
    m = _URL_SCHEME.match(text)
    if m or "@" in text:
        prefix, rest = (text[: m.end()], text[m.end():]) if m else ("", text)
        head = re.split(r"[?#]", rest, maxsplit=1)[0]
        # userinfo ends at the last "@" of the authority; an unencoded "?"/"#" in a password hides
        # the "@" from ``head``, so fall back to the last "@" anywhere.
        at = head.rfind("@") if "@" in head else rest.rfind("@")
        if at >= 0 and ":" in rest[:at]:
            user = rest[: rest.index(":")]
            rest = f"{user}:***{rest[at:]}"
        text = prefix + rest
    return _QUERY_SECRET.sub(r"\1***", text)
