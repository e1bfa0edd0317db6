"""Spark's Streaming tab counts the records of the direct and the exactly-once streams and shows their
ranges (REST API + batch page); the exactly-once streams' store holds every value once."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from dstream_exactly_once import open_store
from dstream_exactly_once.testing._process import free_port

pytestmark = pytest.mark.integration

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run_driver(tmp_path, *args):
    out = tmp_path / "tab.json"
    port = str(free_port())
    proc = subprocess.run([sys.executable, "-m", "tests.integration.streaming_tab_driver", *args, port, str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(out.read_text(encoding="utf-8"))
    # the batch page renders the description's tabs as four &nbsp; and its lines with <br/>
    got["pages"] = {k: page.replace("&nbsp;" * 4, "\t").replace("<br/>", "\n") for k, page in got["pages"].items()}
    return got


def _store_args(tmp_path, exactly_once):
    return [f"sqlite:///{tmp_path}/tab.db"] if exactly_once else []


def _check_store(tmp_path, exactly_once, records, total):
    """The exactly-once stream committed every record once, and every batch it logged."""
    if not exactly_once:
        return
    with open_store(f"sqlite:///{tmp_path}/tab.db", "tab") as store:
        assert store.get_values("counts") == {"records": records, "sum": total}
        assert store.last_committed_batch_id() is not None


MODES = pytest.mark.parametrize("exactly_once", [False, True], ids=["direct", "exactly_once"])


@MODES
def test_kafka_batches_report_records_and_offset_ranges(kafka, topic_name, tmp_path, exactly_once):
    kafka.create_topic(topic_name, 3)
    kafka.produce(topic_name, range(300), partitions=3)
    mode = "eo-kafka" if exactly_once else "kafka"
    got = _run_driver(tmp_path, mode, kafka.bootstrap, topic_name, "300", *_store_args(tmp_path, exactly_once))
    batches = got["batches"]
    assert sum(b["inputSize"] for b in batches) == 300 == got["seen"]
    # maxRatePerPartition 50 over 3 partitions and 1 s batches: at most 150 records a batch
    assert sorted(b["inputSize"] for b in batches if b["inputSize"])[-1] == 150
    assert got["statistics"]["avgInputRate"] > 0
    pages = got["pages"]
    assert pages
    for page in pages.values():
        for p in range(3):
            assert f"topic: {topic_name}\tpartition: {p}\toffsets: " in page
    first = pages[str(min(int(k) for k in pages))]
    assert "partition: 0\toffsets: 0 to 50" in first
    _check_store(tmp_path, exactly_once, 300, sum(range(300)))


@MODES
def test_file_batches_report_bytes_and_byte_ranges(tmp_path, exactly_once):
    logs = tmp_path / "logs"
    logs.mkdir()
    total = 0
    for name, numbers in (("a.log", range(0, 100)), ("b.log", range(100, 130))):
        text = "".join(f"{n}\n" for n in numbers)
        (logs / name).write_text(text, encoding="utf-8")
        total += len(text.encode())
    mode = "eo-files" if exactly_once else "files"
    got = _run_driver(tmp_path, mode, f"{logs}/*.log", str(total), *_store_args(tmp_path, exactly_once))
    batches = got["batches"]
    assert sum(b["inputSize"] for b in batches) == total
    assert got["seen"] == 130
    pages = got["pages"]
    assert pages
    joined = "\n".join(pages.values())
    assert "records counted in bytes" in joined
    assert f"file: {logs}/a.log" in joined and f"file: {logs}/b.log" in joined
    assert "bytes: 0 to " in joined
    _check_store(tmp_path, exactly_once, 130, sum(range(130)))
