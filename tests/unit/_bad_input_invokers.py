"""How test_bad_input_generated.py calls each registry entry point with one option replaced.

Every invoker takes ``(live, key, value)`` and returns ``(error, message)``: the exception the entry
point raised (``"usage"`` for a command-line usage error) and its text, ``(None, "")`` when the call
was accepted. ``also_bad=True`` adds a second, surely bad option (so a call with a good ``value`` is
refused too: the password tests)."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Optional, Tuple
from urllib.parse import quote

from dstream_exactly_once.errors import DStreamExactlyOnceError
from dstream_exactly_once.stores import open_store

Result = Tuple[Any, str]
KP = {"bootstrap.servers": "127.0.0.1:9"}


@dataclass
class Live:
    """A SQLite store a live driver holds an epoch on; ``fresh_path``: a store file that must never appear."""

    root: str
    app: str
    store: Any
    epoch: int
    sc: Any = None
    _ssc: Any = field(default=None)
    server_url: str = ""
    server_store: Any = None
    server_epoch: int = 0

    def hold_server(self, url: str) -> None:
        """A live driver's epoch on the server store at ``url`` too (PostgreSQL or Redis)."""
        self.server_url = url
        self.server_store = open_store(url, self.app)
        self.server_epoch = self.server_store.start_epoch()

    @classmethod
    def start(cls, tmp_path: Any) -> Live:
        root = os.path.join(str(tmp_path), "live")
        os.makedirs(root)
        app = "app-" + uuid.uuid4().hex[:8]
        store = open_store(f"sqlite:///{root}/state.db", app)
        live = cls(str(tmp_path), app, store, store.start_epoch())
        with open(os.path.join(str(tmp_path), "in.log"), "w") as f:
            f.write("a\n")
        return live

    @property
    def url(self) -> str:
        return f"sqlite:///{self.root}/live/state.db"

    @property
    def fresh_path(self) -> str:
        return f"{self.root}/fresh/state.db"

    @property
    def fresh_url(self) -> str:
        return f"sqlite:///{self.fresh_path}"

    @property
    def glob(self) -> str:
        return f"{self.root}/*.log"

    def url_with_password(self, password: str, where: str = "user") -> str:
        """A URL holding ``password`` in its user part, or (``where="query"``) as a query option."""
        if where == "query":
            return f"http://127.0.0.1:9/nowhere?password={quote(password, safe='')}"
        return f"postgresql://deo:{quote(password, safe='')}@127.0.0.1:9/nowhere"

    def snapshot(self) -> Tuple[Any, ...]:
        files = sorted(n for n in os.listdir(f"{self.root}/live") if not n.endswith("-shm"))  # an index, not data
        digests = []
        for name in files:
            with open(f"{self.root}/live/{name}", "rb") as f:
                digests.append((name, hashlib.sha256(f.read()).hexdigest()))
        server = _server_state(self.server_url) if self.server_url else None
        held = self.server_store is None or self.server_store.current_epoch() == self.server_epoch
        return tuple(digests), self.store.current_epoch() == self.epoch, server, held

    @property
    def ssc(self) -> Any:
        if self._ssc is None:
            from pyspark.streaming import StreamingContext

            self._ssc = StreamingContext(self.sc, 1)
        return self._ssc

    def close(self) -> None:
        if self._ssc is not None:  # never started: stopping it closes what the accepted calls opened
            self._ssc.stop(stopSparkContext=False)
        self.store.close()
        if self.server_store is not None:
            self.server_store.close()


def _server_state(url: str) -> Any:
    """Every row of every table (PostgreSQL) or every key's dump (Redis) of the server store at ``url``."""
    if url.startswith("postgresql"):
        import psycopg

        with psycopg.connect(url) as conn:
            tables = [r[0] for r in conn.execute("SELECT table_name FROM information_schema.tables "
                                                 "WHERE table_schema = 'public' ORDER BY 1")]
            return {t: sorted(map(repr, conn.execute(f'SELECT * FROM "{t}"'))) for t in tables}
    import redis

    client = redis.Redis.from_url(url)
    try:
        return {k: client.dump(k) for k in sorted(client.scan_iter("*"))}
    finally:
        client.close()


