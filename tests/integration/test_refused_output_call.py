"""An output call refused after the stream was built writes nothing and fences no running driver.

``createExactlyOnceStream`` / ``createExactlyOnceFileStream`` only read the store; the epoch is taken
when the StreamingContext starts. So a bad argument to the output call that follows
(``commit_each_partition(f, pack="yes")``, ``commit_each_batch(f, offset_log="later")``, …) leaves
a running driver's epoch where it was, a fresh SQLite path without a file, and the store's bytes
unchanged; a good launch still fences the running driver when its context starts. Real Spark
(local mode), real SQLite, PostgreSQL and Redis; Kafka for the Kafka factory.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any, Callable, List, Tuple

import pytest
from pyspark.streaming import StreamingContext

from dstream_exactly_once import ConfigurationError, FencedError, FileUtils, KafkaUtils
from dstream_exactly_once.stores import PlannedBatch, Writes, open_store

from .streams import run_until


def _sum(batch, rdd):
    return Writes().incr("n", "count", rdd.count())


def _per_partition(records, r, batch):
    return Writes().incr("n", "count", sum(1 for _ in records))


class _Sink:
    def write_partition(self, store, epoch, batch, partition_id, rows):
        return None

    def recover(self, store, batch):
        return None


class _RefusingSink(_Sink):
    """A sink whose service refuses its settings (as KafkaTransactionalSink.check() does for a
    transaction timeout above the broker's cap)."""

    def check(self):
        raise ConfigurationError("transaction_timeout_ms=3600000 is above the broker's cap")


def bad_output_calls() -> List[Tuple[str, Callable[[Any], None], str]]:
    """(what, a refused output call on a stream, a word its error must contain)."""
    def in_commit_then_second(stream: Any) -> None:
        stream.commit_each_batch(_sum, offset_log="in_commit")
        stream.commit_each_partition(_per_partition)

    return [
        ("commit_each_partition pack='yes'", lambda s: s.commit_each_partition(_per_partition, pack="yes"), "pack"),
        ("commit_each_partition not a function", lambda s: s.commit_each_partition("f"), "commit_each_partition"),
        ("commit_each_batch offset_log='later'", lambda s: s.commit_each_batch(_sum, offset_log="later"),
         "offset_log"),
        ("commit_each_batch not a function", lambda s: s.commit_each_batch(None), "commit_each_batch"),
        ("foreach_batch not a sink", lambda s: s.foreach_batch(42), "foreach_batch"),
        ("write_each_partition not a sink", lambda s: s.write_each_partition(object()), "write_each_partition"),
        ("write_each_partition rows=5", lambda s: s.write_each_partition(_Sink(), rows=5), "rows"),
        ("write_each_partition, the sink's check() refuses", lambda s: s.write_each_partition(_RefusingSink()),
         "transaction_timeout_ms"),
        ("a second output after offset_log='in_commit'", in_commit_then_second, "in_commit"),
    ]


def _store_url(kind: str, tmp_path: Path, postgres_server: Any, redis_server: Any) -> str:
    if kind == "sqlite":
        return f"sqlite:///{tmp_path}/state-{uuid.uuid4().hex[:6]}.db"
    if kind == "postgres":
        return postgres_server.url(postgres_server.create_database())
    return redis_server.url


def _file_stream(ssc: StreamingContext, logs: Path, url: str, app: str) -> Any:
    return FileUtils.createExactlyOnceFileStream(ssc, f"{logs}/*.log", {"starting.offsets": "earliest"},
                                                 store=url, app_id=app)


@pytest.mark.parametrize("kind", ["sqlite", "postgres", "redis"])
def test_refused_output_calls_do_not_move_a_live_drivers_epoch(kind, sc, tmp_path, postgres_server, redis_server):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "a.log").write_text("".join(f"{i}\n" for i in range(1, 11)))
    url = _store_url(kind, tmp_path, postgres_server, redis_server)
    app = "live-" + uuid.uuid4().hex[:8]
    with open_store(url, app) as live:  # the running driver: a store session holding the newest epoch
        epoch = live.start_epoch()
        refused = StreamingContext(sc, 1)  # the refused launches' context is never started
        try:
            for what, call, word in bad_output_calls():
                stream = _file_stream(refused, logs, url, app)
                with pytest.raises(ConfigurationError) as info:
                    call(stream)
                assert word in str(info.value), f"{what}: {info.value}"
                assert live.current_epoch() == epoch, f"{what}: the refused output call moved the epoch"
                assert not stream.committer.started
        finally:
            refused.stop(stopSparkContext=False, stopGraceFully=False)
        assert live.current_epoch() == epoch, "stopping the refused launches' context moved the epoch"
        # a good launch takes the epoch when its context starts, and so fences the running driver
        ssc = StreamingContext(sc, 1)
        good = _file_stream(ssc, logs, url, app)
        good.commit_each_batch(_sum)
        assert live.current_epoch() == epoch, "building a good stream took the epoch before ssc.start()"
        run_until(ssc, lambda: (live.get_value("n", "count") or 0) == 10)
        assert good.epoch > epoch and live.current_epoch() == good.epoch
        with pytest.raises(FencedError):
            live.commit(epoch, PlannedBatch(99, 3000, ()), Writes().incr("n", "count", 1))


def _files(directory: Path) -> List[str]:
    return sorted(p.name for p in directory.iterdir())


def test_refused_output_calls_create_no_sqlite_file(sc, tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "a.log").write_text("1\n2\n")
    state = tmp_path / "state"
    state.mkdir()
    url = f"sqlite:///{state}/fresh.db"
    ssc = StreamingContext(sc, 1)
    try:
        for what, call, word in bad_output_calls():
            stream = _file_stream(ssc, logs, url, "fresh")
            with pytest.raises(ConfigurationError, match=word):
                call(stream)
            assert _files(state) == [], f"{what}: the refused launch created {_files(state)}"
    finally:
        ssc.stop(stopSparkContext=False, stopGraceFully=False)
    assert _files(state) == [], "stopping a context whose streams were refused wrote the store"


def test_refused_output_calls_on_the_kafka_stream(kafka, topic_name, sc, tmp_path):
    kafka.create_topic(topic_name, 2)
    kafka.produce(topic_name, [str(i) for i in range(1, 21)], partitions=2)
    db = tmp_path / "kafka.db"
    url = f"sqlite:///{db}"
    params = {"bootstrap.servers": kafka.bootstrap, "auto.offset.reset": "earliest"}
    ssc = StreamingContext(sc, 1)
    try:
        for what, call, word in bad_output_calls():
            stream = KafkaUtils.createExactlyOnceStream(ssc, params, [topic_name], store=url, app_id="k")
            with pytest.raises(ConfigurationError, match=word):
                call(stream)
            assert not db.exists(), f"{what}: the refused launch created the SQLite file"
        with open_store(url, "k") as live:
            epoch = live.start_epoch()
            for what, call, _word in bad_output_calls():
                stream = KafkaUtils.createExactlyOnceStream(ssc, params, [topic_name], store=url, app_id="k")
                with pytest.raises(ConfigurationError):
                    call(stream)
                assert live.current_epoch() == epoch, f"{what}: the refused output call moved the epoch"
    finally:
        ssc.stop(stopSparkContext=False, stopGraceFully=False)
