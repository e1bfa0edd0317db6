"""Store URLs, options and secrets against real PostgreSQL and Redis servers.

A password holding every reserved URL character works once percent-encoded and is refused (never
guessed at, never echoed) when written raw; ``open_store`` options merge into every URL form; and
no password reaches a log record (root logger at DEBUG, psycopg's and redis-py's loggers
included), an error, its causes or a ``repr``.
"""

from __future__ import annotations

import logging
import re
import traceback
import uuid
from typing import Any, Iterable, Iterator, List
from urllib.parse import quote

import pytest
from psycopg import sql

from dstream_exactly_once.errors import ConfigurationError, StoreAuthError, StoreError
from dstream_exactly_once.kafka._offsets import OffsetRange
from dstream_exactly_once.stores import (
    CommitOutcome,
    PlannedBatch,
    PostgresStore,
    RedisStore,
    TransactionalStore,
    Writes,
    open_store,
)
from dstream_exactly_once.testing import LocalPostgres, LocalRedis

# every character that must be percent-encoded in a URL's password, between distinctive chunks
SPECIAL = "Sx7q#Kp9?Wm2/Zt4@Hr6%Lq8:Vb3 Nj5&Fd1=Gy0"
CHUNKS = re.findall(r"[A-Za-z][A-Za-z0-9]{2}", SPECIAL)
ENCODED = quote(SPECIAL, safe="")


def spellings(secret: str) -> List[str]:
    """What must never be shown: the secret, its encodings and each of its chunks."""
    return [secret, quote(secret, safe=""), quote(secret)] + re.findall(r"[A-Za-z][A-Za-z0-9]{2}", secret)


def chain_texts(err: BaseException) -> Iterator[str]:
    """str, repr and traceback text of ``err`` and every exception it chains to."""
    yield "".join(traceback.format_exception(err))
    seen = set()
    node: Any = err
    while node is not None and id(node) not in seen:
        seen.add(id(node))
        yield str(node)
        yield repr(node)
        yield repr(node.args)
        node = node.__cause__ or node.__context__


def record_texts(records: Iterable[logging.LogRecord]) -> Iterator[str]:
    formatter = logging.Formatter()
    for r in records:
        yield r.getMessage()
        yield str(r.msg)
        yield repr(r.args)
        if r.exc_info:
            yield formatter.formatException(r.exc_info)


def assert_hidden(texts: Iterable[str], secrets: Iterable[str]) -> None:
    secrets = list(secrets)
    for text in texts:
        for secret in secrets:
            assert secret not in text, f"{secret!r} shown in {text!r}"


@pytest.fixture(scope="module")
def special_redis() -> Iterator[LocalRedis]:
    server = LocalRedis(password=SPECIAL)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def special_postgres_db(postgres_server: LocalPostgres) -> str:
    """A fresh database owned by a fresh role whose password is :data:`SPECIAL`; returns the role."""
    role = "r_" + uuid.uuid4().hex[:12]
    with postgres_server.connect() as admin:
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(sql.Identifier(role), sql.Literal(SPECIAL)))
        admin.execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(sql.Identifier(role), sql.Identifier(role)))
    return role


def pg_url(server: LocalPostgres, role: str, password: str, scheme: str = "postgresql") -> str:
    return f"{scheme}://{role}:{password}@127.0.0.1:{server.port}/{role}"


def redis_url(server: LocalRedis, password: str, scheme: str = "redis") -> str:
    return f"{scheme}://:{password}@127.0.0.1:{server.port}/0"


def use(store: TransactionalStore) -> None:
    epoch = store.start_epoch()
    b = PlannedBatch(0, 1000, (OffsetRange("t", 0, 0, 5),))
    assert store.commit(epoch, b, Writes().incr("c", "n", 5)) is CommitOutcome.APPLIED
    assert store.get_value("c", "n") == 5 and store.is_committed(0)


# ---------------------------------------------------------------- reserved characters in passwords
def test_percent_encoded_password_works_on_postgres(postgres_server: LocalPostgres, special_postgres_db: str,
                                                    app_id: str) -> None:
    for scheme in ("postgresql", "postgres"):
        with open_store(pg_url(postgres_server, special_postgres_db, ENCODED, scheme), app_id + scheme) as store:
            assert isinstance(store, PostgresStore)
            use(store)
            assert_hidden([repr(store), str(store)], spellings(SPECIAL))


def test_percent_encoded_password_works_on_redis(special_redis: LocalRedis, app_id: str) -> None:
    with open_store(redis_url(special_redis, ENCODED), app_id) as store:
        assert isinstance(store, RedisStore)
        use(store)
        assert_hidden([repr(store), str(store)], spellings(SPECIAL))


