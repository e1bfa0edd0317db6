"""Store URLs, options and application ids, checked without a server.

Nothing here connects: SQLite stores are real files in ``tmp_path``; PostgreSQL and Redis stores
are only constructed (they connect lazily), or refused before any connection is tried.
"""

from __future__ import annotations

import pickle
import uuid
from typing import Any, Dict

import pytest

from dstream_exactly_once.errors import ConfigurationError
from dstream_exactly_once.stores import PostgresStore, RedisStore, SQLiteStore, TransactionalStore, open_store
from dstream_exactly_once.stores._app_id import APP_ID_PATTERN, check_app_id
from dstream_exactly_once.stores._url import check_server_url, parse_url, redact_url, with_options

# ---------------------------------------------------------------- options merged into every URL form
WITH_OPTIONS = [
    ("sqlite:///relative.db", {"timeout": 5}, "sqlite:///relative.db?timeout=5"),
    ("sqlite:////abs/path.db", {"timeout": 5}, "sqlite:////abs/path.db?timeout=5"),
    ("sqlite:////abs/path.db?timeout=1", {"timeout": 2.5}, "sqlite:////abs/path.db?timeout=2.5"),
    ("postgresql://u:p%23w@h:5433/db?sslmode=disable", {"connect_timeout": 3},
     "postgresql://u:p%23w@h:5433/db?sslmode=disable&connect_timeout=3"),
    ("postgres://u@h/db", {"application_name": "my app/1"}, "postgres://u@h/db?application_name=my%20app%2F1"),
    ("postgresql://h/db?options=-c%20statement_timeout%3D5&connect_timeout=9", {"connect_timeout": 2},
     "postgresql://h/db?options=-c%20statement_timeout%3D5&connect_timeout=2"),
    ("redis://:p%40w@127.0.0.1:6380/2", {"timeout": 4, "connect_timeout": 1},
     "redis://:p%40w@127.0.0.1:6380/2?timeout=4&connect_timeout=1"),
    ("rediss://h/0?ssl_cert_reqs=none&timeout=9", {"timeout": 4},
     "rediss://h/0?ssl_cert_reqs=none&timeout=4"),
]


@pytest.mark.parametrize("url, options, merged", WITH_OPTIONS)
def test_with_options_touches_only_the_query(url: str, options: Dict[str, Any], merged: str) -> None:
    assert with_options(url, options) == merged
    assert with_options(url, {}) == url


@pytest.mark.parametrize("form", ["relative", "absolute", "absolute-with-query"])
def test_open_sqlite_with_options_keeps_the_url_the_user_wrote(form: str, tmp_path: Any, monkeypatch: Any,
                                                                app_id: str) -> None:
    monkeypatch.chdir(tmp_path)
    url = {"relative": "sqlite:///rel/x.db", "absolute": f"sqlite:///{tmp_path}/abs/x.db",
           "absolute-with-query": f"sqlite:///{tmp_path}/abs/x.db?timeout=1"}[form]
    assert url.startswith("sqlite:////") or form == "relative"
    (tmp_path / ("rel" if form == "relative" else "abs")).mkdir()
    with open_store(url, app_id, timeout=5) as store:
        assert isinstance(store, SQLiteStore) and store.timeout == 5.0
        path = tmp_path / ("rel" if form == "relative" else "abs") / "x.db"
        assert store.path == str(path) and not path.exists()  # opening writes nothing
        assert store.url == f"sqlite:///{path}?timeout=5"
        assert pickle.loads(pickle.dumps(store)).timeout == 5.0
        assert store.commit(store.start_epoch(), _batch(), _writes()).value == "applied"
        assert path.exists()


def _batch() -> Any:
    from dstream_exactly_once.kafka._offsets import OffsetRange
    from dstream_exactly_once.stores import PlannedBatch

    return PlannedBatch(0, 1000, (OffsetRange("t", 0, 0, 1),))


def _writes() -> Any:
    from dstream_exactly_once.stores import Writes

    return Writes().incr("c", "n")