def _call(fn: Callable[[], Any]) -> Result:
    try:
        out = fn()
    except DStreamExactlyOnceError as exc:
        return exc, str(exc)
    except SystemExit as exc:
        return ("usage" if exc.code == 2 else exc), str(exc)
    except Exception as exc:  # noqa: BLE001 - any other error is a finding: the test shows it
        return exc, f"{type(exc).__name__}: {exc}"
    if hasattr(out, "close"):
        with contextlib.suppress(Exception):
            out.close()
    return None, ""


def _with(base: Dict[str, Any], key: str, value: Any, bad: Optional[Tuple[str, Any]]) -> Dict[str, Any]:
    out = dict(base)
    out[key] = value
    if bad is not None and bad[0] != key:
        out[bad[0]] = bad[1]
    return out


def _keywords(make: Callable[[Live, Dict[str, Any]], Any], base: Callable[[Live], Dict[str, Any]],
              bad: Tuple[str, Any]) -> Callable[..., Result]:
    def invoke(live: Live, key: str, value: Any, also_bad: bool = False) -> Result:
        return _call(lambda: make(live, _with(base(live), key, value, bad if also_bad else None)))
    return invoke


def _kafka_utils() -> Any:
    from dstream_exactly_once import KafkaUtils

    return KafkaUtils


def _file_utils() -> Any:
    from dstream_exactly_once import FileUtils

    return FileUtils


def _file_stream(live: Live) -> Any:
    return _file_utils().createExactlyOnceFileStream(live.ssc, live.glob, store=live.url, app_id=live.app)


class _Sink:
    """A label-idempotent sink that is never run: the valid ``sink`` the ``rows`` cases go with."""

    def write_partition(self, store: Any, epoch: int, batch: Any, partition_id: int, rows: Any) -> None:
        return None

    def recover(self, store: Any, batch: Any) -> None:
        return None


def _output(method: str, base: Dict[str, Any]) -> Callable[..., Result]:
    def invoke(live: Live, key: str, value: Any, also_bad: bool = False) -> Result:
        return _call(lambda: getattr(_file_stream(live), method)(**_with(base, key, value, None)))
    return invoke


def _mapping(parse: Callable[[Live, Dict[str, Any]], Any], base: Callable[[Live], Dict[str, Any]],
             bad: Tuple[str, Any]) -> Callable[..., Result]:
    def invoke(live: Live, key: str, value: Any, also_bad: bool = False) -> Result:
        options = _with(base(live), key, value, bad if also_bad else None)
        return _call(lambda: parse(live, options))
    return invoke


def _store_sink(live: Live, o: Dict[str, Any]) -> Any:
    from dstream_exactly_once.structured._store_sink import StoreSinkOptions

    return StoreSinkOptions.parse(o)


def _doris_sink(live: Live, o: Dict[str, Any]) -> Any:
    from dstream_exactly_once.structured._doris_sink import DorisSinkOptions

    return DorisSinkOptions.parse(o)


def _kafka_sink(live: Live, o: Dict[str, Any]) -> Any:
    from dstream_exactly_once.kafka.structured._sink import KafkaSinkOptions

    return KafkaSinkOptions.parse(o)


def _delta_sink(live: Live, o: Dict[str, Any]) -> Any:
    from dstream_exactly_once.structured._delta_sink import DeltaSinkOptions

    return DeltaSinkOptions.parse(o)


def _builder(name: str) -> Callable[[Live, Dict[str, Any]], Any]:
    def make(live: Live, kw: Dict[str, Any]) -> Any:
        from dstream_exactly_once import structured

        return getattr(structured, name)(**kw)
    return make


def _spark_conf(live: Live, conf: Dict[str, Any]) -> Any:
    from dstream_exactly_once.kafka._params import parse_kafka_params
    from dstream_exactly_once.kafka.spark._direct import ReadOptions
    from dstream_exactly_once.streaming._backpressure import CATCH_UP, rate_controller_from_conf

    ReadOptions(conf, config=parse_kafka_params(KP))
    CATCH_UP.read(conf)
    return rate_controller_from_conf({"spark.streaming.backpressure.enabled": "true", **conf}, 1000)


