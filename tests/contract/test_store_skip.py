"""``skip_batch`` (``dstream-eo batches skip``) on every store backend (real servers).

A dry run and every refusal leave the store byte-for-byte as it was (SQLite: the file bytes;
PostgreSQL: every row of every ``deo_`` table; Redis: every key of the app, serialized) and take no
epoch; executing takes one epoch, moves the positions past the skipped ranges, writes the commit-log
entry and the ``skip`` incident record in one transaction, and fences the driver that was running.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, Tuple

import pytest

from dstream_exactly_once import (
    ConfigurationError,
    DriverLiveError,
    FencedError,
    OffsetConflictError,
    SkipPlan,
    skip_batch,
)
from dstream_exactly_once.cli import main
from dstream_exactly_once.files._ranges import FileRange
from dstream_exactly_once.kafka._offsets import OffsetRange
from dstream_exactly_once.stores import CommitOutcome, PlannedBatch, Writes, open_store
from dstream_exactly_once.stores._writes import RESERVED_NAMESPACE, incident_key

from ..conftest import raw_redis_client

B0 = PlannedBatch(0, 1000, (OffsetRange("t", 0, 0, 10), OffsetRange("t", 1, 0, 5)))
B1 = PlannedBatch(1, 2000, (OffsetRange("t", 0, 10, 20), OffsetRange("t", 1, 5, 8)))
B2 = PlannedBatch(2, 3000, (OffsetRange("t", 0, 20, 25), OffsetRange("t", 1, 8, 8)))


def _sqlite_snapshot(path: Path) -> Dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(path.parent.glob(path.name + "*")) if not p.name.endswith("-shm")}


def _postgres_snapshot(url: str) -> Dict[str, Any]:
    import psycopg

    with psycopg.connect(url) as conn:
        tables = [r[0] for r in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() "
            "AND table_name LIKE 'deo\\_%' ORDER BY table_name")]
        return {t: sorted(conn.execute(f'SELECT * FROM "{t}"').fetchall(), key=repr) for t in tables}


def _redis_snapshot(url: str, app: str) -> Dict[bytes, Tuple[bytes, int]]:
    client = raw_redis_client(url)
    try:
        return {k: (client.dump(k), client.pttl(k)) for k in sorted(client.scan_iter(match="{deo:" + app + "}*"))}
    finally:
        client.close()


class SkipContract:
    @pytest.fixture
    def backend(self) -> Tuple[str, Callable[[], Any]]:
        """(store URL, snapshot of everything the app has in the store)."""
        raise NotImplementedError

    @pytest.fixture
    def url(self, backend: Tuple[str, Callable[[], Any]]) -> str:
        return backend[0]

    @pytest.fixture
    def snap(self, backend: Tuple[str, Callable[[], Any]]) -> Callable[[], Any]:
        return backend[1]

    @pytest.fixture
    def store(self, url: str, app_id: str) -> Iterator[Any]:
        """Batch 0 committed, batches 1 and 2 logged and pending (the driver that logged them crashed)."""
        s = open_store(url, app_id)
        epoch = s.start_epoch()
        s.log_batch(epoch, B0)
        s.commit(epoch, B0, Writes().incr("n", "records", 15))
        s.log_batch(epoch, B1)
        s.log_batch(epoch, B2)
        yield s
        s.close()

    def test_dry_run_writes_nothing_and_shows_the_positions(self, store: Any, url: str, app_id: str,
                                                            snap: Callable[[], Any]) -> None:
        before = snap()
        plan = skip_batch(url, app_id, 1, reason="poison record")
        assert isinstance(plan, SkipPlan) and not plan.executed and plan.epoch is None
        assert plan.batch_ids == [1] and plan.pending == (1, 2)
        assert [(r["key"], r["before"], r["after"], r["state"]) for r in plan.rows] == [
            ("t/0", 10, 20, "skip"), ("t/1", 5, 8, "skip")]
        assert plan.incidents[1]["reason"] == "poison record" and plan.incidents[1]["positions"] == 13
        assert snap() == before and store.current_epoch() == 1

    def test_refusals_write_nothing_and_take_no_epoch(self, store: Any, url: str, app_id: str,
                                                      snap: Callable[[], Any]) -> None:
        store.heartbeat(1, {"epoch": 1, "host": "h", "pid": 7, "time": time.time(), "interval_s": 1.0})
        before = snap()
        with pytest.raises(ConfigurationError, match=r"batch 0 is already committed.*pending batches .*\[1, 2\]"):
            skip_batch(url, app_id, 0, execute=True, force=True)
        with pytest.raises(ConfigurationError, match=r"batch 9 is not in the offset log.*\[1, 2\]"):
            skip_batch(url, app_id, 9, execute=True, force=True)
        with pytest.raises(ConfigurationError, match=r"pending batch\(es\) \[1\] are older.*--batch 1 --batch 2"):
            skip_batch(url, app_id, 2, execute=True, force=True)
        with pytest.raises(DriverLiveError, match=r"driver is live \(host h, pid 7, epoch 1"):
            skip_batch(url, app_id, 1, execute=True)
        with pytest.raises(ConfigurationError, match="batch_id"):
            skip_batch(url, app_id, [1, 1], execute=True, force=True)
        with pytest.raises(ConfigurationError, match="reason"):
            skip_batch(url, app_id, 1, execute=True, force=True, reason=" ")
        assert snap() == before and store.current_epoch() == 1

    def test_moved_positions_are_refused_before_the_epoch(self, store: Any, url: str, app_id: str,
                                                          snap: Callable[[], Any]) -> None:
        epoch = store.start_epoch()
        store.reset_positions(epoch, {"t/0": 12})
        before = snap()
        with pytest.raises(OffsetConflictError, match=r"batch 1: .*stored position 12, neither its start 10 nor its "
                                                      r"end 20"):
            skip_batch(url, app_id, 1, execute=True, force=True)
        assert snap() == before and store.current_epoch() == epoch

    def test_execute_moves_positions_commits_records_the_incident_and_fences(
            self, store: Any, url: str, app_id: str, caplog: pytest.LogCaptureFixture) -> None:
        old_epoch = store.current_epoch()
        with caplog.at_level("WARNING", logger="dstream_exactly_once.admin._skip"):
            plan = skip_batch(url, app_id, 1, execute=True, reason="decode error at t/0@14")
        warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
        assert len(warned) == 1 and "skipped batch 1" in warned[0] and "t-0 [10 -> 20)" in warned[0]
        assert plan.executed and plan.epoch == old_epoch + 1 == store.current_epoch()
        assert plan.outcomes == {1: "skipped"}
        assert {k: p.offset for k, p in store.load_positions().items()} == {"t/0": 20, "t/1": 8}
        assert store.is_committed(1) and [b.batch_id for b in store.pending_batches()] == [2]
        assert store.get_values("n") == {"records": 15}  # nothing of batch 1 was counted
        doc = store.get_values(RESERVED_NAMESPACE)[incident_key("skip", 1)]
        assert doc == plan.incidents[1]
        assert doc["epoch"] == plan.epoch and doc["reason"] == "decode error at t/0@14" and "@" in doc["by"]
        assert doc["at"].endswith("Z") and doc["positions"] == 13 and doc["committed_ranges"] == []
        assert [(r["key"], r["start"], r["end"]) for r in doc["ranges"]] == [("t/0", 10, 20), ("t/1", 5, 8)]
        # the driver that logged the batches is fenced: its commits are refused and write nothing
        with pytest.raises(FencedError, match="fenced"):
            store.commit(old_epoch, B2, Writes().incr("n", "records", 5))
        with pytest.raises(FencedError, match="fenced"):
            store.commit(old_epoch, B1, Writes().incr("n", "records", 13))
        assert store.get_values("n") == {"records": 15} and not store.is_committed(2)
        # a new driver replays batch 2 from the positions after the skipped batch: exact
        epoch = store.start_epoch()
        assert store.commit(epoch, B2, Writes().incr("n", "records", 5)) is CommitOutcome.APPLIED
        assert store.get_values("n") == {"records": 20} and store.load_positions()["t/0"].offset == 25
        # skipping it again is refused: it is committed
        with pytest.raises(ConfigurationError, match="batch 1 is already committed"):
            skip_batch(url, app_id, 1, execute=True)

    def test_several_batches_and_a_range_a_per_partition_commit_applied(self, store: Any, url: str,
                                                                        app_id: str) -> None:
        epoch = store.current_epoch()
        # batch 1's partition 1 committed on its own before the batch failed on partition 0
        store.commit(epoch, B1, Writes().incr("n", "records", 3), ranges=[B1.ranges[1]], complete_batch=False)
        plan = skip_batch(store, app_id, [2, 1], execute=True, force=True)
        assert plan.batch_ids == [1, 2] and plan.outcomes == {1: "skipped", 2: "skipped"}
        assert [(r["batch"], r["key"], r["before"], r["after"], r["state"]) for r in plan.rows] == [
            (1, "t/0", 10, 20, "skip"), (1, "t/1", 8, 8, "committed"), (2, "t/0", 20, 25, "skip")]
        assert {k: p.offset for k, p in store.load_positions().items()} == {"t/0": 25, "t/1": 8}
        assert store.pending_batches() == [] and store.last_committed_batch_id() == 2
        assert store.get_values("n") == {"records": 18}
        docs = store.get_values(RESERVED_NAMESPACE)
        first = docs[incident_key("skip", 1)]
        assert [r["key"] for r in first["ranges"]] == ["t/0"] and first["positions"] == 10
        assert [r["key"] for r in first["committed_ranges"]] == ["t/1"]
        assert docs[incident_key("skip", 2)]["positions"] == 5

    def test_file_ranges_keep_their_position_documents(self, url: str, app_id: str, tmp_path: Path) -> None:
        path = str(tmp_path / "app.log")
        r0 = FileRange("f1", path, 0, 100, fingerprint="ab" * 16, sample_length=64)
        r1 = FileRange("f1", path, 100, 180, fingerprint="ab" * 16, sample_length=64)
        with open_store(url, app_id) as s:
            epoch = s.start_epoch()
            s.log_batch(epoch, PlannedBatch(0, 1000, (r0,)))
            s.commit(epoch, PlannedBatch(0, 1000, (r0,)), Writes())
            s.log_batch(epoch, PlannedBatch(1, 2000, (r1,)))
            plan = skip_batch(s, app_id, 1, execute=True, force=True)
            pos = s.load_positions()[r1.position_key]
            assert plan.rows[0]["before"] == 100 and pos.offset == 180 and pos.meta == r1.position_meta()
            assert s.pending_batches() == [] and s.is_committed(1)

    def test_cli_lists_the_skipped_batch(self, store: Any, url: str, app_id: str,
                                         capsys: pytest.CaptureFixture[str]) -> None:
        capsys.readouterr()
        assert main(["batches", "skip", "--store", url, "--app", app_id, "--batch", "1", "--execute",
                     "--reason", "bad record"]) == 0
        out = capsys.readouterr().out
        assert "skipped batch(es) [1]" in out and "incident record skip:00000000000000000001" in out
        assert main(["batches", "--store", url, "--app", app_id]) == 0
        listing = capsys.readouterr().out
        row = next(line for line in listing.splitlines() if line.startswith("1 "))
        assert "SKIPPED" in row and ": bad record" in row
        assert "deo-test-pw" not in out + listing  # the PostgreSQL test server's password


class TestSQLiteSkip(SkipContract):
    @pytest.fixture
    def backend(self, tmp_path: Path) -> Tuple[str, Callable[[], Any]]:
        path = tmp_path / "skip.db"
        return f"sqlite:///{path}", lambda: _sqlite_snapshot(path)

    def test_a_fresh_path_is_not_created(self, tmp_path: Path, app_id: str) -> None:
        with pytest.raises(ConfigurationError, match=r"batch 0 is not in the offset log .*pending batches .*none"):
            skip_batch(f"sqlite:///{tmp_path}/none.db", app_id, 0, execute=True, force=True)
        assert list(tmp_path.iterdir()) == []

    def test_store_of_another_app_is_refused(self, store: Any, url: str) -> None:
        with pytest.raises(ConfigurationError, match="does not match"):
            skip_batch(store, "other-" + uuid.uuid4().hex[:6], 1)


class TestPostgresSkip(SkipContract):
    @pytest.fixture
    def backend(self, postgres_url: str) -> Tuple[str, Callable[[], Any]]:
        return postgres_url, lambda: _postgres_snapshot(postgres_url)


class TestRedisSkip(SkipContract):
    """On a single Redis server and on a Redis Cluster."""

    @pytest.fixture
    def backend(self, any_redis_url: str, app_id: str) -> Tuple[str, Callable[[], Any]]:
        return any_redis_url, lambda: _redis_snapshot(any_redis_url, app_id)