@pytest.mark.parametrize("url, backend, expected", [
    ("postgresql://u:p%23w@h:5433/db", PostgresStore, "postgresql://u:p%23w@h:5433/db?connect_timeout=3"),
    ("postgres://u@h/db?sslmode=disable", PostgresStore, "postgres://u@h/db?sslmode=disable&connect_timeout=3"),
    ("redis://:p%40w@h:6380/2", RedisStore, "redis://:p%40w@h:6380/2?connect_timeout=3"),
    ("rediss://h/0?timeout=9", RedisStore, "rediss://h/0?timeout=9&connect_timeout=3"),
])
def test_server_store_options_merge_into_existing_queries(url: str, backend: type, expected: str) -> None:
    store = backend(with_options(url, {"connect_timeout": 3}), "app")  # connects lazily
    assert store.url == expected
    if backend is RedisStore:
        params = store._params  # type: ignore[attr-defined]
        assert params["socket_connect_timeout"] == 3.0 and params["ssl"] == url.startswith("rediss")
        assert params["password"] == (None if url.startswith("rediss") else "p@w")
        assert params["socket_timeout"] == (9.0 if "timeout=9" in url else 30.0)
    else:
        assert store._connect_timeout == 3  # type: ignore[attr-defined]


@pytest.mark.parametrize("url, allowed", [
    ("sqlite:///{tmp}/x.db", "timeout"),
    ("redis://127.0.0.1:1/0", "connect_timeout, timeout, ssl_ca_certs, ssl_cert_reqs"),
    ("rediss://127.0.0.1:1/0", "connect_timeout, timeout, ssl_ca_certs, ssl_cert_reqs"),
    ("postgresql://u:pw@127.0.0.1:1/db", "sslmode"),
    ("postgres://u:pw@127.0.0.1:1/db", "connect_timeout"),
])
def test_unknown_option_is_refused_naming_it_and_the_allowed_ones(url: str, allowed: str, tmp_path: Any) -> None:
    url = url.format(tmp=tmp_path)
    with pytest.raises(ConfigurationError) as info:
        open_store(url, "app", timeout_s=5)
    assert "timeout_s" in str(info.value) and allowed in str(info.value)
    assert "pw" not in str(info.value)
    with pytest.raises(ConfigurationError) as info:  # the same in the URL itself
        open_store(url + "?bogus_opt=1", "app")
    assert "bogus_opt" in str(info.value) and allowed in str(info.value)
    assert not list(tmp_path.iterdir())  # nothing was created


def test_option_values_must_be_str_or_numbers(tmp_path: Any) -> None:
    with pytest.raises(ConfigurationError, match=r"option timeout must be a str or a number, got \[5\]"):
        open_store(f"sqlite:///{tmp_path}/x.db", "app", timeout=[5])
    with pytest.raises(ConfigurationError) as info:
        open_store("postgresql://u@127.0.0.1:1/db", "app", password=object())
    assert "password" in str(info.value) and "object" not in str(info.value)
    with pytest.raises(ConfigurationError, match="timeout must be a positive number"):
        open_store(f"sqlite:///{tmp_path}/x.db", "app", timeout="soon")


# ---------------------------------------------------------------- reserved characters in passwords
RESERVED = ["#", "?", "/", "@", "%zz", "%"]


@pytest.mark.parametrize("char", RESERVED)
@pytest.mark.parametrize("scheme", ["postgresql", "postgres", "redis", "rediss"])
def test_raw_reserved_characters_in_a_password_are_refused_redacted(scheme: str, char: str) -> None:
    url = f"{scheme}://someone:Left{char}Right@127.0.0.1:1/0?connect_timeout=1"
    for call in (lambda: open_store(url, "app"), lambda: parse_url(url),
                 lambda: (PostgresStore if scheme.startswith("postgres") else RedisStore)(url, "app")):
        with pytest.raises(ConfigurationError) as info:
            call()
        message = str(info.value)
        assert "percent-encode" in message and "%23" in message and "%40" in message
        assert "Left" not in message and "Right" not in message, message
        context = info.value.__cause__ or info.value.__context__
        assert context is None or "Left" not in repr(context)


@pytest.mark.parametrize("url", [
    "postgresql://u:pw@h/db#frag", "redis://h/0#x", "postgresql://u@h/db?user=me@srv",
    "redis://user:a@b@h/0", "redis://:p/x@h/0",
])
def test_other_ambiguous_urls_are_refused(url: str) -> None:
    with pytest.raises(ConfigurationError, match="percent-encode"):
        check_server_url(url)


