"""Store URLs: parsing, option handling and password redaction.

A password must never reach a ``repr``, a log line or an error message, so everything that shows
a URL goes through :func:`~dstream_exactly_once.stores.redact_url` first.

Server URLs (``postgresql://``, ``redis://``, …) must percent-encode ``#``, ``?``, ``/``, ``@`` and
``%`` in a user name or password (``urllib.parse.quote(password, safe="")``): parsers disagree on
where such a URL's password ends (Python's ``urlsplit`` and libpq split it differently), so
:func:`check_server_url` refuses it instead of connecting to a host read out of the password.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Dict, Mapping, Optional, Sequence, Tuple
from urllib.parse import parse_qsl, quote, unquote, unquote_to_bytes, urlsplit

from .._redaction import _QUERY_SECRET, SECRET_OPTIONS, redact, redact_url, register_secret
from .._redaction import _URL_SCHEME as _SCHEME
from ..errors import ConfigurationError

__all__ = [
    "LIBPQ_OPTION_VALUES", "REDIS_OPTION_VALUES", "SECRET_OPTIONS", "StoreURL", "bool_option", "check_options",
    "check_option_values", "check_server_url", "float_option", "parse_qsl_dict", "parse_url", "redact_url",
    "unknown_options_error", "url_scheme", "with_options",
]

_BAD_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")

#: what each Redis URL option takes: a tuple lists the allowed values; ``"file"`` is a readable file
REDIS_OPTION_VALUES: Dict[str, object] = {
    "ssl_cert_reqs": ("none", "optional", "required"),
    "ssl_ca_certs": "file",
}
#: libpq parameters with a fixed set of values (``"int"``: a non-negative integer; ``"ports"``: one or
#: more comma-separated port numbers), checked before connecting; libpq's other parameters are
#: passed as given
LIBPQ_OPTION_VALUES: Dict[str, object] = {
    "sslmode": ("disable", "allow", "prefer", "require", "verify-ca", "verify-full"),
    "gssencmode": ("disable", "prefer", "require"),
    "channel_binding": ("disable", "prefer", "require"),
    "sslcertmode": ("disable", "allow", "require"),
    "sslnegotiation": ("postgres", "direct"),
    "target_session_attrs": ("any", "read-write", "read-only", "primary", "standby", "prefer-standby"),
    "load_balance_hosts": ("disable", "random"),
    "sslcompression": ("0", "1"),
    "keepalives": ("0", "1"),
    "keepalives_idle": "int",
    "keepalives_interval": "int",
    "keepalives_count": "int",
    "tcp_user_timeout": "int",
    "port": "ports",
}
_RULE_TEXT = {"int": "a non-negative integer", "ports": "port numbers (1-65535) separated by commas",
              "file": "the path of a readable file"}


def url_scheme(url: str) -> str:
    """The lower-cased scheme of ``url`` (``""`` when it has none)."""
    m = _SCHEME.match(url)
    return m.group(1).lower() if m else ""


def _hidden(url: str) -> str:
    """An ambiguous URL for an error message: everything before its last ``@`` (where a password
    might be) and anything after a ``#`` are replaced by ``***``."""
    m = _SCHEME.match(url)
    prefix, rest = (url[: m.end()], url[m.end():]) if m else ("", url)
    if "@" in rest:
        rest = "***@" + rest[rest.rfind("@") + 1:]
    if "#" in rest:
        rest = rest[: rest.index("#")] + "#***"
    return _QUERY_SECRET.sub(r"\1***", prefix + rest)


