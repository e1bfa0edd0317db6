"""Driver-side planning on the in-memory cluster of ``dstream_exactly_once.testing._fake_kafka`` (the
``MetadataSource`` seam)."""

from __future__ import annotations

import logging
from typing import List, Tuple

import pytest

from dstream_exactly_once.errors import ConfigurationError, DataLossError, OffsetRangeError
from dstream_exactly_once.kafka._offsets import OffsetRange, TopicAndPartition
from dstream_exactly_once.kafka._planner import DirectPlanner, RateLimit, clamp_ranges
from dstream_exactly_once.kafka._strategies import Assign, Subscribe, SubscribePattern
from dstream_exactly_once.testing._fake_kafka import FakeKafkaCluster

TP = TopicAndPartition


def planner(cluster, strategy=None, **kw):
    kw.setdefault("discovery_interval_s", 0.0)
    return DirectPlanner(cluster, strategy or Subscribe(["t"]), **kw)


def tuples(ranges: List[OffsetRange]) -> List[Tuple[str, int, int, int]]:
    return [r.toTuple() for r in ranges]


# ---------------------------------------------------------------- starting offsets
def test_start_from_latest_by_default_and_earliest_on_request():
    cluster = FakeKafkaCluster({"t": [(0, 10), (5, 20)]})
    assert planner(cluster).start() == {TP("t", 0): 10, TP("t", 1): 20}
    assert planner(cluster, auto_offset_reset="earliest").start() == {TP("t", 0): 0, TP("t", 1): 5}


def test_start_with_reset_none_needs_an_offset_for_every_partition():
    cluster = FakeKafkaCluster({"t": [(0, 10), (0, 10)]})
    with pytest.raises(ConfigurationError, match="no starting offset for t-1 and auto.offset.reset is 'none'"):
        planner(cluster, Subscribe(["t"], {TP("t", 0): 3}), auto_offset_reset="none").start()
    p = planner(cluster, Subscribe(["t"], {TP("t", 0): 3}), auto_offset_reset="none")
    assert p.start(stored={TP("t", 1): 4}) == {TP("t", 0): 3, TP("t", 1): 4}


def test_explicit_offsets_win_over_reset():
    cluster = FakeKafkaCluster({"t": [(0, 10), (0, 10)]})
    p = planner(cluster, Subscribe(["t"], {TP("t", 1): 7}), auto_offset_reset="earliest")
    assert p.start() == {TP("t", 0): 0, TP("t", 1): 7}
    assign = planner(cluster, Assign({TP("t", 0): 10}))
    assert assign.start() == {TP("t", 0): 10}  # the log end is a valid start: nothing to read yet


def test_stored_offsets_win_over_explicit_and_reset():
    cluster = FakeKafkaCluster({"t": [(0, 10), (0, 10)]})
    p = planner(cluster, Subscribe(["t"], {TP("t", 0): 1, TP("t", 1): 1}))
    assert p.start(stored={TP("t", 0): 6}) == {TP("t", 0): 6, TP("t", 1): 1}
    assert p.current == {TP("t", 0): 6, TP("t", 1): 1}


@pytest.mark.parametrize("offset", [11, 100])
def test_explicit_offsets_beyond_the_log_are_rejected(offset):
    cluster = FakeKafkaCluster({"t": [(0, 10)]})
    with pytest.raises(OffsetRangeError, match=rf"fromOffsets\[t-0\] = {offset} is outside the log \[0, 10\]"):
        planner(cluster, Assign({TP("t", 0): offset})).start()


def test_explicit_offsets_below_the_log_start_are_rejected():
    cluster = FakeKafkaCluster({"t": [(4, 10)]})
    with pytest.raises(OffsetRangeError, match=r"fromOffsets\[t-0\] = 3 is outside the log \[4, 10\]"):
        planner(cluster, Assign({TP("t", 0): 3})).start()


def test_explicit_offsets_for_unsubscribed_partitions_are_rejected():
    cluster = FakeKafkaCluster({"t": [(0, 10)], "u": [(0, 1)]})
    with pytest.raises(ConfigurationError, match="not subscribed or do not exist: t-3, u-0"):
        planner(cluster, Subscribe(["t"], {TP("t", 3): 0, TP("u", 0): 0})).start()


