"""The Kafka source's Spark-free driver and executor sides (``kafka/_source.py``, ``kafka/_range_reader.py``,
``kafka/_group_mirror.py``) on the in-memory cluster double."""

from __future__ import annotations

import threading
from datetime import datetime, timezone

import pytest

from dstream_exactly_once.core._ranges import Position
from dstream_exactly_once.core._retry import RetryPolicy
from dstream_exactly_once.errors import ConfigurationError, KafkaUnavailableError
from dstream_exactly_once.files._ranges import FileRange
from dstream_exactly_once.kafka._group_mirror import GroupCommitter, GroupMirror
from dstream_exactly_once.kafka._offsets import OffsetRange, TopicAndPartition
from dstream_exactly_once.kafka._params import parse_kafka_params
from dstream_exactly_once.kafka._planner import DirectPlanner
from dstream_exactly_once.kafka._range_reader import KafkaRangeReader
from dstream_exactly_once.kafka._source import KafkaSource
from dstream_exactly_once.kafka._strategies import Subscribe
from dstream_exactly_once.testing._fake_kafka import FakeKafkaCluster

TP = TopicAndPartition
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
FOREIGN = FileRange("f1", "/data/a.log", 0, 10)


def _source(cluster, **kw):
    config = parse_kafka_params({"bootstrap.servers": "127.0.0.1:9"})
    planner = DirectPlanner(cluster, Subscribe(["t"]), auto_offset_reset="earliest", discovery_interval_s=0.0)
    return KafkaSource(config, planner, batch_seconds=1.0, poll_timeout_ms=1000, fail_on_data_loss=True, **kw)


def test_kafka_source_resumes_plans_and_advances_past_replayed_ranges():
    src = _source(FakeKafkaCluster({"t": [(0, 10), (0, 4)]}))
    src.start({"t/0": Position(3)})
    assert [r.toTuple() for r in src.plan(T0)] == [("t", 0, 3, 10), ("t", 1, 0, 4)]
    src.advance([OffsetRange("t", 0, 10, 10)])
    assert src.latest_positions() == {"t/0": 10, "t/1": 4}
    assert isinstance(src.reader(), KafkaRangeReader)


@pytest.mark.parametrize("call", ["advance", "after_commit"])
def test_kafka_source_refuses_ranges_of_another_source_instead_of_dropping_them(call):
    src = _source(FakeKafkaCluster({"t": [(0, 10)]}))
    src.start({})
    with pytest.raises(ConfigurationError, match=r"range\(s\) of another source, e\.g\. FileRange.*only OffsetRange"):
        getattr(src, call)([OffsetRange("t", 0, 0, 5), FOREIGN])


def test_kafka_range_reader_refuses_a_foreign_range_naming_it():
    reader = KafkaRangeReader(parse_kafka_params({"bootstrap.servers": "127.0.0.1:9"}))
    with pytest.raises(ConfigurationError, match=r"KafkaRangeReader reads OffsetRange values, got FileRange"):
        reader.read(FOREIGN)


def test_kafka_source_refuses_stored_positions_of_another_source():
    src = _source(FakeKafkaCluster({"t": [(0, 10)]}))
    with pytest.raises(ConfigurationError, match=r"position 'file:f1', which is not a Kafka topic partition"):
        src.start({"file:f1": Position(3)})


class _SlowGroup:
    """A consumer-group commit that blocks until released and fails its first ``fail`` calls."""

    def __init__(self, fail=0):
        self.release = threading.Event()
        self.calls = []
        self.fail = fail

    def commit(self, offsets):
        self.release.wait(10)
        self.calls.append(dict(offsets))
        if len(self.calls) <= self.fail:
            raise KafkaUnavailableError("coordinator not available yet")


def test_monitor_group_mirror_never_blocks_the_batch_thread_and_retries_in_the_background():
    group = _SlowGroup(fail=1)
    src = _source(FakeKafkaCluster({"t": [(0, 10)]}), monitor_group="mon")
    src._mirror = GroupMirror("mon", group.commit, policy=RetryPolicy(max_attempts=3, base_delay=0.01))
    src.start({})
    src.after_commit([OffsetRange("t", 0, 0, 5)])  # returns although the group commit is blocked
    src.after_commit([OffsetRange("t", 0, 5, 7)])
    assert group.calls == []
    group.release.set()
    assert src._mirror.flush(10)
    # the first commit failed once (retried by the policy), the second offer was merged into the newest
    assert group.calls[-1] == {TP("t", 0): 7} and src.mirror_failures == 0
    src._mirror.close()


def test_mirror_that_keeps_failing_counts_and_logs_without_raising(caplog):
    group = _SlowGroup(fail=99)
    group.release.set()
    mirror = GroupMirror("mon", group.commit, policy=RetryPolicy(max_attempts=2, base_delay=0.01))
    mirror.offer({TP("t", 0): 5})
    assert mirror.flush(10)
    assert mirror.failures == 1 and len(group.calls) == 2
    assert "could not mirror offsets to consumer group 'mon'" in caplog.text
    mirror.close()


class _Client:
    def __init__(self, log, fail):
        self.log, self.fail, self.closed = log, fail, False

    def mirror_group_offsets(self, group, offsets):
        self.log.append((id(self), group, dict(offsets)))
        if self.fail:
            raise KafkaUnavailableError("CoordinatorNotAvailableError")

    def close(self):
        self.closed = True


def test_group_committer_replaces_its_client_after_a_failed_commit():
    log, made = [], []

    def open_client():
        made.append(_Client(log, fail=not made))  # the first client fails, as after a failed look-up
        return made[-1]

    commit = GroupCommitter("mon", open_client)
    with pytest.raises(KafkaUnavailableError):
        commit({TP("t", 0): 5})
    commit({TP("t", 0): 5})
    commit({TP("t", 0): 6})
    assert made[0].closed and len(made) == 2 and [entry[0] for entry in log[1:]] == [id(made[1])] * 2
