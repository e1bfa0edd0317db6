"""``stream.data_loss()``: one shape of the data a stream skipped as lost, on a Kafka and a file stream."""

from __future__ import annotations

import os
import threading

import pytest
from pyspark.streaming import StreamingContext

from dstream_exactly_once import FileUtils, KafkaUtils
from dstream_exactly_once.core._loss_totals import DataLossTotals

from .streams import run_until

pytestmark = pytest.mark.integration


def test_kafka_direct_stream_counts_offsets_deleted_before_they_were_read(kafka, topic_name, sc):
    kafka.create_topic(topic_name, 1)
    kafka.produce(topic_name, range(50), partition=0)
    ssc = StreamingContext(sc, 1)
    stream = KafkaUtils.createDirectStream(ssc, [topic_name], {"bootstrap.servers": kafka.bootstrap,
                                                               "auto.offset.reset": "smallest"},
                                           failOnDataLoss=False)
    assert stream.data_loss() == DataLossTotals("offsets", 0, 0)
    kafka.delete_records(topic_name, {0: 20})  # the first batch is planned from 0
    seen, lock = [], threading.Lock()

    def keep(rdd):
        got = [int(v) for _, v in rdd.collect()]
        with lock:
            seen.extend(got)

    stream.foreachRDD(keep)
    run_until(ssc, lambda: len(seen) >= 30 and stream.data_loss().total >= 20)
    assert sorted(seen) == list(range(20, 50))
    assert stream.data_loss() == DataLossTotals("offsets", planned=0, read=20)


def test_file_direct_stream_counts_bytes_of_a_file_deleted_before_they_were_read(sc, tmp_path):
    log = tmp_path / "a.log"
    log.write_text("".join(f"{n}\n" for n in range(100)), encoding="utf-8")
    size = log.stat().st_size
    ssc = StreamingContext(sc, 1)
    stream = FileUtils.createDirectFileStream(ssc, f"{tmp_path}/*.log", {"bytes.max": 100,
                                                                         "fail.on.data.loss": "false"})
    assert stream.data_loss() == DataLossTotals("bytes", 0, 0)
    read, lock = [], threading.Lock()

    def keep(rdd):
        got = rdd.collect()
        with lock:
            read.extend(got)
            if got and log.exists():
                os.remove(log)  # the rest of the file is gone before it is read

    def done():
        with lock:
            consumed = sum(len(line) + 1 for line in read)
        return consumed > 0 and consumed + stream.data_loss().total == size

    stream.foreachRDD(keep)
    run_until(ssc, done)
    totals = stream.data_loss()
    consumed = sum(len(line) + 1 for line in read)
    assert totals.unit == "bytes" and totals.total == size - consumed > 0
    assert totals.to_json() == {"unit": "bytes", "planned": totals.planned, "read": totals.read,
                                "total": size - consumed}
