"""The look a stalled read takes at the broker (kafka/_stall.py): the verdicts and the clock."""

from __future__ import annotations

import time

import pytest

from dstream_exactly_once import DataLossError, KafkaReadStalledError, KafkaUnavailableError, OffsetRange
from dstream_exactly_once.kafka import _stall as stall
from dstream_exactly_once.kafka._multi_reader import stuck_or_stalled


def test_each_waiting_partition_is_sorted_by_what_the_broker_holds():
    def probe(keys):
        assert sorted(keys) == ["a", "b", "c"]
        return {"a": 0, "b": 50, "c": 0}, {"a": 100, "b": 100, "c": 20}

    verdict = stall.classify(probe, {"a": 10, "b": 40, "c": 20})
    assert verdict.present == {"a": (0, 100)}
    assert verdict.below_start == {"b": 50}
    assert verdict.beyond_end == {"c": 20}
    assert verdict.unreachable is None


def test_a_probe_that_fails_is_the_outage_verdict():
    def probe(keys):
        raise TimeoutError("no answer in 10000 ms")

    verdict = stall.classify(probe, {"a": 10})
    assert verdict.unreachable == "TimeoutError: no answer in 10000 ms"
    assert not verdict.present and not verdict.below_start and not verdict.beyond_end


def test_the_watch_looks_after_a_quarter_of_a_short_poll_timeout_and_counts_recoveries():
    watch = stall.Watch(400)  # a look after 0.1 s
    assert watch.check_s == pytest.approx(0.1)
    assert not watch.due()
    time.sleep(0.12)
    assert watch.due() and not watch.due()  # the next look only after another interval
    assert [watch.may_recover() for _ in range(stall.RECOVERIES + 1)] == [True] * stall.RECOVERIES + [False]
    assert stall.Watch(120000).check_s == stall.STALL_CHECK_S


def test_after_the_poll_timeout_records_on_the_broker_are_a_stall_not_an_outage():
    r = OffsetRange("t", 3, 10, 20)
    watch = stall.Watch(1)
    watch.last = stall.Verdict(present={"k": (0, 20)})
    err = stuck_or_stalled(watch, {r: 12}, {r: "k"}, "kafka-python")
    assert isinstance(err, KafkaReadStalledError) and err.retriable
    assert not isinstance(err, KafkaUnavailableError)
    assert "at offset 12 (log start 0, end 20)" in str(err) and "spark.streaming.kafka.reader" in str(err)
    watch.last = stall.Verdict(unreachable="KafkaTimeoutError: timed out")
    err = stuck_or_stalled(watch, {r: 12}, {r: "k"}, "kafka-python")
    assert isinstance(err, KafkaUnavailableError)
    assert "the broker is unreachable" in str(err) and "could not be asked for its log bounds" in str(err)


def test_the_beyond_end_error_names_the_offsets_and_the_log_end():
    err = stall.beyond_end_error(OffsetRange("t", 1, 5, 20), 10, 10)
    assert isinstance(err, DataLossError)
    assert "offsets [10, 20) of t-1 are beyond the log end 10" in str(err) and "failOnDataLoss=False" in str(err)
