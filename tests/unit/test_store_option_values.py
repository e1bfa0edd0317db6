"""Store URL option values are checked before anything connects or is created: a bad value is a
ConfigurationError (not retriable) naming the option, the value and what is allowed, with no password;
a SQLite path in a missing directory is refused unless the URL opts in with ``create_dirs=true``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dstream_exactly_once.errors import ConfigurationError
from dstream_exactly_once.stores import PlannedBatch, Writes, open_store
from dstream_exactly_once.stores.redis._store import RedisStore
from dstream_exactly_once.stores.sql._postgres import PostgresStore
from dstream_exactly_once.stores.sql._sqlite import SQLiteStore

SECRET = "s3cr3t-Pw"


@pytest.mark.parametrize("url, option, value, allowed", [
    # an unreachable port: before the fix these surfaced only when the store was used, as an outage
    (f"rediss://:{SECRET}@127.0.0.1:1/0?ssl_cert_reqs=maybe", "ssl_cert_reqs", "'maybe'",
     "none, optional, required"),
    (f"rediss+cluster://:{SECRET}@127.0.0.1:1?ssl_cert_reqs=maybe", "ssl_cert_reqs", "'maybe'",
     "none, optional, required"),
    (f"rediss://:{SECRET}@127.0.0.1:1/0?ssl_ca_certs=/no/such/ca.pem", "ssl_ca_certs", "'/no/such/ca.pem'",
     "readable file"),
    (f"postgresql://deo:{SECRET}@127.0.0.1:1/db?sslmode=maybe", "sslmode", "'maybe'", "verify-full"),
    (f"postgresql://deo:{SECRET}@127.0.0.1:1/db?target_session_attrs=leader", "target_session_attrs",
     "'leader'", "read-write"),
    (f"postgresql://deo:{SECRET}@127.0.0.1:1/db?keepalives_idle=soon", "keepalives_idle", "'soon'",
     "non-negative integer"),
    (f"postgresql://deo:{SECRET}@127.0.0.1:1/db?port=99999", "port", "'99999'", "port numbers"),
    ("sqlite:///{tmp}/x.db?create_dirs=maybe", "create_dirs", "'maybe'", "true or false"),
    ("sqlite:///{tmp}/x.db?timeout=soon", "timeout", "'soon'", "positive number"),
])
def test_a_bad_option_value_is_refused_before_connecting(url: str, option: str, value: str, allowed: str,
                                                         tmp_path: Path) -> None:
    url = url.format(tmp=tmp_path)
    with pytest.raises(ConfigurationError) as info:
        with open_store(url, "app") as store:
            store.load_positions()  # on a valid URL this would reach the (absent) server
    message = str(info.value)
    assert option in message and value in message and allowed in message, message
    assert SECRET not in message and SECRET not in repr(info.value)
    assert info.value.retriable is False
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("url", ["redis://:{pw}@127.0.0.1:1/0?ssl_cert_reqs=none",
                                 "redis+cluster://:{pw}@127.0.0.1:1?ssl_ca_certs={ca}"])
def test_tls_options_on_a_plain_redis_url_are_refused(url: str, tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("not used")
    with pytest.raises(ConfigurationError, match=r"ssl_\w+ set TLS, which only a rediss:// URL uses") as info:
        open_store(url.format(pw=SECRET, ca=ca), "app")
    assert SECRET not in str(info.value)


def test_good_option_values_are_accepted(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    stores = [RedisStore(f"rediss://127.0.0.1:1/0?ssl_cert_reqs=required&ssl_ca_certs={ca}", "app"),
              PostgresStore("postgresql://deo@127.0.0.1:1/db?sslmode=verify-full&port=5432,5433&keepalives=1",
                            "app"),
              SQLiteStore(f"sqlite:///{tmp_path}/ok.db?create_dirs=false", "app")]
    for store in stores:  # constructing checks the URL, it does not connect
        store.close()


def _commit(url: str) -> None:
    with open_store(url, "app") as store:
        store.load_positions()
        epoch = store.start_epoch()
        store.commit(epoch, PlannedBatch(0, 1, ()), Writes().incr("n", "c", 1))


def test_a_sqlite_path_in_a_missing_directory_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "typo" / "state.db"
    with pytest.raises(ConfigurationError) as info:
        _commit(f"sqlite:///{path}")
    message = str(info.value)
    assert str(path) in message and f"directory {tmp_path / 'typo'} does not exist" in message
    assert "create_dirs=true" in message
    assert list(tmp_path.iterdir()) == []  # no directory, no file
    store: Any = SQLiteStore(f"sqlite:///{path}", "app")  # not read first
    with pytest.raises(ConfigurationError, match="does not exist"):
        store.start_epoch()  # a write straight away is refused too
    store.close()
    assert list(tmp_path.iterdir()) == []


def test_create_dirs_true_lets_the_first_write_create_the_directory(tmp_path: Path) -> None:
    path = tmp_path / "new" / "deeper" / "state.db"
    url = f"sqlite:///{path}?create_dirs=true"
    with open_store(url, "app") as store:
        assert store.load_positions() == {} and not path.parent.exists()  # reading creates nothing
    _commit(url)
    assert path.exists()
