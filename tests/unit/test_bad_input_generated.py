"""Bad input for every option of every entry point in the option registry, generated from the registry.

For each option: a value of the wrong type, one out of range, an empty one and (where options are keyed
by strings) a misspelt key. Each is refused with an error that names the key, the value (a secret's
value never) and what is allowed, that is not retriable, and that leaves the store byte for byte as it
was: a SQLite store a live driver holds an epoch on keeps its bytes and its epoch, a store URL naming a
new file creates none. The run's size is printed at the end of the pytest run (tests/conftest.py)."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

from dstream_exactly_once.cli._option_entries import every_entry_point
from dstream_exactly_once.core._options import Option
from dstream_exactly_once.errors import DStreamExactlyOnceError
from dstream_exactly_once.option_registry import EntryPoint

from ._bad_input_invokers import INVOKERS, SERVER, XFAIL, Live

PASSWORD = "Pw-s3cret-9f1c"


@dataclass(frozen=True)
class Case:
    entry: EntryPoint
    option: Option
    what: str  # wrong type | out of range | empty | unknown key
    key: str
    value: Any

    @property
    def id(self) -> str:
        return f"{self.entry.name}|{self.key}|{self.what}"


def _wrong_type(entry: EntryPoint, o: Option) -> Optional[Any]:
    if entry.form == "cli":
        return "many" if o.kind in ("int", "float") else None
    if o.kind in ("int", "float", "duration"):
        return "many"
    if o.kind == "bool":
        return "maybe"
    if o.kind == "enum":
        return 42 if entry.form == "keywords" else None  # a string-keyed option's values are strings
    if o.kind in ("str", "url") and entry.form != "keywords":
        return None
    return 42


def _out_of_range(o: Option) -> Optional[Any]:
    if o.kind == "enum":
        return "no-such-value"
    if o.kind in ("int", "float") and o.low is not None:
        return int(o.low) - 1
    if o.kind in ("int", "float") and o.high is not None:
        return int(o.high) + 1
    return None


#: string options whose empty value means "not set" (the default applies), as documented
EMPTY_IS_UNSET = {("file options", "exclude"), ("file options", "exclude.regex"), ("aof", "exclude"),
                  ("aof", "exclude.regex"), ("deo-store", "store.password"), ("deo-store", "writes_function"),
                  ("deo-doris", "store.password"), ("deo-doris", "doris.password"), ("deo-doris", "columns"),
                  ("deo-doris", "column_separator"), ("deo-kafka", "store.password"), ("deo-delta", "store.password"),
                  ("postgresql:// URL", "password")}


def _empty(entry: EntryPoint, o: Option) -> Optional[Any]:
    if entry.form == "cli" and o.kind == "bool" or (entry.name, o.key) in EMPTY_IS_UNSET:
        return None
    if o.kind == "enum" and "" in o.allowed or o.default == "" or o.kind in ("object", "mapping", "callable"):
        return None
    return [] if o.kind == "list" else ""


def cases() -> Iterator[Case]:
    for entry in every_entry_point():
        if entry.name not in INVOKERS:
            continue
        for o in entry.options:
            if entry.form == "cli" and not o.key.startswith("--"):
                continue  # a positional argument: the command's own subject, tested with its command
            for what, value in (("wrong type", _wrong_type(entry, o)), ("out of range", _out_of_range(o)),
                                ("empty", _empty(entry, o))):
                if value is not None:
                    yield Case(entry, o, what, o.key, value)
            if entry.form in ("options", "query", "cli"):
                typo = o.key + ("-x" if entry.form == "cli" else "x")
                yield Case(entry, o, "unknown key", typo, "1")


ALL = list(cases())


#: entry points that need PySpark 4 (on 3.5 every call says so first; the 3.5 suite deselects them)
PYSPARK4_ENTRIES = ("store_sink_options", "doris_sink_options", "kafka_sink_options", "delta_sink_options")


def _params() -> List[Any]:
    out = []
    for case in ALL:
        reason = XFAIL(case.entry.name, case.key, case.what)
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        if case.entry.name in PYSPARK4_ENTRIES:
            marks.append(pytest.mark.pyspark4)  # these builders refuse to run on PySpark 3.5 at all
        out.append(pytest.param(case, id=case.id, marks=marks))
    return out


def _allowed_shown(case: Case, message: str) -> bool:
    """Whether ``message`` says what is allowed for ``case``."""
    text = message.lower()
    o = case.option
    if case.what == "unknown key":
        return any(k in message for k in case.entry.keys if k != case.option.key) or any(
            w in message for w in ("allowed", "known", "supported", "--help"))
    if o.kind == "enum":
        return any(str(a).lower() in text for a in o.allowed if a)
    bounds = [str(int(b)) for b in (o.low, o.high) if b is not None]
    if o.kind in ("int", "float", "duration"):
        return (any(b in message for b in bounds) if bounds else False) or any(
            w in text for w in ("integer", " int", "number", "duration", "positive"))
    words = {"bool": ("true", "bool"),
             "str": ("string", "non-empty", "must be", "must name", "one of", "required", "expected", "want"),
             "url": ("url", "string", "required"), "list": ("list",), "mapping": ("dict", "mapping"),
             "callable": ("callable", "function"), "object": ("must be", "needs")}[o.kind]
    return any(w in text for w in words)


def _named(key: str, message: str) -> bool:
    """Whether ``message`` names ``key`` (a ``kafka.<setting>`` of the deo-kafka sink by its setting:
    the message says the kafka.* options are Kafka client settings)."""
    return key in message or (key.startswith("kafka.") and key[len("kafka."):] in message)


def _value_shown(case: Case, message: str) -> bool:
    """Whether ``message`` shows the bad value: its repr or text, an empty value as empty, another
    type by its type's name; a misspelt key is the bad part itself."""
    v = case.value
    if case.what == "unknown key":
        return True
    if v == "" or v == []:
        return any(w in message for w in ("''", '""', "[]", "empty", "required"))
    return repr(v) in message or (isinstance(v, str) and v in message) or (
        not isinstance(v, str) and type(v).__name__ in message)