@pytest.mark.parametrize("char", ["#", "?", "/", "@", "%", ":", " ", "é"])
def test_percent_encoded_passwords_are_decoded(char: str) -> None:
    from urllib.parse import quote

    secret = f"Left{char}Right"
    for scheme in ("postgresql", "redis"):
        parsed = parse_url(f"{scheme}://{quote('us@r', safe='')}:{quote(secret, safe='')}@127.0.0.1:5/0")
        assert (parsed.username, parsed.password, parsed.host, parsed.port) == ("us@r", secret, "127.0.0.1", 5)
        assert secret not in repr(parsed) and "Left" not in repr(parsed)


def test_password_that_is_not_utf8_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="UTF-8") as info:
        parse_url("redis://:Left%ffRight@h/0")
    assert "Left" not in str(info.value)


@pytest.mark.parametrize("url, shown", [
    ("postgresql://u:Sec%23ret@h/db", "postgresql://u:***@h/db"),
    ("postgresql://h/db?sslmode=disable&password=Sec#ret&x=1", "postgresql://h/db?sslmode=disable&password=***&x=1"),
    ("postgresql://u:Sec#ret@h/db", "postgresql://u:***@h/db"),
    ("redis://:Sec?ret@h/0", "redis://:***@h/0"),
    ("postgresql://h/db?sslpassword=Secret&oauth_client_secret=Secret", "postgresql://h/db?sslpassword=***&"
     "oauth_client_secret=***"),
])
def test_redact_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_scrub_covers_every_spelling_of_the_passwords() -> None:
    parsed = parse_url("postgresql://u:Sec%2Fret@h/db?sslpassword=k%20ey")
    text = parsed.scrub("a Sec/ret b Sec%2Fret c k ey d k%20ey")
    assert "Sec" not in text and "ey" not in text


# ---------------------------------------------------------------- the one app_id rule
GOOD_IDS = ["wordcount", "wc", "a", "app-" + uuid.uuid4().hex[:12], f"b3-4-1000-{uuid.uuid4().hex[:8]}",
            str(uuid.uuid4()), "team.job:prod_v2", "A" * 200, "faults-redis-" + uuid.uuid4().hex]
BAD_IDS = ["", "A" * 201, "a}b", "{deo:x}", "has space", "a/b", "tab\t", "new\nline", "é", "a*", None, 5, b"ab"]


def _constructors(tmp_path: Any) -> Dict[str, Any]:
    return {"sqlite": lambda a: SQLiteStore(f"sqlite:///{tmp_path}/x.db", a),
            "postgresql": lambda a: PostgresStore("postgresql://u@127.0.0.1:1/db", a),
            "redis": lambda a: RedisStore("redis://127.0.0.1:1/0", a),
            "open_store": lambda a: open_store(f"sqlite:///{tmp_path}/y.db", a)}


@pytest.mark.parametrize("app_id", GOOD_IDS)
def test_app_ids_accepted_by_every_store(app_id: str, tmp_path: Any) -> None:
    assert check_app_id(app_id) == app_id
    for name, make in _constructors(tmp_path).items():
        store: TransactionalStore = make(app_id)
        assert store.app_id == app_id, name
        store.close()


@pytest.mark.parametrize("app_id", BAD_IDS)
def test_app_ids_refused_identically_by_every_store(app_id: Any, tmp_path: Any) -> None:
    messages = set()
    for make in [check_app_id, *_constructors(tmp_path).values()]:
        with pytest.raises(ConfigurationError) as info:
            make(app_id)
        messages.add(str(info.value))
    assert len(messages) == 1
    message = messages.pop()
    assert APP_ID_PATTERN in message and "app_id" in message
    assert repr(app_id)[:60] in message
    assert not list(tmp_path.iterdir())  # nothing was created


def test_redis_keys_of_an_app_share_one_hash_tag() -> None:
    from redis.crc import key_slot

    store = RedisStore("redis://127.0.0.1:1/0", "team.job:prod_v2-1")
    keys = [store._key(k) for k in ("epoch", "offsets")] + [store._key("vi", "n}s{x")]  # type: ignore[attr-defined]
    assert len({key_slot(k.encode()) for k in keys}) == 1
