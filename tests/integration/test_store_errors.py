"""The one error boundary per backend: every driver exception becomes a :class:`StoreError`."""

from __future__ import annotations

import sqlite3
from typing import Any, Iterator, List

import psycopg
import pytest
import redis.exceptions as rex

from dstream_exactly_once.errors import StoreAuthError, StoreError, StoreUnavailableError
from dstream_exactly_once.stores import PostgresStore, RedisStore, SQLiteStore
from dstream_exactly_once.stores._url import redact_url

SECRET = "hunter2-Secret-pw"


def subclasses(cls: type) -> Iterator[type]:
    for sub in cls.__subclasses__():
        yield sub
        yield from subclasses(sub)


def all_classes(root: type) -> List[type]:
    return sorted({root, *subclasses(root)}, key=lambda c: c.__qualname__)


@pytest.mark.parametrize("cls", all_classes(rex.RedisError), ids=lambda c: c.__name__)
def test_every_redis_exception_is_translated(cls: type, monkeypatch: Any) -> None:
    store = RedisStore(f"redis://:{SECRET}@127.0.0.1:6399/0", "app")
    monkeypatch.setattr(store, "_client", lambda: None)

    def fail(client: Any) -> None:
        try:
            exc = cls(f"boom {SECRET}")
        except ValueError:  # cluster redirections parse "<slot> <host:port>"
            exc = cls("3999 127.0.0.1:6381")
        raise exc

    with pytest.raises(StoreError) as info:
        store._call(fail)
    assert isinstance(info.value.__cause__, cls) and SECRET not in str(info.value)
    assert "127.0.0.1:6399" in str(info.value)
    if issubclass(cls, rex.AuthenticationError):
        assert isinstance(info.value, StoreAuthError)
    elif issubclass(cls, (rex.ConnectionError, rex.TimeoutError)):
        assert isinstance(info.value, StoreUnavailableError)


@pytest.mark.parametrize("cls", all_classes(psycopg.Error), ids=lambda c: c.__qualname__)
def test_every_psycopg_exception_is_translated(cls: type) -> None:
    store = PostgresStore(f"postgresql://deo:{SECRET}@127.0.0.1:5499/db", "app")
    err = store._translate(cls(f"boom {SECRET}"))
    assert isinstance(err, StoreError) and SECRET not in str(err) and "127.0.0.1:5499" in str(err)


@pytest.mark.parametrize("cls", [*all_classes(sqlite3.Error), OSError], ids=lambda c: c.__name__)
def test_every_sqlite_exception_is_translated(cls: type, tmp_path: Any) -> None:
    store = SQLiteStore(f"sqlite:///{tmp_path}/x.db", "app")
    assert isinstance(store._translate(cls("boom")), StoreError)


def test_unrelated_exceptions_are_not_swallowed(tmp_path: Any) -> None:
    assert SQLiteStore(f"sqlite:///{tmp_path}/x.db", "app")._translate(KeyError("x")) is None
    assert PostgresStore("postgresql://h/db", "app")._translate(KeyError("x")) is None


@pytest.mark.parametrize("url, shown", [
    (f"redis://:{SECRET}@h:1/0", "redis://:***@h:1/0"),
    (f"postgresql://deo:{SECRET}@h/db?sslmode=require", "postgresql://deo:***@h/db?sslmode=require"),
    (f"postgres://deo:p@ss{SECRET}@h/db", "postgres://deo:***@h/db"),
    (f"postgresql://h/db?password={SECRET}&x=1", "postgresql://h/db?password=***&x=1"),
    (f"rediss://:pa?ss{SECRET}@h/0", "rediss://:***@h/0"),
    ("redis://h:6379/0", "redis://h:6379/0"),
    ("sqlite:////tmp/a@b.db", "sqlite:////tmp/a@b.db"),
])
def test_redact_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown and SECRET not in redact_url(url)


def test_repr_never_shows_the_password() -> None:
    for store in (RedisStore(f"redis://u:{SECRET}@h/0", "a"), PostgresStore(f"postgresql://u:{SECRET}@h/db", "a")):
        assert SECRET not in repr(store) and "***" in repr(store)