def check_server_url(url: str) -> None:
    """Refuse a server URL whose user name or password holds an unencoded reserved character.

    In ``scheme://user:password@host…`` the password ends at the first ``/``, ``?`` or ``#``, and
    ``@`` separates it from the host, so a raw ``#``, ``?``, ``/`` or ``@`` in a password makes the
    URL mean another host, and a ``%`` not starting an escape makes libpq echo the text around it
    (anywhere in the URL, a query password too). Such a URL is refused with
    :class:`ConfigurationError`, shown with everything that may be a password hidden, telling to
    percent-encode. Store URLs have no fragment, so any ``#`` is refused.
    """
    m = _SCHEME.match(url)
    rest = url[m.end():] if m else url
    end = min([i for i in (rest.find(c) for c in "/?#") if i >= 0], default=len(rest))
    authority, tail = rest[:end], rest[end:]
    userinfo = authority.rpartition("@")[0]
    if "#" in url:
        problem = "'#'"
    elif "@" in tail or authority.count("@") > 1:
        problem = "'@', '/' or '?' where a user name or password seems to be"
    elif _BAD_PERCENT.search(userinfo + tail):
        problem = "'%' not followed by two hex digits"
    else:
        return
    raise ConfigurationError(
        f"store URL {_hidden(url)!r} contains {problem}: percent-encode these characters in user names, "
        f"passwords and query values ('#' as %23, '?' as %3F, '/' as %2F, '@' as %40, '%' as %25; "
        f"urllib.parse.quote(password, safe='') does it)")


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
    raw_password: Optional[str] = None  # as written in the URL (percent-encoded)
    raw_query: str = ""  # as written in the URL
    #: every ``(host, port)`` of a multi-host URL (``parse_url(..., multi_host=True)``), in URL order
    hosts: Tuple[Tuple[str, Optional[int]], ...] = ()

    def address(self, default_port: int) -> str:
        """``host:port`` for messages (never includes credentials)."""
        return f"{self.host}:{self.port or default_port}"

    def options(self) -> Dict[str, str]:
        return dict(self.query)

    def secrets(self) -> Tuple[str, ...]:
        """Every spelling of the URL's passwords (userinfo and ``password=`` query items, decoded and
        as written), longest first: what must be scrubbed from any text shown to users."""
        found = {self.password, self.raw_password}
        for key, value in self.query:
            if key.lower() in SECRET_OPTIONS:
                found.update((value, quote(value, safe="")))
        for item in self.raw_query.split("&"):
            key, _, value = item.partition("=")
            if unquote(key).lower() in SECRET_OPTIONS:
                found.add(value)
        return tuple(sorted((s for s in found if s), key=len, reverse=True))

    def __post_init__(self) -> None:
        for secret in self.secrets():  # the URL is parsed where its passwords enter the library
            register_secret(secret)

    def scrub(self, text: str) -> str:
        """``text`` with every spelling of the URL's passwords (and any other registered secret)
        replaced by ``***``."""
        return redact(text)

    def __repr__(self) -> str:  # never shows the password
        return (f"StoreURL(scheme={self.scheme!r}, host={self.host!r}, port={self.port!r}, "
                f"username={self.username!r}, password={'***' if self.password else None}, path={self.path!r})")


def parse_url(url: str, *, default_host: str = "localhost", multi_host: bool = False) -> StoreURL:
    """Split a server ``url``; a malformed or ambiguous one raises :class:`ConfigurationError`
    (passwords hidden; see :func:`check_server_url`).

    With ``multi_host`` the host part may list several ``host[:port]`` separated by commas
    (``scheme://user:pw@h1:7000,h2:7001/…``; IPv6 hosts in brackets): :attr:`StoreURL.hosts` holds
    them all, ``host``/``port`` the first."""
    if not isinstance(url, str):
        raise ConfigurationError(f"store URL must be a str, got {type(url).__name__}")
    check_server_url(url)
    hosts: Tuple[Tuple[str, Optional[int]], ...] = ()
    if multi_host:
        hosts, url_one = _split_hosts(url)
    try:
        parts = urlsplit(url_one if multi_host else url)
        port = parts.port
    except ValueError as exc:
        # after check_server_url the text of a port error comes from the host part, never the password
        raise ConfigurationError(f"malformed store URL {redact_url(url)!r}: {exc}") from None
    try:
        password = None if parts.password is None else unquote_to_bytes(parts.password).decode("utf-8")
        username = unquote_to_bytes(parts.username).decode("utf-8") if parts.username else None
    except UnicodeDecodeError:
        raise ConfigurationError(f"the user name or password of store URL {redact_url(url)!r} is not "
                                 f"percent-encoded UTF-8") from None
    return StoreURL(
        scheme=parts.scheme.lower(),
        host=parts.hostname or default_host,
        port=port,
        username=username,
        password=password,
        path=parts.path,
        query=tuple(parse_qsl(parts.query, keep_blank_values=True)),
        raw_password=parts.password,
        raw_query=parts.query,
        hosts=hosts,
    )