@pytest.fixture
def live(tmp_path: Any, sc: Any) -> Iterator[Live]:
    """A SQLite store a live driver holds an epoch on, and a URL of a store file that does not exist."""
    holder = Live.start(tmp_path)
    holder.sc = sc
    yield holder
    holder.close()


@pytest.mark.parametrize("case", _params())
def test_bad_input_is_refused_clearly_and_writes_nothing(case: Case, live: Live, request: pytest.FixtureRequest,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    request.config.deo_bad_input_cases.append(("bad input", case.entry.name, case.option.key))  # type: ignore
    if case.entry.name in SERVER:
        live.hold_server(request.getfixturevalue(SERVER[case.entry.name]))
    before = live.snapshot()
    with caplog.at_level(logging.DEBUG):
        error, message = INVOKERS[case.entry.name](live, case.key, case.value)
    assert error is not None, f"{case.id}: {case.value!r} was accepted"
    if isinstance(error, DStreamExactlyOnceError):
        assert error.retriable is False, f"{case.id}: a retriable {type(error).__name__}: {message}"
    else:
        assert error == "usage", f"{case.id}: {message}"
    assert any(_named(k, message) for k in (case.key, *case.option.aliases)), f"{case.id}: key missing: {message}"
    if case.option.secret and case.what != "unknown key":
        assert str(case.value) not in message or case.value in ("", 42)
    else:
        assert _value_shown(case, message), f"{case.id}: value {case.value!r} missing: {message}"
    assert _allowed_shown(case, message), f"{case.id}: what is allowed is missing: {message}"
    assert live.snapshot() == before, f"{case.id}: the store changed"
    assert not os.path.exists(live.fresh_path), f"{case.id}: a store file was created"


# ------------------------------------------------------------------ passwords
#: the options naming a store (a URL the entry point connects to when everything else is good)
STORE_KEYS = ("store", "starting.positions.store", "--store")
#: password placements that show today: (entry, key, where) -> reason
SECRET_XFAIL: Dict[Tuple[str, str, str], str] = {}


def _secret_cases() -> List[Any]:
    out = []
    for e in every_entry_point():
        if e.name not in INVOKERS:
            continue
        for o in e.options:
            if o.secret:
                out.append(pytest.param(e.name, o.key, "value", id=f"{e.name}|{o.key}|value"))
            elif o.kind == "url" or o.key == "--store":
                for where in ("user", "query"):
                    reason = SECRET_XFAIL.get((e.name, o.key, where))
                    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
                    out.append(pytest.param(e.name, o.key, where, id=f"{e.name}|{o.key}|{where}", marks=marks))
    return out


@pytest.mark.parametrize("entry,key,where", _secret_cases())
def test_a_password_in_an_option_never_shows(entry: str, key: str, where: str, live: Live,
                                             caplog: pytest.LogCaptureFixture, request: pytest.FixtureRequest) -> None:
    """A password given in an option (a secret option, or a URL option's user part or query) is not in
    the error text, the error's repr, nor any log record down to DEBUG, when the call is refused."""
    request.config.deo_bad_input_cases.append(("password", entry, key))  # type: ignore[attr-defined]
    option = next(o for o in every_entry_point() if o.name == entry).option(key)
    if entry in SERVER:
        live.hold_server(request.getfixturevalue(SERVER[entry]))
    value = PASSWORD if option.secret else live.url_with_password(PASSWORD, where)
    # a store URL alone would be connected to: another, bad option gets the call refused first; any other
    # URL (the Doris FE's) is refused by its own check
    alone = option.kind == "url" and key not in STORE_KEYS
    with caplog.at_level(logging.DEBUG):
        error, message = INVOKERS[entry](live, key, value, also_bad=not alone)
    assert error is not None, f"{entry}: the call with a bad option was accepted"
    shown = " ".join([message, repr(error), *(r.getMessage() for r in caplog.records)])
    assert PASSWORD not in shown, f"{entry}|{key}: the password shows: {shown}"


#: entry points the generated cases leave out, with the reason (printed in the run's summary)
UNCHECKED: Dict[str, str] = {
    "exactly_once": "needs a running direct stream (a broker); its store arguments are checked by the same "
                    "functions as createExactlyOnceStream's",
}


def test_every_registry_entry_point_is_exercised() -> None:
    """An entry point without an invoker would be silently left out of the generated cases."""
    names = {e.name for e in every_entry_point()}
    assert names <= set(INVOKERS) | set(UNCHECKED), sorted(names - set(INVOKERS) - set(UNCHECKED))
