"""The ``deo-store`` sink's store-anchored commit on every store backend (SQLite, PostgreSQL, Redis):
the source's offsets under the ordinary Kafka position keys in the batch's transaction, Spark's replay
skipped, a new checkpoint continuing the application, a replaced run fenced and a batch that does not
start at the stored positions refused with nothing written. Spark's offset log is written here as Spark
writes it (the Spark query itself: test_structured_anchored.py)."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from dstream_exactly_once.errors import FencedError, OffsetConflictError
from dstream_exactly_once.stores import open_store
from dstream_exactly_once.stores._writes import CommitOutcome, Writes
from dstream_exactly_once.structured._sink_runs import QueryRun
from dstream_exactly_once.structured._store_sink import StoreSinkOptions, commit_batch, store_sink_options

pytestmark = [pytest.mark.integration]


@pytest.fixture(params=["sqlite", "postgresql", "redis"])
def store_url(request: Any, tmp_path: Any) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/s.db"
    return str(request.getfixturevalue(f"{request.param.replace('postgresql', 'postgres')}_url"))


def log_offsets(checkpoint: str, batch_id: int, doc: Any) -> None:
    os.makedirs(os.path.join(checkpoint, "offsets"), exist_ok=True)
    with open(os.path.join(checkpoint, "offsets", str(batch_id)), "w") as f:
        f.write('v1\n{"batchWatermarkMs":0,"batchTimestampMs":0,"conf":{}}\n' + json.dumps(doc))


def test_anchored_commits_on_every_store(store_url: str, app_id: str, tmp_path: Any) -> None:
    cp1, cp2, cp3 = (str(tmp_path / n) for n in ("cp1", "cp2", "cp3"))

    def opts(cp: str) -> StoreSinkOptions:
        return StoreSinkOptions.parse({**store_sink_options(store_url, app_id, anchor=True), "checkpointLocation": cp})

    one = Writes().incr("n", "k", 1)
    log_offsets(cp1, 0, {"t": {"0": 3, "1": 2}, "@from": {"t": {"0": 0, "1": 0}}})
    log_offsets(cp1, 1, {"t": {"0": 5, "1": 2}})
    q1, q2 = QueryRun("q1", "r1"), QueryRun("q2", "r2")
    assert commit_batch(opts(cp1), [one], 0, q1) is CommitOutcome.APPLIED
    assert commit_batch(opts(cp1), [one], 1, q1) is CommitOutcome.APPLIED
    assert commit_batch(opts(cp1), [one], 1, q1) is CommitOutcome.REPLAYED
    log_offsets(cp2, 0, {"t": {"0": 8, "1": 4}, "@from": {"t": {"0": 5, "1": 2}}})
    assert commit_batch(opts(cp2), [one], 0, q2) is CommitOutcome.APPLIED
    with pytest.raises(FencedError):
        commit_batch(opts(cp1), [one], 2, q1)
    log_offsets(cp3, 0, {"t": {"0": 9, "1": 4}, "@from": {"t": {"0": 0, "1": 0}}})
    with pytest.raises(OffsetConflictError, match="does not start where"):
        commit_batch(opts(cp3), [one], 0, QueryRun("q3", "r3"))
    with open_store(store_url, app_id) as s:
        assert s.get_value("n", "k") == 3
        assert {k: p.offset for k, p in s.load_positions().items()} == {"t/0": 8, "t/1": 4}
        assert s.last_committed_batch_id() == 2
        assert [r.toTuple() for r in s.get_batch(2).ranges] == [("t", 0, 5, 8), ("t", 1, 2, 4)]