def test_stored_offset_beyond_the_log_end_is_refused():
    cluster = FakeKafkaCluster({"t": [(0, 10)]})
    with pytest.raises(OffsetRangeError, match="stored offset 15 for t-0 is beyond the log end 10"):
        planner(cluster).start(stored={TP("t", 0): 15})


def test_stored_offset_below_the_log_start_fails_by_default():
    cluster = FakeKafkaCluster({"t": [(40, 100)]})
    with pytest.raises(DataLossError) as info:
        planner(cluster).start(stored={TP("t", 0): 25})
    message = str(info.value)
    assert "t-0" in message and "[25, 40)" in message and "failOnDataLoss=False" in message


def test_stored_offset_below_the_log_start_stays_the_next_start_and_the_reader_skips(caplog):
    cluster = FakeKafkaCluster({"t": [(40, 100), (0, 5)]})
    p = planner(cluster, fail_on_data_loss=False)
    with caplog.at_level(logging.INFO, logger="dstream_exactly_once.kafka._planner"):  # WARNed once, at the commit
        assert p.start(stored={TP("t", 0): 25, TP("t", 1): 2}) == {TP("t", 0): 25, TP("t", 1): 2}
    # the store's compare-and-set needs the stored offset as the next fromOffset; the executor's
    # reader skips [25, 40) and reports it, so it is not counted here as well
    assert p.lost_offsets == 0
    assert "[25, 40)" in caplog.text and "records the loss" in caplog.text
    assert [(r.fromOffset, r.untilOffset) for r in p.plan(1.0) if r.partition == 0] == [(25, 100)]


def test_stored_partition_that_no_longer_exists():
    cluster = FakeKafkaCluster({"t": [(0, 10)]})  # the store knows t-1: the topic was recreated smaller
    with pytest.raises(DataLossError, match="t-1 has stored offset 4 but the partition no longer exists"):
        planner(cluster).start(stored={TP("t", 0): 1, TP("t", 1): 4})
    p = planner(cluster, fail_on_data_loss=False)
    assert p.start(stored={TP("t", 0): 1, TP("t", 1): 4}) == {TP("t", 0): 1}


def test_unknown_topic_fails_before_anything_is_planned():
    with pytest.raises(ConfigurationError, match="unknown topic"):
        planner(FakeKafkaCluster({"t": [(0, 1)]}), Subscribe(["missing"])).start()
    with pytest.raises(ConfigurationError, match="assigned partitions do not exist: t-5"):
        planner(FakeKafkaCluster({"t": [(0, 1)]}), Assign([TP("t", 5)])).start()


# ---------------------------------------------------------------- per batch
def test_plan_reads_up_to_the_log_end_and_advances_only_when_told():
    cluster = FakeKafkaCluster({"t": [(0, 10), (0, 4)]})
    p = planner(cluster, auto_offset_reset="earliest")
    p.start()
    first = p.plan(1.0)
    assert tuples(first) == [("t", 0, 0, 10), ("t", 1, 0, 4)]
    assert p.plan(1.0) == first  # not advanced yet: planning is repeatable
    p.advance(first)
    cluster.produce("t", 1, 3)
    assert tuples(p.plan(1.0)) == [("t", 0, 10, 10), ("t", 1, 4, 7)]


def test_one_latest_lookup_per_batch_without_discovery():
    cluster = FakeKafkaCluster({"t": [(0, 10)]})
    p = planner(cluster, Assign([TP("t", 0)]))
    p.start()
    cluster.calls.clear()
    p.plan(1.0)
    assert cluster.calls == ["latest"]


@pytest.mark.parametrize(("max_rate", "min_rate", "seconds", "expected"), [
    (0, 1, 2.0, None),       # no limit
    (10, 1, 2.0, 20),        # rate * batch seconds
    (10, 1, 0.5, 5),
    (10, 1, 0.05, 1),        # floor: min rate
    (3, 1, 0.1, 1),
    (1, 5, 1.0, 5),          # min rate above max rate wins
    (100, 1, 1.5, 150),
])
def test_rate_limit_math(max_rate, min_rate, seconds, expected):
    assert RateLimit(max_rate, min_rate).max_messages(seconds) == expected


