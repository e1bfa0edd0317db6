"""Store URLs: parsing, option handling and password redaction.

A password must never reach a ``repr``, a log line or an error message, so everything that shows
a URL goes through :func:`redact_url` first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, Mapping, Optional, Tuple
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from ..errors import ConfigurationError

__all__ = [
    "StoreURL", "check_options", "float_option", "parse_qsl_dict", "parse_url", "redact_url", "url_scheme",
    "with_options",
]

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://")
_QUERY_SECRET = re.compile(r"((?:^|[?&;])(?:ssl)?password=)[^&#;]*", re.IGNORECASE)


def url_scheme(url: str) -> str:
    """The lower-cased scheme of ``url`` (``""`` when it has none)."""
    m = _SCHEME.match(url)
    return m.group(1).lower() if m else ""


def redact_url(url: str) -> str:
    """``url`` with any password (in the userinfo or a ``password=`` query item) replaced by ``***``.

    Works on malformed URLs too: when in doubt, more is hidden rather than less.
    """
    text = str(url)
    m = _SCHEME.match(text)
    if m:
        prefix, rest = text[: m.end()], text[m.end():]
        head = re.split(r"[?#]", rest, maxsplit=1)[0]
        # userinfo ends at the last "@" of the authority; an unencoded "?"/"#" in a password hides
        # the "@" from ``head``, so fall back to the last "@" anywhere.
        at = head.rfind("@") if "@" in head else rest.rfind("@")
        if at >= 0 and ":" in rest[:at]:
            user = rest[: rest.index(":")]
            rest = f"{user}:***{rest[at:]}"
        text = prefix + rest
    return _QUERY_SECRET.sub(r"\1***", text)


@dataclass(frozen=True)
class StoreURL:
    """The parts of a server store URL (``scheme://[user[:password]@]host[:port][/path][?query]``)."""

    scheme: str
    host: str
    port: Optional[int]
    username: Optional[str]
    password: Optional[str]
    path: str
    query: Tuple[Tuple[str, str], ...]

    def address(self, default_port: int) -> str:
        """``host:port`` for messages (never includes credentials)."""
        return f"{self.host}:{self.port or default_port}"

    def options(self) -> Dict[str, str]:
        return dict(self.query)

    def __repr__(self) -> str:  # never shows the password
        return (f"StoreURL(scheme={self.scheme!r}, host={self.host!r}, port={self.port!r}, "
                f"username={self.username!r}, password={'***' if self.password else None}, path={self.path!r})")


def parse_url(url: str, *, default_host: str = "localhost") -> StoreURL:
    """Split ``url``; a malformed one raises :class:`ConfigurationError` (password redacted)."""
    if not isinstance(url, str):
        raise ConfigurationError(f"store URL must be a str, got {type(url).__name__}")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ConfigurationError(f"malformed store URL {redact_url(url)!r}: {exc}") from None
    return StoreURL(
        scheme=parts.scheme.lower(),
        host=parts.hostname or default_host,
        port=port,
        username=unquote(parts.username) if parts.username else None,
        password=unquote(parts.password) if parts.password is not None else None,
        path=parts.path,
        query=tuple(parse_qsl(parts.query, keep_blank_values=True)),
    )


def with_options(url: str, options: Mapping[str, object]) -> str:
    """``url`` with ``options`` merged into its query string (options override the URL's).

    Store options live in the URL so that a store pickled as ``(url, app_id)`` keeps them.
    """
    if not options:
        return url
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    query.update({k: str(v) for k, v in options.items()})
    return urlunsplit(parts._replace(query=urlencode(query)))


def parse_qsl_dict(query: str) -> Dict[str, str]:
    """The items of a URL query string (the last value of a repeated key wins)."""
    return dict(parse_qsl(query, keep_blank_values=True))


def float_option(url: str, options: Mapping[str, str], name: str, default: float) -> float:
    """A positive float option from a URL query, with a precise error naming it."""
    raw = options.get(name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0 or value == float("inf"):
        raise ConfigurationError(f"store option {name} must be a positive number of seconds, got {raw!r} "
                                 f"in {redact_url(url)!r}")
    return value


def check_options(url: str, options: Mapping[str, str], allowed: Tuple[str, ...]) -> None:
    """Reject query options a backend does not understand, naming them and the allowed ones."""
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ConfigurationError(f"unknown store option(s) {', '.join(unknown)} in {redact_url(url)!r}; "
                                 f"supported: {', '.join(allowed) or 'none'}")
