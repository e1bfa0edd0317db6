"""A poison record fails its batch every time; the operator skips the batch and the stream goes on.

Real Kafka, Spark and stores (SQLite and Redis): the user's output raises on a poison record, the
stream stops with an ``OutputError`` naming the batch and leaves it pending (a restart would replay
it and fail again). ``dstream-eo batches skip … --execute`` runs as a subprocess (refused while the
crashed driver's heartbeat is fresh, then forced); the restarted stream plans from the positions
after the skipped batch, and the results are exact: every record counted once, except the skipped
batch's records, which the incident record names by range.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from typing import Any, Dict, List, Optional

import pytest
from pyspark.streaming import StreamingContext

from dstream_exactly_once import KafkaUtils, OutputError
from dstream_exactly_once.stores import Writes, open_store
from dstream_exactly_once.stores._writes import RESERVED_NAMESPACE, incident_key

from ..helpers import eventually

POISON = "poison"


def _params(kafka: Any) -> Dict[str, str]:
    return {"bootstrap.servers": kafka.bootstrap, "auto.offset.reset": "earliest"}


def _stream(sc: Any, kafka: Any, topic: str, url: str, app: str) -> Any:
    ssc = StreamingContext(sc, 1)
    stream = KafkaUtils.createExactlyOnceStream(ssc, _params(kafka), [topic], store=url, app_id=app)

    def count(batch: Any, rdd: Any) -> Writes:
        values = rdd.map(lambda kv: kv[1]).collect()
        if POISON in values:
            raise ValueError(f"cannot parse {POISON!r}")  # a bug in user code, hit on every replay
        w = Writes()
        for v in values:
            w.incr("seen", v)
        return w

    stream.commit_each_batch(count)
    return ssc, stream


def _cli(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dstream_exactly_once", "batches", *argv], capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("kind", ["sqlite", "redis"])
def test_operator_skips_a_poison_batch_and_the_restarted_stream_is_exact(kind, kafka, topic_name, sc, tmp_path,
                                                                         redis_url):
    kafka.create_topic(topic_name, 2)
    url = f"sqlite:///{tmp_path}/poison.db" if kind == "sqlite" else redis_url
    app = "poison-" + uuid.uuid4().hex[:8]
    store = open_store(url, app)
    produced: List[str] = [str(i) for i in range(1, 41)]
    kafka.produce(topic_name, produced, partitions=2)

    # 1. the stream counts the good records, then a poison record fails its batch
    ssc, stream = _stream(sc, kafka, topic_name, url, app)
    ssc.start()
    failed: Optional[BaseException] = None
    try:
        eventually(lambda: len(store.get_values("seen")) == 40, "the first 40 records")
        tail = [POISON] + [str(i) for i in range(41, 51)]
        kafka.produce(topic_name, tail, partitions=2)
        produced += tail
        eventually(lambda: stream.committer.failed is not None, "the poison batch to fail")
        failed = stream.committer.failed
    finally:
        ssc.stop(stopSparkContext=False, stopGraceFully=False)
    assert isinstance(failed, OutputError) and "cannot parse 'poison'" in str(failed)
    poison_id = failed.batch
    pending = store.pending_batches()
    assert pending and pending[0].batch_id == poison_id and f"batch {poison_id}" in str(failed)
    poison_batch = pending[0]
    skipped_values = KafkaUtils.createRDD(sc, _params(kafka), list(poison_batch.ranges)).map(
        lambda kv: kv[1]).collect()
    assert POISON in skipped_values

    # 2. the operator: dry run, refused while the crashed driver's heartbeat is fresh, then forced
    epoch = store.current_epoch()
    dry = _cli("skip", "--store", url, "--app", app, "--batch", str(poison_id))
    assert dry.returncode == 0 and "DRY RUN" in dry.stdout, dry.stderr
    refused = _cli("skip", "--store", url, "--app", app, "--batch", str(poison_id), "--execute")
    assert refused.returncode == 3 and "driver is live" in refused.stderr, refused
    assert store.current_epoch() == epoch and not store.is_committed(poison_id)
    done = _cli("skip", "--store", url, "--app", app, "--batch", str(poison_id), "--execute", "--force",
                "--reason", "unparseable record", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["outcomes"] == {str(poison_id): "skipped"} and result["epoch"] == epoch + 1
    assert store.is_committed(poison_id)
    incident = store.get_values(RESERVED_NAMESPACE)[incident_key("skip", poison_id)]
    assert incident["reason"] == "unparseable record" and incident["epoch"] == epoch + 1
    assert {(r["key"], r["start"], r["end"]) for r in incident["ranges"]} == {
        (r.position_key, r.start, r.end) for r in poison_batch.ranges if r.count()}
    assert incident["positions"] == len(skipped_values)
    listing = _cli("--store", url, "--app", app, "--json")
    rows = {b["batch"]: b for b in json.loads(listing.stdout)["batches"]}
    assert rows[poison_id]["state"] == "SKIPPED" and rows[poison_id]["skipped"]["by"] == incident["by"]

    # 3. the restarted stream goes on after the skipped batch: exact except the skipped records
    more = [str(i) for i in range(51, 81)]
    kafka.produce(topic_name, more, partitions=2)
    produced += more
    expected = {v: 1 for v in produced if v not in set(skipped_values)}
    ssc2, _ = _stream(sc, kafka, topic_name, url, app)
    ssc2.start()
    try:
        eventually(lambda: store.get_values("seen") == expected, "every record after the skipped batch")
    finally:
        ssc2.stop(stopSparkContext=False, stopGraceFully=True)
    assert store.get_values("seen") == expected and store.pending_batches() == []
    after = store.get_batch(poison_id + 1)
    ends = {r.position_key: r.end for r in poison_batch.ranges}
    assert after is not None and all(r.start == ends[r.position_key] for r in after.ranges if r.position_key in ends)
    store.close()
