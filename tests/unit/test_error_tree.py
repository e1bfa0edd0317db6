"""The exception tree is trusted: ``retriable`` belongs to the class, and the drawn tree is complete."""

from __future__ import annotations

import ast
import pathlib
import sqlite3

import pytest

import dstream_exactly_once
from dstream_exactly_once import errors
from dstream_exactly_once.stores.sql._sqlite import SQLiteStore

PACKAGE = pathlib.Path(dstream_exactly_once.__file__).parent


def test_no_instance_sets_retriable():
    """``err.retriable = …`` would make two errors of one class mean different things."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets = node.targets if isinstance(node, ast.Assign) else (
                [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else [])
            found += [f"{path.relative_to(PACKAGE)}:{node.lineno}" for t in targets
                      if isinstance(t, ast.Attribute) and t.attr == "retriable"]
    assert found == []


def test_every_error_class_is_drawn_in_the_tree():
    drawn = errors.__doc__ or ""
    for name in errors.__all__:
        assert f" {name}" in drawn, name
        assert issubclass(getattr(errors, name), errors.DStreamExactlyOnceError)


@pytest.mark.parametrize(("cls", "retriable"), [
    (errors.KafkaUnavailableError, True), (errors.KafkaAuthError, False), (errors.KafkaClosedError, False),
    (errors.KafkaRejectedError, False), (errors.StoreUnavailableError, True), (errors.StoreBusyError, True),
    (errors.SinkError, True), (errors.LoadRejectedError, False), (errors.StoreError, False),
])
def test_retriable_is_a_class_property(cls, retriable):
    assert cls.retriable is retriable and cls("x").retriable is retriable


def test_a_broker_no_for_good_is_not_unavailable():
    assert not issubclass(errors.KafkaRejectedError, errors.KafkaUnavailableError)


def test_sqlite_errors_classified_by_result_code(tmp_path):
    store = SQLiteStore(f"sqlite:///{tmp_path / 's.db'}", "app")
    busy = sqlite3.OperationalError("any text")
    busy.sqlite_errorname = "SQLITE_BUSY_SNAPSHOT"
    other = sqlite3.OperationalError("database is locked")  # the words alone decide nothing
    other.sqlite_errorname = "SQLITE_ERROR"
    assert type(store._translate(busy)) is errors.StoreUnavailableError
    assert type(store._translate(other)) is errors.StoreError