def _split_hosts(url: str) -> Tuple[Tuple[Tuple[str, Optional[int]], ...], str]:
    """The ``(host, port)`` list of a multi-host ``url`` and ``url`` with only its first host."""
    m = _SCHEME.match(url)
    start = m.end() if m else 0
    rest = url[start:]
    end = min([i for i in (rest.find(c) for c in "/?") if i >= 0], default=len(rest))
    userinfo, at, hostlist = rest[:end].rpartition("@")
    hosts = []
    for item in hostlist.split(","):
        try:
            probe = urlsplit("x://" + item)
            host, port = probe.hostname, probe.port
        except ValueError as exc:
            raise ConfigurationError(f"bad host {item!r} in store URL {redact_url(url)!r}: {exc}; "
                                     f"list hosts as host[:port],host[:port]") from None
        if not host or probe.path or probe.username is not None:
            raise ConfigurationError(f"bad host {item!r} in store URL {redact_url(url)!r}; "
                                     f"list hosts as host[:port],host[:port]")
        hosts.append((host, port))
    first = hostlist.split(",")[0]
    return tuple(hosts), url[:start] + userinfo + at + first + rest[end:]


def with_options(url: str, options: Mapping[str, object]) -> str:
    """``url`` with ``options`` merged into its query string (options override the URL's items).

    Store options live in the URL so that a store pickled as ``(url, app_id)`` keeps them. Only the
    query is touched, as text: the URL's other parts (a ``sqlite:////absolute`` path, an encoded
    password) and its own query items stay exactly as written; option values are percent-encoded.
    """
    if not options:
        return url
    base, _, query = url.partition("?")
    kept = [item for item in query.split("&") if item and unquote(item.partition("=")[0]) not in options]
    added = [f"{quote(str(k), safe='')}={quote(str(v), safe='')}" for k, v in options.items()]
    return base + "?" + "&".join(kept + added)


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


def bool_option(url: str, options: Mapping[str, str], name: str, default: bool) -> bool:
    """A true/false option from a URL query (``true``/``false``, ``1``/``0``, ``yes``/``no``)."""
    raw = options.get(name)
    if raw is None:
        return default
    value = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}.get(raw.lower())
    if value is None:
        raise ConfigurationError(redact(f"store option {name} must be true or false, got {raw!r} in "
                                        f"{redact_url(url)!r}"))
    return value


def check_option_values(url: str, options: Mapping[str, str], rules: Mapping[str, object]) -> None:
    """Refuse an option value ``rules`` does not allow (see :data:`REDIS_OPTION_VALUES`,
    :data:`LIBPQ_OPTION_VALUES`), before anything connects: a :class:`ConfigurationError` (not
    retriable) naming the option, the value and what is allowed. Secrets never show."""
    for name, raw in options.items():
        rule = rules.get(name)
        if rule is None or _allowed(rule, raw):
            continue
        allowed = f"one of {', '.join(rule)}" if isinstance(rule, tuple) else _RULE_TEXT[str(rule)]
        shown = "***" if name.lower() in SECRET_OPTIONS else repr(raw)
        raise ConfigurationError(redact(f"store option {name} must be {allowed}, got {shown} in {redact_url(url)!r}"))


def _allowed(rule: object, raw: str) -> bool:
    if isinstance(rule, tuple):
        return raw in rule
    if rule == "int":
        return raw.isascii() and raw.isdigit()
    if rule == "ports":
        return all(p.isascii() and p.isdigit() and 0 < int(p) < 65536 for p in raw.split(","))
    return os.path.isfile(raw) and os.access(raw, os.R_OK)  # "file"


def check_options(url: str, options: Mapping[str, str], allowed: Tuple[str, ...]) -> None:
    """Reject query options a backend does not understand, naming them and the allowed ones."""
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise unknown_options_error(unknown, allowed, f"in {redact_url(url)!r}")


def unknown_options_error(unknown: Sequence[str], allowed: Sequence[str], where: str) -> ConfigurationError:
    """The one message for store options a backend does not know: each of them, where they were
    given, and every supported option."""
    return ConfigurationError(f"unknown store option(s) {', '.join(unknown)} {where}; "
                              f"supported: {', '.join(allowed) or 'none'}")
