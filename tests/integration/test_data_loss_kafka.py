"""Kafka's data-loss policy (``failOnDataLoss``) on a real broker, real Spark and a real store.

Records are deleted with the broker's DeleteRecords (what retention does) at the two points where
a planned range can lose its data:

- between the offset log and a replay: a driver planned and logged batch 1 (``[50, 100)``) and was
  SIGKILLed before reading it; offsets below 80 are deleted; the next driver replays batch 1;
- between planning and the first read, in a running driver.

``failOnDataLoss=True`` ends in one ``DataLossError`` naming the batch, the range and the skip
command (at the replaying driver's start, before it writes anything); ``False`` ends exact: the
records still there are committed once, the lost offsets are recorded beside the commit and
counted in the progress record.
"""

from __future__ import annotations

import logging
import uuid

import pytest
from pyspark.streaming import StreamingContext

from dstream_exactly_once import DataLossError, KafkaUtils, Writes, open_store

from .faults import kill_group
from .test_data_loss_files import _losses, _spawn, _values, eventually
from .test_file_faults import _lines, _wait_for


def _params(kafka):
    return {"bootstrap.servers": kafka.bootstrap, "auto.offset.reset": "earliest"}


def _sum_count(batch, rdd):
    total, count = rdd.map(lambda kv: (int(kv[1]), 1)).fold((0, 0), lambda a, b: (a[0] + b[0], a[1] + b[1]))
    return Writes().incr("numbers", "sum", total).incr("numbers", "count", count)


def _check_loss(url, app, topic, start, until, lost_until):
    (key, doc), = _losses(url, app).items()
    assert doc["key"] == f"{topic}/0" and doc["where"] == f"{topic}-0" and doc["unit"] == "offsets"
    assert doc["range"] == [start, until] and doc["lost"] == lost_until - start
    assert [p[:2] for p in doc["parts"]] == [[start, lost_until]] and "log start" in doc["parts"][0][2]
    assert key == f"loss:{doc['batch']:020d}:{topic}/0"
    return doc


@pytest.mark.parametrize("fail", [True, False], ids=["failOnDataLoss", "skip"])
def test_records_deleted_between_the_offset_log_and_a_replay(fail, kafka, topic_name, sc, tmp_path, caplog):
    kafka.create_topic(topic_name, 1)
    kafka.produce(topic_name, range(100), partition=0)
    url, app = f"sqlite:///{tmp_path}/loss.db", f"loss-{uuid.uuid4().hex[:8]}"
    stderr = str(tmp_path / "driver.err")
    driver = _spawn("kafka", kafka.bootstrap, topic_name, url, app, "50", "100", stderr_path=stderr)
    try:
        lines = _lines(driver)
        _wait_for(lines, "STARTED", 120)
        planned = _wait_for(lines, "PLANNED", 90)
        eventually(lambda: _values(url, app).get("count", 0) >= 50, what="batch 0")
    except AssertionError as exc:
        with open(stderr, errors="replace") as f:
            raise AssertionError(f"{exc}\ndriver's stderr (tail):\n{f.read()[-3000:]}") from None
    finally:
        kill_group(driver)
    n = int(planned.split()[1])
    assert _values(url, app) == {"count": 50, "sum": sum(range(50))}
    kafka.delete_records(topic_name, {0: 80})  # retention, while no driver runs
    kafka.produce(topic_name, range(100, 110), partition=0)
    with open_store(url, app) as store:
        pending = [(b.batch_id, [(r.start, r.end) for r in b.ranges]) for b in store.pending_batches()]
        assert pending == [(n, [(50, 100)])]
        epoch = store.current_epoch()
    ssc = StreamingContext(sc, 1)
    if fail:
        with pytest.raises(DataLossError) as info:
            KafkaUtils.createExactlyOnceStream(ssc, _params(kafka), [topic_name], store=url, app_id=app,
                                               failOnDataLoss=True)
        text = str(info.value)
        assert f"batch {n} cannot be read" in text and "[50, 80)" in text and f"{topic_name}-0" in text
        assert f"dstream-eo batches skip --store {url} --app {app} --batch {n} --execute" in text
        assert "failOnDataLoss=False" in text
        with open_store(url, app) as store:  # refused before the epoch: nothing written, nobody fenced
            assert store.current_epoch() == epoch and [b.batch_id for b in store.pending_batches()] == [n]
        assert _losses(url, app) == {}
        return
    caplog.set_level(logging.INFO)
    stream = KafkaUtils.createExactlyOnceStream(ssc, _params(kafka), [topic_name], store=url, app_id=app,
                                                failOnDataLoss=False)
    stream.commit_each_batch(_sum_count)
    ssc.start()
    try:
        eventually(lambda: _values(url, app).get("count", 0) >= 80, what="the records still there")
        progress = eventually(lambda: [p for p in stream.recentProgress if p["dataLoss"]], what="the loss's progress")
    finally:
        ssc.stop(stopSparkContext=False, stopGraceFully=False)
    assert _values(url, app) == {"count": 80, "sum": sum(range(50)) + sum(range(80, 110))}
    doc = _check_loss(url, app, topic_name, 50, 100, 80)
    assert doc["batch"] == n
    (record,) = progress
    assert record["batchId"] == n and record["replayedBatch"] and record["numDataLossSkippedOffsets"] == 30
    assert record["numInputRows"] == 20 and record["dataLoss"][0]["lost"] == 30
    warned = [r for r in caplog.records if r.levelno == logging.WARNING and "data loss in batch" in r.getMessage()]
    assert len(warned) == 1 and "[50, 80)" in warned[0].getMessage()
    assert stream.committer.failed is None


