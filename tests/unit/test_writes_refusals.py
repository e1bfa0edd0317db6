"""What :class:`Writes` refuses when it is built: anything a store could not apply faithfully."""

from __future__ import annotations

import pytest

from dstream_exactly_once.errors import ConfigurationError
from dstream_exactly_once.stores import Writes
from dstream_exactly_once.stores._sql_text import parse_sql, render
from dstream_exactly_once.stores._writes import MAX_KEY_BYTES, RESERVED_NAMESPACE, incident_key

TRANSACTION_CONTROL = [
    "COMMIT", "commit", "  Commit Work", "END", "end transaction", "ROLLBACK", "rollback to savepoint s",
    "ABORT", "BEGIN", "begin immediate", "START TRANSACTION", "SAVEPOINT s", "RELEASE s", "release savepoint s",
    "PREPARE TRANSACTION 'x'", "COMMIT PREPARED 'x'", "-- a comment\nCOMMIT", "/* a /* nested */ comment */ ROLLBACK",
    "\n\t COMMIT ;", "COMMIT; -- trailing comment",
]
OTHER_REFUSED = [
    "VACUUM", "vacuum full t", "PRAGMA foreign_keys = ON", "ATTACH DATABASE 'x.db' AS x", "DETACH x",
    "SET search_path TO other", "set session characteristics as transaction read only", "RESET ALL",
    "DISCARD ALL", "COPY t FROM STDIN", "CREATE DATABASE x", "DROP TABLESPACE x", "ALTER SYSTEM SET x = 1",
    "CREATE INDEX CONCURRENTLY i ON t (a)", "create unique index concurrently i on t (a)",
    "DROP INDEX CONCURRENTLY i", "REINDEX TABLE CONCURRENTLY t", "CLUSTER",
]
SEVERAL = ["SELECT 1; SELECT 2", "INSERT INTO t VALUES (1);COMMIT", "SELECT 1;\n/* c */ ROLLBACK", "SELECT 1;;"]
ALLOWED = [
    "SELECT ';' || 'COMMIT; ROLLBACK'", "SET LOCAL lock_timeout = '1s'", "SET CONSTRAINTS ALL DEFERRED",
    "CREATE TABLE system (database int, concurrently int)", "UPDATE t SET a = 1", "WITH x AS (SELECT 1) SELECT 1",
    "CREATE INDEX i ON t (concurrently)", "SELECT 1; -- done", "SELECT $$;COMMIT$$", "SELECT \"a;b\" FROM t",
    "SELECT E'it\\'s;' FROM t", "SELECT $body$ ; $$ ; $body$",
]


@pytest.mark.parametrize("sql", TRANSACTION_CONTROL + OTHER_REFUSED)
def test_statements_that_would_end_or_change_the_transaction_are_refused(sql: str) -> None:
    w = Writes()
    with pytest.raises(ConfigurationError, match="Writes.execute refuses") as info:
        w.execute(sql)
    first = next(line for line in sql.splitlines() if line.strip() and not line.lstrip().startswith("--"))
    assert first.replace("/* a /* nested */ comment */ ", "").split()[0].upper() in str(info.value)
    assert not w.statements


@pytest.mark.parametrize("sql", SEVERAL)
def test_several_statements_in_one_string_are_refused(sql: str) -> None:
    with pytest.raises(ConfigurationError, match="one SQL statement, got several"):
        Writes().execute(sql)


@pytest.mark.parametrize("sql", ALLOWED)
def test_ordinary_statements_pass(sql: str) -> None:
    assert Writes().execute(sql).statements == [(sql, ())]