def test_rate_limit_from_spark_conf_and_validation():
    conf = {"spark.streaming.kafka.maxRatePerPartition": "25", "spark.streaming.kafka.minRatePerPartition": "2"}
    assert RateLimit.from_spark_conf(conf) == RateLimit(25, 2)
    assert RateLimit.from_spark_conf(None) == RateLimit(0, 1)
    assert RateLimit.from_spark_conf({}).max_messages(1.0) is None
    with pytest.raises(ConfigurationError,
                       match=r"'spark.streaming.kafka.maxRatePerPartition' must be an integer >= 0, got 'fast'"):
        RateLimit.from_spark_conf({"spark.streaming.kafka.maxRatePerPartition": "fast"})
    with pytest.raises(ConfigurationError, match="max_rate_per_partition must be an int >= 0, got -1"):
        RateLimit(-1)
    with pytest.raises(ConfigurationError, match="min_rate_per_partition must be an int >= 0, got 1.5"):
        RateLimit(1, 1.5)  # type: ignore[arg-type]


def test_clamp_ranges():
    current = {TP("t", 1): 5, TP("t", 0): 0, TP("a", 0): 9}
    latest = {TP("t", 1): 100, TP("t", 0): 3, TP("a", 0): 9}
    assert tuples(clamp_ranges(current, latest, None)) == [("a", 0, 9, 9), ("t", 0, 0, 3), ("t", 1, 5, 100)]
    assert tuples(clamp_ranges(current, latest, 10)) == [("a", 0, 9, 9), ("t", 0, 0, 3), ("t", 1, 5, 15)]
    # never a negative range even if the log end moved backwards
    assert tuples(clamp_ranges({TP("t", 0): 8}, {TP("t", 0): 2}, None)) == [("t", 0, 8, 8)]


def test_rate_limit_spreads_a_backlog_over_batches():
    cluster = FakeKafkaCluster({"t": [(0, 45), (0, 3)]})
    p = planner(cluster, auto_offset_reset="earliest", rate=RateLimit(10, 1))
    p.start()
    sizes = []
    while True:
        ranges = p.plan(2.0)
        if not any(r.count() for r in ranges):
            break
        sizes.append([r.count() for r in ranges])
        p.advance(ranges)
    assert sizes == [[20, 3], [20, 0], [5, 0]]


def test_new_partitions_are_discovered_at_their_earliest_offset():
    cluster = FakeKafkaCluster({"t": [(0, 10)]})
    p = planner(cluster)
    p.start()
    cluster.add_partition("t", earliest=3, latest=8)
    assert tuples(p.plan(1.0)) == [("t", 0, 10, 10), ("t", 1, 3, 8)]
    assert p.partitions() == {TP("t", 0), TP("t", 1)}


def test_new_topics_matching_a_pattern_are_discovered():
    cluster = FakeKafkaCluster({"ev-a": [(0, 2)], "other": [(0, 9)]})
    p = planner(cluster, SubscribePattern(r"ev-.*"), auto_offset_reset="earliest")
    p.start()
    cluster.create_topic("ev-b", [(0, 4)])
    assert tuples(p.plan(1.0)) == [("ev-a", 0, 0, 2), ("ev-b", 0, 0, 4)]


def test_discovery_waits_for_its_interval_and_assign_never_discovers():
    cluster = FakeKafkaCluster({"t": [(0, 10)]})
    slow = planner(cluster, discovery_interval_s=3600)
    slow.start()
    assigned = planner(cluster, Assign([TP("t", 0)]))
    assigned.start()
    cluster.add_partition("t", 0, 5)
    assert slow.partitions() == {TP("t", 0)} and len(slow.plan(1.0)) == 1
    assert len(assigned.plan(1.0)) == 1


def test_deleted_topic_fails_by_default():
    cluster = FakeKafkaCluster({"t": [(0, 10)], "u": [(0, 4)]})
    p = planner(cluster, Subscribe(["t", "u"]), auto_offset_reset="earliest")
    p.start()
    p.advance(p.plan(1.0))
    cluster.delete_topic("u")
    with pytest.raises(DataLossError, match="u-0 was deleted; offsets from 4 on cannot be read"):
        p.plan(1.0)


