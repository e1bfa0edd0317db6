"""Store-anchored positions with the ``aof`` source on real Spark (local mode): an ``aof`` → ``deo-store``
query whose sink keeps the file positions in the store (``anchor=True``) and whose source starts from
them (``starting.positions.*``) reads every line exactly once when restarted on a deleted checkpoint,
across a rotation."""

from __future__ import annotations

import os
import shutil

import pytest
from pyspark.sql import SparkSession

from dstream_exactly_once.stores import open_store
from dstream_exactly_once.structured import register, store_sink_options

from .test_structured_aof import ATTEMPTS, WORKER_TIMEOUT, _append

pytestmark = pytest.mark.integration


def _run(spark, logs, checkpoint, url, app):
    """One Trigger.AvailableNow run of aof → deo-store (anchored) on ``checkpoint``."""
    for _ in range(ATTEMPTS):
        rows = (spark.readStream.format("aof").option("path", f"{logs}/service.log*").option("bytes.max", 400)
                .option("starting.positions.store", url).option("starting.positions.app", app).load()
                .selectExpr("'seen' AS namespace", "value AS key", "'incr' AS op", "CAST(1 AS BIGINT) AS value"))
        q = (rows.writeStream.format("deo-store").options(**store_sink_options(url, app, anchor=True))
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
        try:
            q.awaitTermination(180)
        except Exception as exc:  # noqa: BLE001 - checked below
            if WORKER_TIMEOUT in str(exc):
                continue
            raise
        assert q.exception() is None, q.exception()
        return
    raise AssertionError(f"the aof query did not start {ATTEMPTS} times ({WORKER_TIMEOUT})")


def test_aof_query_on_a_deleted_checkpoint_resumes_where_the_output_stopped(sc, tmp_path):
    spark = SparkSession(sc)
    register(spark)
    logs = tmp_path / "logs"
    logs.mkdir()
    live = logs / "service.log"
    url, app = f"sqlite:///{tmp_path}/store.db", "aof-anchored"
    _append(live, range(0, 200))
    _run(spark, logs, tmp_path / "ck", url, app)
    with open_store(url, app) as s:
        assert sorted(map(int, s.get_values("seen"))) == list(range(200))
        assert [k for k in s.load_positions() if k.startswith("file:")]  # the store's ordinary file positions
    shutil.rmtree(tmp_path / "ck")
    _append(live, range(200, 250))
    os.rename(live, f"{live}.1")  # rotated while no query runs
    _append(live, range(250, 300))
    _run(spark, logs, tmp_path / "ck2", url, app)
    with open_store(url, app) as s:
        seen = s.get_values("seen")
    assert sorted(map(int, seen)) == list(range(300))
    assert set(seen.values()) == {1}, {k: v for k, v in seen.items() if v != 1}
