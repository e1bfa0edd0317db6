"""User SQL for :meth:`Writes.execute`: one statement, ``?`` placeholders, checked and rendered per store.

A small tokenizer walks the statement once and tells code apart from what is not code: string
literals (``'…'`` with ``''``, PostgreSQL ``E'…'`` with backslash escapes), quoted identifiers
(``"…"``, SQLite's backticks), comments (``--`` and nested ``/* */``) and PostgreSQL dollar-quoted
bodies (``$$…$$``, ``$tag$…$tag$``). Only in code is

- ``?`` a placeholder (one per parameter, in order);
- ``??`` the literal character ``?`` (PostgreSQL's jsonb operators ``?``, ``?|``, ``?&`` are written
  ``??``, ``??|``, ``??&``, as in PgJDBC);
- ``;`` the end of the statement (anything but comments after it is a second statement).

:func:`check_statement` refuses, before anything is written, what would end or change the
commit's transaction or the store's connection, and what cannot run inside a transaction at all
(it would fail on every replay). :func:`render` gives the text for a driver's paramstyle: psycopg
(``%s``) gets every ``%`` doubled, so ``LIKE 'a%'`` and literals reach the server unchanged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import List, Sequence, Tuple

from ..errors import ConfigurationError

__all__ = ["REFUSED_FIRST_WORDS", "ParsedSQL", "check_statement", "parse_sql", "render"]

#: First words of statements a commit refuses, and why.
REFUSED_FIRST_WORDS = {
    **dict.fromkeys(("BEGIN", "START", "COMMIT", "END", "ROLLBACK", "ABORT", "SAVEPOINT", "RELEASE"),
                    "it controls transactions, and the commit must stay one transaction"),
    **dict.fromkeys(("PRAGMA", "ATTACH", "DETACH", "RESET", "DISCARD"),
                    "it changes the store's connection beyond this commit or cannot run inside a transaction"),
    "VACUUM": "it cannot run inside a transaction",
    "COPY": "it needs a data stream the commit does not have (use INSERT)",
}
_NOT_IN_TRANSACTION = ("DATABASE", "TABLESPACE", "SYSTEM", "SUBSCRIPTION")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")
_DOLLAR_TAG = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$")
_IDENT_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_$")


@dataclass(frozen=True)
class ParsedSQL:
    """One statement cut into pieces: ``("code", text)``, ``("quoted", text)`` (literals, quoted
    identifiers, comments, dollar-quoted bodies — passed through untouched), ``("param", "?")`` and
    ``("qmark", "??")`` (a literal ``?``); ``words`` are the upper-cased words of the code."""

    pieces: Tuple[Tuple[str, str], ...]
    words: Tuple[str, ...]

    @property
    def placeholders(self) -> int:
        return sum(1 for kind, _ in self.pieces if kind == "param")

    @property
    def has_qmark(self) -> bool:
        return any(kind == "qmark" for kind, _ in self.pieces)


def _short(sql: str) -> str:
    return repr(sql if len(sql) <= 200 else sql[:200] + "…")


def parse_sql(sql: str) -> ParsedSQL:  # noqa: C901 - one state machine reads best as one loop
    """Cut ``sql`` into pieces (see :class:`ParsedSQL`); refuses a second statement, an unterminated
    literal or comment, and numbered placeholders (``?1``)."""
    pieces: List[Tuple[str, str]] = []
    words: List[str] = []
    code: List[str] = []
    ended = False  # a ';' was seen: only whitespace and comments may follow
    i, n = 0, len(sql)

    def flush() -> None:
        if code:
            text = "".join(code)
            pieces.append(("code", text))
            words.extend(w.upper() for w in _WORD.findall(text))
            code.clear()

    def quoted(end: int, what: str, start: int) -> int:
        if end < 0:
            raise ConfigurationError(f"Writes.execute: unterminated {what} at character {start} of {_short(sql)}")
        flush()
        pieces.append(("quoted", sql[start:end]))
        return end

    while i < n:
        c = sql[i]
        nxt = sql[i + 1] if i + 1 < n else ""
        if c == "-" and nxt == "-":
            j = sql.find("\n", i)
            i = quoted(n if j < 0 else j, "comment", i)
            continue
        if c == "/" and nxt == "*":
            depth, j = 1, i + 2
            while depth and j < n:
                if sql.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif sql.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            i = quoted(j if depth == 0 else -1, "/* comment", i)
            continue
        if c.isspace():
            code.append(c)
            i += 1
            continue
        if ended:
            raise ConfigurationError(f"Writes.execute takes one SQL statement, got several in {_short(sql)}; call "
                                     f"execute once per statement")
        prev = sql[i - 1] if i else ""
        if c == "'":
            backslash = prev in "eE" and (i < 2 or sql[i - 2] not in _IDENT_CHARS)
            j = i + 1
            while j < n:
                if backslash and sql[j] == "\\":
                    j += 2
                elif sql[j] == "'":
                    if j + 1 < n and sql[j + 1] == "'":
                        j += 2
                    else:
                        break
                else:
                    j += 1
            i = quoted(j + 1 if j < n else -1, "string literal", i)
            continue
        if c in ('"', "`"):
            j = i + 1
            while j < n:
                if sql[j] == c:
                    if j + 1 < n and sql[j + 1] == c:
                        j += 2
                        continue
                    break
                j += 1
            i = quoted(j + 1 if j < n else -1, "quoted identifier", i)
            continue
        if c == "$" and prev not in _IDENT_CHARS:
            m = _DOLLAR_TAG.match(sql, i)
            if m:
                j = sql.find(m.group(0), m.end())
                i = quoted(j + len(m.group(0)) if j >= 0 else -1, f"dollar-quoted body {m.group(0)}", i)
                continue
        if c == "?":
            flush()
            if nxt == "?":
                pieces.append(("qmark", "??"))
                i += 2
                continue
            if nxt.isdigit():
                raise ConfigurationError(f"Writes.execute: numbered placeholders like ?{nxt} are not supported, "
                                         f"use one ? per parameter in order (in {_short(sql)})")
            pieces.append(("param", "?"))
            i += 1
            continue
        if c == ";":
            ended = True
            flush()
            i += 1
            continue
        code.append(c)
        i += 1
    flush()
    return ParsedSQL(tuple(pieces), tuple(words))


def check_statement(sql: str, params: Sequence[object]) -> ParsedSQL:
    """Parse ``sql`` and refuse what a commit must not run (see the module docstring)."""
    parsed = parse_sql(sql)
    words = parsed.words
    if not words:
        raise ConfigurationError(f"Writes.execute: {_short(sql)} holds no SQL statement")
    first, second = words[0], words[1] if len(words) > 1 else ""
    reason = REFUSED_FIRST_WORDS.get(first)
    if first == "PREPARE" and second == "TRANSACTION":
        reason = "it controls transactions, and the commit must stay one transaction"
    elif first == "SET" and second not in ("LOCAL", "CONSTRAINTS"):
        reason = ("it changes the store's connection beyond this commit (SET LOCAL and SET CONSTRAINTS "
                  "are allowed)")
    elif (first in ("CREATE", "DROP", "ALTER") and second in _NOT_IN_TRANSACTION) or (
            "CONCURRENTLY" in words[1:5] and (first == "REINDEX" or "INDEX" in words[1:3])) or (
            first == "CLUSTER" and len(words) == 1):
        reason = "it cannot run inside a transaction"
    if reason:
        raise ConfigurationError(f"Writes.execute refuses {first} statements ({reason}): {_short(sql)}")
    if parsed.placeholders != len(params):
        raise ConfigurationError(f"Writes.execute: {_short(sql)} has {parsed.placeholders} ? placeholder(s) but "
                                 f"{len(params)} parameter(s) were given (write a literal ? as ??)")
    return parsed


def render(parsed: ParsedSQL, placeholder: str) -> str:
    """The statement for a driver whose placeholder is ``placeholder`` (``?`` for sqlite3, ``%s`` for
    psycopg, which also needs every other ``%`` doubled)."""
    if placeholder == "?":
        if parsed.has_qmark:
            raise ConfigurationError("Writes.execute: ?? (a literal ? operator) is for PostgreSQL stores; SQLite "
                                     "has no ? operator")
        return "".join(text for _, text in parsed.pieces)
    out = []
    for kind, text in parsed.pieces:
        if kind == "param":
            out.append(placeholder)
        elif kind == "qmark":
            out.append("?")
        else:
            out.append(text.replace("%", "%%"))
    return "".join(out)