def test_deleted_topic_is_dropped_under_the_clamp_policy():
    cluster = FakeKafkaCluster({"t": [(0, 10)], "u": [(0, 4)]})
    p = planner(cluster, Subscribe(["t", "u"]), auto_offset_reset="earliest", fail_on_data_loss=False)
    p.start()
    p.advance(p.plan(1.0))
    cluster.delete_topic("u")
    cluster.produce("t", 0, 5)
    assert tuples(p.plan(1.0)) == [("t", 0, 10, 15)]
    assert p.partitions() == {TP("t", 0)}
    # recreated later: picked up again from its earliest offset
    cluster.create_topic("u", [(0, 2)])
    assert tuples(p.plan(1.0)) == [("t", 0, 10, 15), ("u", 0, 0, 2)]


def test_only_deleted_topic_leaves_empty_batches_under_the_clamp_policy():
    cluster = FakeKafkaCluster({"t": [(0, 10)]})
    p = planner(cluster, fail_on_data_loss=False)
    p.start()
    cluster.delete_topic("t")
    assert p.plan(1.0) == []


def test_other_data_loss_errors_are_not_swallowed():
    class Broken(FakeKafkaCluster):
        def latest(self, tps):
            raise DataLossError("something else")

    p = planner(Broken({"t": [(0, 10)]}), fail_on_data_loss=False)
    p.current = {TP("t", 0): 0}
    with pytest.raises(DataLossError, match="something else"):
        p.plan(1.0)


def test_truncated_or_recreated_log_fails_by_default():
    cluster = FakeKafkaCluster({"t": [(0, 50)]})
    p = planner(cluster)
    p.start()
    cluster.create_topic("t", [(0, 20)])  # recreated: the log now ends before our position
    with pytest.raises(DataLossError, match="t-0: the log ends at 20 but offset 50 was expected to exist"):
        p.plan(1.0)


def test_truncated_or_recreated_log_restarts_at_earliest_under_the_clamp_policy():
    cluster = FakeKafkaCluster({"t": [(0, 50)]})
    p = planner(cluster, fail_on_data_loss=False)
    p.start()
    cluster.create_topic("t", [(2, 20)])
    assert tuples(p.plan(1.0)) == [("t", 0, 2, 20)]
    assert p.current[TP("t", 0)] == 2


def test_records_deleted_below_the_position_are_left_to_the_reader():
    # The planner only knows the log end per batch; a range starting below the new log start is
    # planned as usual and the executor applies the data-loss policy when it reads.
    cluster = FakeKafkaCluster({"t": [(0, 50)]})
    p = planner(cluster, auto_offset_reset="earliest")
    p.start()
    cluster.delete_records("t", 0, 30)
    assert tuples(p.plan(1.0)) == [("t", 0, 0, 50)]


# ---------------------------------------------------------------- state kept across batches
def test_a_partition_added_and_another_removed_in_one_batch_are_both_planned():
    # Same number of partitions before and after: the planner's sorted partitions must not be reused.
    cluster = FakeKafkaCluster({"ev-a": [(0, 3)], "ev-b": [(0, 4)]})
    p = planner(cluster, SubscribePattern(r"ev-.*"), auto_offset_reset="earliest", fail_on_data_loss=False)
    p.start()
    p.advance(p.plan(1.0))
    cluster.delete_topic("ev-b")
    cluster.add_partition("ev-a", 1, 6)
    assert tuples(p.plan(1.0)) == [("ev-a", 0, 3, 3), ("ev-a", 1, 1, 6)]
    p.current = {TP("ev-a", 1): 2, TP("ev-a", 0): 0}  # replaced from outside, out of order
    assert tuples(p.plan(1.0)) == [("ev-a", 0, 0, 3), ("ev-a", 1, 2, 6)]


def test_ranges_of_idle_partitions_are_reused_and_moving_ones_rebuilt():
    cluster = FakeKafkaCluster({"t": [(0, 10), (0, 4)]})
    p = planner(cluster, auto_offset_reset="earliest")
    p.start()
    first = p.plan(1.0)
    p.advance(first)
    second = p.plan(1.0)
    p.advance(second)
    cluster.produce("t", 1, 2)
    third = p.plan(1.0)
    assert tuples(third) == [("t", 0, 10, 10), ("t", 1, 4, 6)]
    assert third[0] is second[0] and third[1] is not second[1]


