"""A password placed in any URL-taking option of any entry point never shows: not in the error a bad
value raises (its text, its repr, its traceback), not in the repr of what was built. Store URLs
(userinfo and ``password=``), the Doris FE URL, Kafka broker addresses and SASL settings, through
the Python API and the ``dstream-eo`` command line."""

from __future__ import annotations

import traceback
from pathlib import Path
from typing import Any, Callable, List, Tuple

import pytest

from dstream_exactly_once.errors import DStreamExactlyOnceError

from ..helpers import run_cli as cli

PW = "Pw-9f3kZq"  # never registered by the test itself: only the library's own redaction may hide it


def _texts(exc: BaseException) -> str:
    return "\n".join([str(exc), repr(exc), "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))])


def _store_calls() -> List[Tuple[str, Callable[[], Any]]]:
    from dstream_exactly_once.stores import open_store

    urls = [
        f"postgresql://deo:{PW}@127.0.0.1:1/db?sslmode=maybe",
        f"postgresql://deo@127.0.0.1:1/db?password={PW}&sslmode=maybe",
        f"postgresql://deo:{PW}@127.0.0.1:1/db?bogus=1",
        f"redis://:{PW}@127.0.0.1:1/0?bogus=1",
        f"redis://:{PW}@127.0.0.1:1/zero",
        f"rediss://:{PW}@127.0.0.1:1/0?ssl_cert_reqs=maybe",
        f"redis://:{PW}@127.0.0.1:1/0?ssl_cert_reqs=none",
        f"redis+cluster://:{PW}@127.0.0.1:1?wait_replicas=x",
        f"redis+cluster://:{PW}@127.0.0.1:1,bad host",
        f"mysql://u:{PW}@h/db",
        f"postgresql://u:{PW}#x@h/db",
        f"sqlite:///x.db?password={PW}",
    ]
    return [(f"open_store({u.split('://')[0]}…)", lambda u=u: open_store(u, "app")) for u in urls]


def _structured_calls(tmp_path: Path) -> List[Tuple[str, Callable[[], Any]]]:
    from dstream_exactly_once.kafka.structured._sink import kafka_sink_options
    from dstream_exactly_once.structured._doris_sink import doris_sink_options
    from dstream_exactly_once.structured._store_sink import store_sink_options

    bad_store = f"postgresql://deo:{PW}@127.0.0.1:1/db?sslmode=maybe"
    good_store = f"sqlite:///{tmp_path}/s.db"
    return [
        ("store_sink_options(store=…)", lambda: store_sink_options(bad_store, "q")),
        ("kafka_sink_options(store=…)", lambda: kafka_sink_options(bad_store, "q", "t", {"bootstrap.servers": "h:1"})),
        ("kafka_sink_options(bootstrap with userinfo)",
         lambda: kafka_sink_options(good_store, "q", "t", {"bootstrap.servers": f"alice:{PW}@h:9092"})),
        ("doris_sink_options(store=…)", lambda: doris_sink_options(bad_store, "q", "http://fe:8030", "d", "t")),
        ("doris_sink_options(fe=…?password=)",
         lambda: doris_sink_options(good_store, "q", f"http://fe:8030?password={PW}", "d", "t")),
    ]


def _doris_calls() -> List[Tuple[str, Callable[[], Any]]]:
    from dstream_exactly_once.sinks.doris import DorisStreamLoadClient

    fes = [f"http://fe:8030?password={PW}", f"http://fe:8030/api?password={PW}", f"http://root:{PW}@fe:8030",
           f"ftp://root:{PW}@fe:8030", f"ftp://fe:8030?password={PW}", f"http://fe:99999?password={PW}",
           f"http://fe:8030#password={PW}"]
    return [(f"DorisStreamLoadClient({fe.split('://')[0]}…)", lambda fe=fe: DorisStreamLoadClient(fe, "d", "t"))
            for fe in fes]


def _kafka_calls() -> List[Tuple[str, Callable[[], Any]]]:
    from dstream_exactly_once.kafka._params import parse_kafka_params
    from dstream_exactly_once.kafka.sinks._transactional import KafkaTransactionalSink

    params = [
        {"bootstrap.servers": f"alice:{PW}@h:9092"},
        {"bootstrap.servers": f"SASL_SSL://alice:{PW}@h:9092"},
        {"bootstrap.servers": f"h:9092,alice:{PW}@h2:99999"},
        {"bootstrap.servers": "h:9092", "sasl.password": PW, "sasl.mechanism": "BOGUS"},
        {"bootstrap.servers": "h:9092", "sasl.jaas.config": f'bogus.Module required password="{PW}";'},
    ]
    calls: List[Tuple[str, Callable[[], Any]]] = [(f"kafkaParams {sorted(p)}", lambda p=p: parse_kafka_params(p))
                                                  for p in params]
    calls += [(f"KafkaTransactionalSink {sorted(p)}", lambda p=p: KafkaTransactionalSink(p, "t")) for p in params]
    return calls


def test_no_error_of_a_url_taking_option_shows_its_password() -> None:
    _assert_hidden(_store_calls() + _doris_calls() + _kafka_calls())


@pytest.mark.pyspark4
def test_no_error_of_a_structured_sink_option_shows_its_password(tmp_path: Path) -> None:
    _assert_hidden(_structured_calls(tmp_path))


def _assert_hidden(calls: List[Tuple[str, Callable[[], Any]]]) -> None:
    refused = 0
    for what, call in calls:
        try:
            built = call()
        except DStreamExactlyOnceError as exc:
            refused += 1
            assert PW not in _texts(exc), f"{what}: {_texts(exc)}"
        else:
            assert PW not in repr(built), f"{what}: {built!r}"
            getattr(built, "close", lambda: None)()
    assert refused >= len(calls) - 2, "the cases must be refused to prove anything"


def test_reprs_of_what_holds_a_password_hide_it(tmp_path: Path) -> None:
    from dstream_exactly_once.kafka._params import parse_kafka_params
    from dstream_exactly_once.kafka.sinks._transactional import KafkaTransactionalSink
    from dstream_exactly_once.sinks.doris import DorisStreamLoadClient
    from dstream_exactly_once.stores.redis._cluster import RedisClusterStore
    from dstream_exactly_once.stores.redis._store import RedisStore
    from dstream_exactly_once.stores.sql._postgres import PostgresStore

    sasl = {"bootstrap.servers": "h:9092", "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.username": "alice", "sasl.password": PW}
    built = [PostgresStore(f"postgresql://deo:{PW}@h/db", "a"),
             PostgresStore(f"postgresql://deo@h/db?password={PW}", "a"),
             RedisStore(f"redis://:{PW}@h:1/0", "a"), RedisClusterStore(f"redis+cluster://:{PW}@h:1,h:2", "a"),
             DorisStreamLoadClient("http://fe:8030", "d", "t", password=PW), parse_kafka_params(sasl),
             KafkaTransactionalSink(sasl, "t")]
    for obj in built:
        assert PW not in repr(obj) and PW not in str(obj), repr(obj)


@pytest.mark.parametrize("argv", [
    ("in-doubt", "--store", "sqlite:///{tmp}/s.db", "--app", "a", "--fe", f"http://fe:8030?password={PW}",
     "--db", "d", "--table", "t"),
    ("in-doubt", "--store", "sqlite:///{tmp}/s.db", "--app", "a", "--fe", f"ftp://root:{PW}@fe", "--db", "d",
     "--table", "t"),
    ("offsets", "show", "--store", f"mysql://u:{PW}@h/db", "--app", "a"),
    ("batches", "--store", f"postgresql://u:{PW}@127.0.0.1:1/db?sslmode=maybe", "--app", "a"),
    ("offsets", "show", "--store", "sqlite:///{tmp}/s.db", "--app", "a", "--bootstrap-servers", f"alice:{PW}@h:9092"),
])
def test_the_command_line_never_shows_a_password(argv: Tuple[str, ...], capsys: Any, tmp_path: Path) -> None:
    from dstream_exactly_once.stores import open_store

    with open_store(f"sqlite:///{tmp_path}/s.db", "a") as st:
        st.start_epoch()
    code, out, err = cli(capsys, *(a.format(tmp=tmp_path) for a in argv))
    assert code != 0 and err, (code, out, err)
    assert PW not in out and PW not in err, err