def _aof(live: Live, o: Dict[str, Any]) -> Any:
    from dstream_exactly_once.files.structured._aof_options import parse_aof_options

    return parse_aof_options(o)


def _kafka_source(live: Live, o: Dict[str, Any]) -> Any:
    from dstream_exactly_once.kafka.structured._source_options import parse_kafka_source_options

    return parse_kafka_source_options(o)


def _url(scheme_url: Callable[[Live], str]) -> Callable[..., Result]:
    def invoke(live: Live, key: str, value: Any, also_bad: bool = False) -> Result:
        query = f"{key}={quote(str(value), safe='')}" + ("&timeout=never" if also_bad else "")
        fresh = _call(lambda: open_store(f"{scheme_url(live)}?{query}", live.app))
        return fresh
    return invoke


def _cli(words: Tuple[str, ...], base: Tuple[str, ...] = ()) -> Callable[..., Result]:
    def invoke(live: Live, key: str, value: Any, also_bad: bool = False) -> Result:
        from dstream_exactly_once.cli._main import main

        args = [a.replace("{url}", live.url).replace("{app}", live.app).replace("{root}", live.root) for a in base]
        if key in args:
            i = args.index(key)
            del args[i:i + 2]
        command = [w.replace("{root}", live.root) for w in words]
        argv = [*command, *args, key, str(value)] + (["--store-x", "1"] if also_bad else [])
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            error, message = _call(lambda: main(argv) == 2 and exit(2))
        return error, message + err.getvalue()
    return invoke


_STORE_APP = ("--store", "{url}", "--app", "{app}")