def test_advance_takes_ranges_of_partitions_it_does_not_plan():
    cluster = FakeKafkaCluster({"t": [(0, 10), (0, 4)]})
    p = planner(cluster, Assign([TP("t", 0)]), auto_offset_reset="earliest")
    p.start()
    p.advance([OffsetRange("t", 0, 0, 5), OffsetRange("t", 1, 0, 2)])
    assert p.current == {TP("t", 0): 5, TP("t", 1): 2}
    assert tuples(p.plan(1.0)) == [("t", 0, 5, 10), ("t", 1, 2, 4)]


def test_strategy_partition_sets_follow_the_cluster_and_are_the_callers_to_keep():
    cluster = FakeKafkaCluster({"t": [(0, 1)]})
    strategy = Subscribe(["t"])
    first = strategy.partitions(cluster)
    first.add(TP("x", 9))
    assert strategy.partitions(cluster) == {TP("t", 0)}
    cluster.add_partition("t", 0, 0)
    assert strategy.partitions(cluster) == {TP("t", 0), TP("t", 1)}


# ---------------------------------------------------------------- ListOffsets requests (no broker)
def test_offset_requests_are_grouped_by_leader_built_once_and_read_back():
    from kafka.errors import NotLeaderForPartitionError
    from kafka.protocol.consumer.offsets import ListOffsetsResponse

    from dstream_exactly_once.kafka._metadata import _OffsetRequests

    wanted = [TP("t", 0), TP("t", 1), TP("u", 0)]
    assert _OffsetRequests.group(wanted, {"t": {0: 1, 1: 2}}) is None  # u-0's leader is not known
    assert _OffsetRequests.group(wanted, {"t": {0: 1, 1: -1}, "u": {0: 1}}) is None  # no leader now
    requests = _OffsetRequests.group(wanted, {"t": {0: 1, 1: 2}, "u": {0: 1}})
    assert requests is not None
    built = requests.build(-1, 1)
    assert requests.build(-1, 1) is built and requests.build(-2, 1) is not built
    sent = {node: [(t.name, [p.partition_index for p in t.partitions]) for t in r.topics] for node, r in built}
    assert sent == {1: [("t", [0]), ("u", [0])], 2: [("t", [1])]}
    assert {r.isolation_level for _, r in built} == {1}

    topic = ListOffsetsResponse.ListOffsetsTopicResponse
    part = topic.ListOffsetsPartitionResponse

    def answer(*parts):
        return ListOffsetsResponse(topics=[topic(name=t, partitions=[part(partition_index=i, error_code=e, offset=o)
                                                                      for i, e, o in ps]) for t, ps in parts])

    one = answer(("t", [(0, 0, 7)]), ("u", [(0, 0, 3)]))
    assert requests.read([one, answer(("t", [(1, 0, 9)]))]) == {TP("t", 0): 7, TP("t", 1): 9, TP("u", 0): 3}
    with pytest.raises(NotLeaderForPartitionError):
        requests.read([one, answer(("t", [(1, 6, -1)]))])
    with pytest.raises(Exception, match="answered 2 of 3 partitions"):
        requests.read([one])


def test_subscribe_pattern_asks_for_matching_partitions_in_one_call_when_the_source_can():
    import re

    from dstream_exactly_once.kafka._strategies import SubscribePattern

    class OneCall:
        def __init__(self) -> None:
            self.calls = []

        def matching_partitions(self, pattern):
            self.calls.append(pattern.pattern)
            return {"ta": [0, 1], "tb": [0]}

        def partitions(self, topics):  # pragma: no cover - must not be asked
            raise AssertionError("partitions() asked besides matching_partitions()")

        matching_topics = partitions

    md = OneCall()
    got = SubscribePattern(re.compile("t.")).partitions(md)
    assert sorted((tp.topic, tp.partition) for tp in got) == [("ta", 0), ("ta", 1), ("tb", 0)]
    assert md.calls == ["t."]