@pytest.mark.parametrize("sql, params, message", [
    ("SELECT ?", (), "1 \\? placeholder.s. but 0 parameter"),
    ("SELECT '?', ?", (1, 2), "1 \\? placeholder.s. but 2 parameter"),
    ("SELECT ?1", (1,), "numbered placeholders"),
    ("SELECT 'abc", (), "unterminated string literal"),
    ("SELECT \"abc", (), "unterminated quoted identifier"),
    ("SELECT 1 /* x", (), "unterminated /\\* comment"),
    ("SELECT $x$ abc", (), "unterminated dollar-quoted"),
    ("-- only a comment", (), "holds no SQL statement"),
])
def test_bad_statements_are_refused(sql: str, params: tuple, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        Writes().execute(sql, params)


@pytest.mark.parametrize("sql, sqlite, psycopg", [
    ("SELECT ? WHERE a LIKE 'a%'", "SELECT ? WHERE a LIKE 'a%'", "SELECT %s WHERE a LIKE 'a%%'"),
    ("SELECT '?', \"q?%\", ? -- ? %\n", "SELECT '?', \"q?%\", ? -- ? %\n", "SELECT '?', \"q?%%\", %s -- ? %%\n"),
    ("SELECT $$?%$$, $t$?$t$, ?", "SELECT $$?%$$, $t$?$t$, ?", "SELECT $$?%%$$, $t$?$t$, %s"),
    ("SELECT E'\\'?', 5 % 3, ?", "SELECT E'\\'?', 5 % 3, ?", "SELECT E'\\'?', 5 %% 3, %s"),
    ("SELECT a$b$c, ?", "SELECT a$b$c, ?", "SELECT a$b$c, %s"),
])
def test_rendering_touches_placeholders_and_percent_signs_only(sql: str, sqlite: str, psycopg: str) -> None:
    parsed = parse_sql(sql)
    assert parsed.placeholders == 1
    assert render(parsed, "?") == sqlite
    assert render(parsed, "%s") == psycopg


def test_double_question_mark_is_a_literal_question_mark_on_postgresql_only() -> None:
    parsed = parse_sql("SELECT doc ?? 'k', doc ??| array['a'], doc ??& array[?], doc @> ?")
    assert parsed.placeholders == 2
    assert render(parsed, "%s") == "SELECT doc ? 'k', doc ?| array['a'], doc ?& array[%s], doc @> %s"
    with pytest.raises(ConfigurationError, match="PostgreSQL"):
        render(parsed, "?")


@pytest.mark.parametrize("call", [
    lambda w: w.incr(RESERVED_NAMESPACE, "k"),
    lambda w: w.put(RESERVED_NAMESPACE, "heartbeat", {"epoch": 99}),
    lambda w: w.put_batch_rows(RESERVED_NAMESPACE, [{}]),
])
def test_the_reserved_namespace_is_refused_to_user_writes(call) -> None:
    w = Writes()
    with pytest.raises(ConfigurationError, match="reserved"):
        call(w)
    assert not w
    w.record_incident("loss", 3, {"lost": 1})  # the library's own records still go there
    assert w.puts == {(RESERVED_NAMESPACE, incident_key("loss", 3)): '{"lost":1}'}


@pytest.mark.parametrize("amounts", [(1.7e308, 1.7e308), (-1.7e308, -1.0e308), (2**1100, 0.5), (0.5, 2**1100)])
def test_an_increment_that_makes_a_total_non_finite_is_refused(amounts) -> None:
    w = Writes()
    with pytest.raises(ConfigurationError, match="counts/f") as info:
        for a in amounts:
            w.incr("counts", "f", a)
    assert "finite" in str(info.value)
    assert dict(w.increments) in ({}, {("counts", "f"): amounts[0]})  # the refused one is not added


@pytest.mark.parametrize("rows", [{"a": 1, "b": 2}, "abc", b"abc", bytearray(b"ab"), 5, None])
def test_rows_of_the_wrong_type_are_refused(rows) -> None:
    w = Writes()
    with pytest.raises(ConfigurationError, match="rows of r must be an iterable of rows") as info:
        w.put_batch_rows("r", rows)
    assert type(rows).__name__ in str(info.value)
    assert not w


def test_rows_from_any_iterable_of_rows_are_kept() -> None:
    w = Writes().put_batch_rows("r", ({"i": i} for i in range(2))).put_batch_rows("r", [[1, 2], "s"])
    assert w.batch_rows == {"r": ['{"i":0}', '{"i":1}', "[1,2]", '"s"']}


@pytest.mark.parametrize("call, what", [
    (lambda w, v: w.incr(v, "k"), "namespace"), (lambda w, v: w.incr("ns", v), "key"),
    (lambda w, v: w.put(v, "k", 1), "namespace"), (lambda w, v: w.put("ns", v, 1), "key"),
    (lambda w, v: w.put_batch_rows(v, []), "namespace"), (lambda w, v: w.add_label(v), "label"),
])
def test_empty_oversized_and_non_text_names_are_refused(call, what: str) -> None:
    w = Writes()
    with pytest.raises(ConfigurationError, match=f"{what} must be a non-empty str, got ''"):
        call(w, "")
    with pytest.raises(ConfigurationError, match=f"{what} must be at most {MAX_KEY_BYTES} bytes in UTF-8, got 1025"):
        call(w, "é" * 512 + "x")  # 1,025 bytes, 513 characters
    with pytest.raises(ConfigurationError, match="lone surrogates"):
        call(w, "a\ud800")
    with pytest.raises(ConfigurationError, match="non-empty str, got 7"):
        call(w, 7)
    assert not w
    call(w, "é" * 512)  # exactly the limit
    assert w