def test_raw_password_is_refused_redacted_before_connecting(postgres_server: LocalPostgres, special_redis: LocalRedis,
                                                            special_postgres_db: str, app_id: str) -> None:
    # Raw, the '#' starts a fragment: urlsplit reads host "" and port 6379 for Redis (another
    # server), libpq and urlsplit disagree for PostgreSQL. Refused, with nothing of it shown.
    for url in (pg_url(postgres_server, special_postgres_db, SPECIAL), redis_url(special_redis, SPECIAL),
                pg_url(postgres_server, special_postgres_db, SPECIAL.replace("#", "%23"))):
        with pytest.raises(ConfigurationError) as info:
            open_store(url, app_id, connect_timeout=2)
        assert "percent-encode" in str(info.value)
        assert_hidden(chain_texts(info.value), spellings(SPECIAL))


@pytest.mark.parametrize("password", ["Left%41%2zRight", "Left%zzRight"])
def test_postgres_never_echoes_a_password_libpq_cannot_decode(password: str, postgres_server: LocalPostgres,
                                                              app_id: str) -> None:
    for url in (f"postgresql://deo:{password}@127.0.0.1:{postgres_server.port}/postgres",
                f"postgresql://deo@127.0.0.1:{postgres_server.port}/postgres?password={password}"):
        with pytest.raises(ConfigurationError) as info:
            open_store(url, app_id)
        assert_hidden(chain_texts(info.value), ["Left", "Right", "%41", "A%2z"])


# ---------------------------------------------------------------- options merged into every URL form
def test_open_store_options_on_every_server_url_form(postgres_server: LocalPostgres, postgres_url: str,
                                                     redis_server: LocalRedis, app_id: str) -> None:
    base_pg = postgres_url
    cases = [
        (base_pg, {"connect_timeout": 3}, base_pg + "?connect_timeout=3"),
        (base_pg.replace("postgresql://", "postgres://", 1) + "?sslmode=disable", {"connect_timeout": 3},
         base_pg.replace("postgresql://", "postgres://", 1) + "?sslmode=disable&connect_timeout=3"),
        (base_pg + "?connect_timeout=9&application_name=x", {"connect_timeout": 2},
         base_pg + "?application_name=x&connect_timeout=2"),
        (redis_server.url, {"connect_timeout": 2}, redis_server.url + "?connect_timeout=2"),
        (redis_server.url + "?timeout=9", {"timeout": 5, "connect_timeout": 2},
         redis_server.url + "?timeout=5&connect_timeout=2"),
    ]
    for i, (url, options, merged) in enumerate(cases):
        with open_store(url, f"{app_id}-{i}", **options) as store:
            assert store.url == merged
            use(store)


def test_unknown_options_are_refused_before_connecting(postgres_url: str, redis_server: LocalRedis,
                                                       app_id: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        open_store(postgres_url, app_id, conect_timeout=3)
    assert "conect_timeout" in str(info.value) and "connect_timeout" in str(info.value)
    assert "sslmode" in str(info.value) and "deo-test-pw" not in str(info.value)
    with pytest.raises(ConfigurationError, match="timout.*supported: connect_timeout, timeout"):
        open_store(redis_server.url, app_id, timout=3)


# ---------------------------------------------------------------- no secret in any log record
@pytest.mark.parametrize("backend", ["postgresql", "redis"])
def test_no_password_in_logs_errors_or_reprs(backend: str, caplog: pytest.LogCaptureFixture,
                                             postgres_server: LocalPostgres, special_postgres_db: str,
                                             special_redis: LocalRedis, app_id: str) -> None:
    wrong = "Wq7r#Tz5@Yp3"
    caplog.set_level(logging.DEBUG)  # the root logger: psycopg's and redis-py's records included
    for name in ("psycopg", "redis", "dstream_exactly_once"):
        logging.getLogger(name).setLevel(logging.DEBUG)
    try:
        def url(password: str) -> str:
            if backend == "redis":
                return redis_url(special_redis, password)
            return pg_url(postgres_server, special_postgres_db, password)

        with open_store(url(ENCODED), app_id) as store:
            use(store)
            texts = [repr(store), str(store)]
        for bad in (url(quote(wrong, safe="")), url(quote(SPECIAL[:-1], safe=""))):
            with pytest.raises(StoreAuthError) as info:
                open_store(bad, app_id, connect_timeout=3)
            assert not info.value.retriable and isinstance(info.value, StoreError)
            texts += list(chain_texts(info.value))
        if backend == "postgresql":
            # the password in the query instead of the userinfo, wrong
            query_url = (f"postgresql://{special_postgres_db}@127.0.0.1:{postgres_server.port}/{special_postgres_db}"
                         f"?password={quote(wrong, safe='')}")
            with pytest.raises(StoreAuthError) as info:
                open_store(query_url, app_id)
            texts += list(chain_texts(info.value))
            assert any(r.name.startswith("psycopg") for r in caplog.records)  # its DEBUG records were seen
    finally:
        for name in ("psycopg", "redis", "dstream_exactly_once"):
            logging.getLogger(name).setLevel(logging.NOTSET)
    assert caplog.records or backend == "redis"
    assert_hidden(texts + list(record_texts(caplog.records)),
                  spellings(SPECIAL) + spellings(wrong) + spellings(SPECIAL[:-1]))