INVOKERS: Dict[str, Callable[..., Result]] = {
    "KafkaUtils.createDirectStream": _keywords(
        lambda live, kw: _kafka_utils().createDirectStream(**kw),
        lambda live: {"ssc": live.ssc, "topics": ["t"], "kafkaParams": KP}, ("discovery_interval_s", -1)),
    "KafkaUtils.createExactlyOnceStream": _keywords(
        lambda live, kw: _kafka_utils().createExactlyOnceStream(**kw),
        lambda live: {"ssc": live.ssc, "kafkaParams": KP, "topics": ["t"], "store": live.url, "app_id": live.app},
        ("retain_batches", 0)),
    "KafkaUtils.createRDD": _keywords(
        lambda live, kw: _kafka_utils().createRDD(**kw),
        lambda live: {"sc": live.sc, "kafkaParams": KP, "offsetRanges": [_range()]}, ("poll_timeout_ms", 0)),
    "FileUtils.createDirectFileStream": _keywords(
        lambda live, kw: _file_utils().createDirectFileStream(**kw),
        lambda live: {"ssc": live.ssc, "path": live.glob}, ("options", {"bytes.max": 0})),
    "FileUtils.createExactlyOnceFileStream": _keywords(
        lambda live, kw: _file_utils().createExactlyOnceFileStream(**kw),
        lambda live: {"ssc": live.ssc, "path": live.glob, "store": live.url, "app_id": live.app},
        ("retain_batches", 0)),
    "commit_each_batch": _output("commit_each_batch", {"func": lambda batch, rdd: None}),
    "commit_each_partition": _output("commit_each_partition", {"func": lambda records, r, batch: None}),
    "foreach_batch": _output("foreach_batch", {}),
    "write_each_partition": _output("write_each_partition", {"sink": _Sink()}),
    "file options": lambda live, key, value, also_bad=False: _call(
        lambda: _file_utils().createExactlyOnceFileStream(live.ssc, live.glob, {key: value}, store=live.url,
                                                          app_id=live.app)),
    "kafkaParams": _keywords(
        lambda live, kw: _kafka_utils().createExactlyOnceStream(live.ssc, {**KP, **kw}, ["t"], store=live.url,
                                                                app_id=live.app),
        lambda live: {}, ("fetch.max.wait.ms", -1)),
    "SparkConf": _mapping(_spark_conf, lambda live: {}, ("spark.streaming.kafka.maxRatePerPartition", -1)),
    "aof": _mapping(_aof, lambda live: {"path": live.glob, "starting.positions.store": live.url,
                                        "starting.positions.app": live.app}, ("bytes.max", 0)),
    "deo-kafka source": _mapping(_kafka_source, lambda live: {"kafka.bootstrap.servers": "127.0.0.1:9",
                                                               "subscribe": "t", "starting.positions.store": live.url,
                                                               "starting.positions.app": live.app},
                                 ("maxOffsetsPerTrigger", 0)),
    "deo-store": _mapping(_store_sink, lambda live: {"store": live.url, "app_id": live.app},
                          ("max_message_bytes", 0)),
    "deo-doris": _mapping(_doris_sink, lambda live: {"store": live.url, "app_id": live.app,
                                                     "fe": "http://127.0.0.1:9", "db": "d", "table": "t"},
                          ("strict_labels", "maybe")),
    "deo-kafka": _mapping(_kafka_sink, lambda live: {"store": live.url, "app_id": live.app, "topic": "out",
                                                     "kafka.bootstrap.servers": "127.0.0.1:9"},
                          ("on_replay_mismatch", "maybe")),
    "deo-delta": _mapping(_delta_sink, lambda live: {"store": live.url, "app_id": live.app,
                                                     "table": f"{live.root}/table"}, ("new_checkpoint", "maybe")),
    "store_sink_options": _keywords(_builder("store_sink_options"),
                                    lambda live: {"store": live.url, "app_id": live.app}, ("max_message_bytes", 0)),
    "doris_sink_options": _keywords(_builder("doris_sink_options"),
                                    lambda live: {"store": live.url, "app_id": live.app, "fe": "http://127.0.0.1:9",
                                                  "db": "d", "table": "t"}, ("strict_labels", "maybe")),
    "kafka_sink_options": _keywords(_builder("kafka_sink_options"),
                                    lambda live: {"store": live.url, "app_id": live.app, "topic": "out",
                                                  "kafka_params": KP}, ("on_replay_mismatch", "maybe")),
    "delta_sink_options": _keywords(_builder("delta_sink_options"),
                                    lambda live: {"store": live.url, "app_id": live.app,
                                                  "table_uri": f"{live.root}/table"}, ("new_checkpoint", "maybe")),
    "sqlite:// URL": _url(lambda live: live.fresh_url),
    "postgresql:// URL": _url(lambda live: live.server_url),
    "redis:// URL": _url(lambda live: live.server_url),
    "dstream-eo offsets show": _cli(("offsets", "show"), _STORE_APP),
    "dstream-eo offsets reset": _cli(("offsets", "reset"), (*_STORE_APP, "--to-earliest")),
    "dstream-eo offsets export": _cli(("offsets", "export"), _STORE_APP),
    "dstream-eo batches skip": _cli(("batches", "skip"), (*_STORE_APP, "--batch", "0")),
    "dstream-eo retire": _cli(("retire",), _STORE_APP),
    "dstream-eo lag": _cli(("lag",), ("--store", "{url}")),
    "dstream-eo demo": _cli(("demo",)),  # every flag is checked before anything starts
    "dstream-eo chart": _cli(("chart", "{root}/progress.jsonl"), ("--output", "{root}/chart.png")),
    "dstream-eo delta status": _cli(("delta", "status"), ("--table", "{root}/table")),
    "dstream-eo delta orphans": _cli(("delta", "orphans"), ("--table", "{root}/table")),
    "dstream-eo in-doubt": _cli(("in-doubt",), (*_STORE_APP, "--fe", "http://127.0.0.1:9", "--db", "d",
                                                "--table", "t")),
}


def _range() -> Any:
    from dstream_exactly_once import OffsetRange

    return OffsetRange("t", 0, 0, 1)


#: the server store an entry point's cases run against (a conftest fixture's name)
SERVER = {"postgresql:// URL": "postgres_url", "redis:// URL": "redis_url"}

#: generated cases that expose a defect fixed elsewhere: (entry, key, what) -> reason
_KNOWN: Dict[Tuple[str, str, str], str] = {}


def XFAIL(entry: str, key: str, what: str) -> Optional[str]:  # noqa: N802 - a table lookup, read like a constant
    """Why the case ``(entry, key, what)`` is expected to fail today, or ``None``."""
    return _KNOWN.get((entry, key, what))