@pytest.mark.parametrize("fail", [True, False], ids=["failOnDataLoss", "skip"])
@pytest.mark.parametrize("output", ["batch", "partition"])
def test_records_deleted_between_planning_and_the_first_read(fail, output, kafka, topic_name, sc, tmp_path):
    kafka.create_topic(topic_name, 1)
    kafka.produce(topic_name, range(40), partition=0)
    url, app = f"sqlite:///{tmp_path}/loss.db", f"loss-{uuid.uuid4().hex[:8]}"
    bootstrap = kafka.bootstrap

    def delete_once(ranges):  # retention strikes after the batch was planned, before it is read
        if any(r.start == 0 for r in ranges):
            from kafka import KafkaAdminClient, TopicPartition

            client = KafkaAdminClient(bootstrap_servers=bootstrap)
            try:
                client.delete_records({TopicPartition(topic_name, 0): 25})
            finally:
                client.close()

    ssc = StreamingContext(sc, 1)
    stream = KafkaUtils.createExactlyOnceStream(ssc, _params(kafka), [topic_name], store=url, app_id=app,
                                                failOnDataLoss=fail)
    if output == "batch":
        def per_batch(batch, rdd):
            delete_once(batch.ranges)
            return _sum_count(batch, rdd)

        stream.commit_each_batch(per_batch)
    else:
        def per_partition(records, r, batch):
            delete_once(r if isinstance(r, tuple) else [r])  # a packed task's ranges
            values = [int(v) for _, v in records]
            return Writes().incr("numbers", "sum", sum(values)).incr("numbers", "count", len(values))

        stream.commit_each_partition(per_partition)
    ssc.start()
    try:
        if fail:
            failed = eventually(lambda: stream.committer.failed, what="the stream's failure")
        else:
            eventually(lambda: _values(url, app).get("count", 0) >= 15, what="the records still there")
            progress = eventually(lambda: [p for p in stream.recentProgress if p["dataLoss"]], what="the progress")
    finally:
        ssc.stop(stopSparkContext=False, stopGraceFully=False)
    if fail:
        assert isinstance(failed, DataLossError)
        text = str(failed)
        assert "batch 0 cannot be read" in text and "[0, 25)" in text and f"{topic_name}-0" in text
        assert f"dstream-eo batches skip --store {url} --app {app} --batch 0 --execute" in text
        assert _values(url, app) == {} and _losses(url, app) == {}
        return
    assert _values(url, app) == {"count": 15, "sum": sum(range(25, 40))}
    _check_loss(url, app, topic_name, 0, 40, 25)
    assert progress[0]["numDataLossSkippedOffsets"] == 25 and progress[0]["numInputRows"] == 15
