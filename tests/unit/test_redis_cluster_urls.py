"""``redis+cluster://`` store URLs and the ``wait_replicas`` / ``wait_timeout`` options (no server
needed: every case is refused, or fails to connect, before anything is written)."""

from __future__ import annotations

import logging
import pickle
import socket

import pytest

from dstream_exactly_once.errors import ConfigurationError, StoreUnavailableError
from dstream_exactly_once.stores import RedisClusterStore, RedisStore, open_store
from dstream_exactly_once.stores._url import parse_url
from dstream_exactly_once.stores.redis._wait import WaitOptions, wait_options


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_cluster_url_lists_startup_nodes_and_pickles_as_written() -> None:
    url = "redis+cluster://deo:p%40w@10.0.0.1:7000,[::1]:7001,node3/?timeout=4&wait_replicas=1"
    store = RedisClusterStore(url, "app")
    assert store._startup_nodes == [("10.0.0.1", 7000), ("::1", 7001), ("node3", 6379)]  # type: ignore[attr-defined]
    assert store._params["password"] == "p@w" and store._params["socket_timeout"] == 4.0  # type: ignore[attr-defined]
    assert "db" not in store._params and store._wait == WaitOptions(1, 1000)  # type: ignore[attr-defined]
    assert pickle.loads(pickle.dumps(store)).url == url
    assert "p%40w" not in repr(store) and "p@w" not in repr(store)
    assert parse_url(url, multi_host=True).hosts == (("10.0.0.1", 7000), ("::1", 7001), ("node3", None))


@pytest.mark.parametrize("url, needle", [
    ("redis+cluster://h1:7000,,h2:7001", "bad host ''"),
    ("redis+cluster://h1:99999", "bad host 'h1:99999'"),
    ("redis+cluster://h1:x,h2:7001", "bad host 'h1:x'"),
    ("redis+cluster://h1:7000/3", "database 0 only, got path '/3'"),
    ("redis+cluster://h1:7000/?wait_replicas=-1", "wait_replicas must be a number of replicas (an int >= 0), got '-1'"),
    ("redis+cluster://h1:7000/?wait_replicas=one", "wait_replicas must be a number of replicas (an int >= 0), got "
                                                   "'one'"),
    ("redis://h1:7000/0?wait_timeout=0", "wait_timeout must be milliseconds (an int >= 1), got '0'"),
    ("redis://h1:7000/0?wait_timeout=1.5", "wait_timeout must be milliseconds (an int >= 1), got '1.5'"),
    ("redis+cluster://h1:7000/?db=1", "unknown store option(s) db"),
])
def test_bad_cluster_urls_and_wait_options_are_refused_before_connecting(url: str, needle: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        open_store(url, "app")
    assert needle in str(info.value)


def test_wait_options_defaults_and_values() -> None:
    assert wait_options("redis://h", {}) == WaitOptions(0, 1000)
    assert wait_options("redis://h", {"wait_replicas": "2", "wait_timeout": "250"}) == WaitOptions(2, 250)
    assert open_store.__doc__ is not None and "redis+cluster://" in open_store.__doc__


def test_a_single_node_url_is_not_a_cluster_url() -> None:
    with pytest.raises(ConfigurationError, match=r"RedisClusterStore URLs start with redis\+cluster or "
                                                 r"rediss\+cluster://"):
        RedisClusterStore("redis://h:1/0", "app")
    with pytest.raises(ConfigurationError, match="RedisStore URLs start with redis or rediss://"):
        RedisStore("redis+cluster://h:1", "app")


def test_an_unreachable_cluster_is_a_retriable_outage_and_hides_the_password(
        caplog: pytest.LogCaptureFixture) -> None:
    password = "Cl-Pw-9x%23Q"
    url = f"redis+cluster://deo:{password}@127.0.0.1:{closed_port()},127.0.0.1:{closed_port()}/?connect_timeout=1"
    with caplog.at_level(logging.DEBUG), pytest.raises(StoreUnavailableError) as info:
        open_store(url, "secret-app")
    assert info.value.retriable
    shown = [str(info.value), repr(info.value), repr(info.value.__cause__)] + [r.getMessage() for r in caplog.records]
    for text in shown:
        assert password not in text and password.replace("%23", "#") not in text, text
