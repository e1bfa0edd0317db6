"""Stores against misbehaving servers: wrong scheme, nothing listening, a silent peer, wrong
passwords, and Redis / PostgreSQL SIGKILLed and restarted between commits."""

from __future__ import annotations

import socket
import time
from typing import Any, Callable, Iterator, TypeVar

import pytest

from dstream_exactly_once.errors import (
    ConfigurationError,
    StoreAuthError,
    StoreError,
    StoreUnavailableError,
)
from dstream_exactly_once.kafka._offsets import OffsetRange, TopicAndPartition
from dstream_exactly_once.stores import CommitOutcome, PlannedBatch, TransactionalStore, Writes, open_store
from dstream_exactly_once.testing import LocalPostgres, LocalRedis
from dstream_exactly_once.testing._process import free_port

T = TypeVar("T")
SECRET = "hunter2-Secret-pw"


def assert_no_secret(err: BaseException, *secrets: str) -> None:
    for text in (str(err), repr(err), str(err.__cause__), repr(err.__cause__)):
        for secret in secrets:
            assert secret not in text


def retry_unavailable(call: Callable[[], T], seconds: float = 30.0) -> T:
    """Retry ``call`` while it raises the retriable :class:`StoreUnavailableError`."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return call()
        except StoreUnavailableError as exc:
            assert exc.retriable
            if time.monotonic() > deadline:
                raise
            time.sleep(0.25)


def batches(n: int) -> list[PlannedBatch]:
    return [PlannedBatch(i, 1000 * i, (OffsetRange("t", 0, 10 * i, 10 * i + 10),)) for i in range(n)]


# ---------------------------------------------------------------- configuration and reachability
@pytest.mark.parametrize("url", [f"mysql://root:{SECRET}@127.0.0.1/db", "just/a/path.db", "SQLite3:///x.db"])
def test_unknown_scheme_names_it_and_the_supported_ones(url: str, app_id: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        open_store(url, app_id)
    message = str(info.value)
    assert "unsupported store URL scheme" in message
    assert all(s in message for s in ("postgres", "postgresql", "redis", "rediss", "sqlite"))
    assert_no_secret(info.value, SECRET)


def test_bad_app_id_and_options(redis_url: str, tmp_path: Any) -> None:
    with pytest.raises(ConfigurationError, match="app_id"):
        open_store(f"sqlite:///{tmp_path}/x.db", "")
    with pytest.raises(ConfigurationError, match="bogus"):
        open_store(redis_url, "a", bogus=1)
    with pytest.raises(ConfigurationError, match="connect_timeout"):
        open_store(f"postgresql://u:{SECRET}@127.0.0.1:1/db?connect_timeout=x", "a")


def unreachable_url(scheme: str, port: int) -> str:
    return f"{scheme}://deo:{SECRET}@127.0.0.1:{port}/" + ("0" if scheme == "redis" else "db")


@pytest.mark.parametrize("scheme", ["redis", "postgresql"])
def test_nothing_listening_is_unavailable_naming_the_address(scheme: str, app_id: str) -> None:
    port = free_port()
    started = time.monotonic()
    with pytest.raises(StoreUnavailableError) as info:
        open_store(unreachable_url(scheme, port), app_id, connect_timeout=2)
    assert time.monotonic() - started < 10
    assert f"127.0.0.1:{port}" in str(info.value) and info.value.retriable
    assert_no_secret(info.value, SECRET)


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port whose listener accepts TCP connections (kernel backlog) but never answers."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        yield s.getsockname()[1]


@pytest.mark.parametrize("scheme", ["redis", "postgresql"])
def test_silent_server_times_out_within_bound(scheme: str, silent_port: int, app_id: str) -> None:
    started = time.monotonic()
    with pytest.raises(StoreUnavailableError) as info:
        open_store(unreachable_url(scheme, silent_port), app_id, connect_timeout=2, **(
            {"timeout": 1} if scheme == "redis" else {}))
    assert time.monotonic() - started < 15
    assert f"127.0.0.1:{silent_port}" in str(info.value)
    assert_no_secret(info.value, SECRET)


# ---------------------------------------------------------------- credentials
@pytest.fixture(scope="module")
def auth_redis() -> Iterator[LocalRedis]:
    server = LocalRedis(password=SECRET)
    server.start()
    yield server
    server.stop()


def test_redis_wrong_or_missing_password(auth_redis: LocalRedis, app_id: str) -> None:
    for url in (f"redis://:wrong-{SECRET}@127.0.0.1:{auth_redis.port}/0", f"redis://127.0.0.1:{auth_redis.port}/0",
                f"redis://someone:wrong-{SECRET}@127.0.0.1:{auth_redis.port}/0"):
        with pytest.raises(StoreAuthError) as info:
            open_store(url, app_id)
        assert f"127.0.0.1:{auth_redis.port}" in str(info.value) and not info.value.retriable
        assert_no_secret(info.value, SECRET)


def test_redis_right_password_is_never_shown(auth_redis: LocalRedis, app_id: str) -> None:
    with open_store(auth_redis.url, app_id) as store:
        assert SECRET not in repr(store) and SECRET not in str(store)
        epoch = store.start_epoch()
        assert store.commit(epoch, batches(1)[0], Writes().incr("c", "n")) is CommitOutcome.APPLIED


def test_postgres_wrong_password(postgres_server: LocalPostgres, app_id: str) -> None:
    url = postgres_server.url(postgres_server.create_database(), password=f"wrong-{SECRET}")
    with pytest.raises(StoreAuthError) as info:
        open_store(url, app_id)
    assert f"127.0.0.1:{postgres_server.port}" in str(info.value) and not info.value.retriable
    assert_no_secret(info.value, SECRET, "deo-test-pw")


def test_other_driver_errors_are_store_errors(postgres_server: LocalPostgres, redis_server: LocalRedis,
                                              app_id: str) -> None:
    for url in (postgres_server.url("no_such_database_here"), f"redis://127.0.0.1:{redis_server.port}/99"):
        with pytest.raises(StoreError) as info:
            open_store(url, app_id)
        assert type(info.value) is StoreError and info.value.__cause__ is not None
        assert "deo-test-pw" not in str(info.value)


# ---------------------------------------------------------------- crash and restart
def _survives_restart(store: TransactionalStore, kill: Callable[[], None], start: Callable[[], None],
                      address: str) -> None:
    b0, b1, b2 = batches(3)
    epoch = store.start_epoch()
    store.log_batch(epoch, b0)
    assert store.commit(epoch, b0, Writes().incr("c", "n").add_label("b0")) is CommitOutcome.APPLIED
    kill()
    with pytest.raises(StoreUnavailableError) as info:
        store.commit(epoch, b1, Writes().incr("c", "n"))
    assert address in str(info.value)
    assert_no_secret(info.value, SECRET, "deo-test-pw")
    start()
    assert retry_unavailable(lambda: store.commit(epoch, b1, Writes().incr("c", "n"))) is CommitOutcome.APPLIED
    assert store.commit(epoch, b1, Writes().incr("c", "n")) is CommitOutcome.REPLAYED
    assert store.commit(epoch, b2, Writes().incr("c", "n")) is CommitOutcome.APPLIED
    assert store.get_value("c", "n") == 3 and store.has_label("b0")
    assert store.load_offsets() == {TopicAndPartition("t", 0): 30}
    assert store.last_committed_batch_id() == 2 and store.get_batch(0) == b0


def test_redis_sigkill_and_restart(redis_server: LocalRedis, app_id: str) -> None:
    with open_store(redis_server.url, app_id) as store:
        _survives_restart(store, redis_server.kill, redis_server.start, f"127.0.0.1:{redis_server.port}")


def test_postgres_sigkill_and_restart(postgres_server: LocalPostgres, postgres_url: str, app_id: str) -> None:
    with postgres_server.connect() as admin:  # keeps crash recovery short; the commits below still need it
        admin.execute("CHECKPOINT")
    with open_store(postgres_url, app_id) as store:
        _survives_restart(store, postgres_server.kill, postgres_server.start, f"127.0.0.1:{postgres_server.port}")
