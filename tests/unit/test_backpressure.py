"""Backpressure: Spark's PID rate estimator, the lag-share split per partition, the SparkConf keys."""

from __future__ import annotations

import pytest

from dstream_exactly_once.errors import ConfigurationError
from dstream_exactly_once.kafka._offsets import TopicAndPartition
from dstream_exactly_once.kafka._planner import DirectPlanner, RateLimit
from dstream_exactly_once.kafka._strategies import Subscribe
from dstream_exactly_once.streaming._backpressure import PIDRateEstimator, RateController, rate_controller_from_conf
from dstream_exactly_once.testing._fake_kafka import FakeKafkaCluster

TP = TopicAndPartition


def test_first_batch_only_seeds_the_rate_then_the_pid_formula_applies():
    est = PIDRateEstimator(1000)  # kp 1.0, ki 0.2, kd 0.0, minRate 100
    assert est.compute(1_000, 1_000, 500, 0) is None  # processing rate 2000/s remembered
    # error = 2000 - 1000 = 1000 -> 2000 - 1.0 * 1000
    assert est.compute(2_000, 1_000, 1_000, 0) == pytest.approx(1_000.0)
    # error 0, but 500 ms of scheduling delay: historical error 500 * 1000 / 1000 -> 1000 - 0.2 * 500
    assert est.compute(3_000, 1_000, 1_000, 500) == pytest.approx(900.0)


def test_no_estimate_without_progress_records_or_processing_time():
    est = PIDRateEstimator(1000)
    est.compute(1_000, 100, 100, 0)
    assert est.compute(2_000, 100, 100, 0) is not None
    assert est.compute(2_000, 100, 100, 0) is None  # not later than the previous update
    assert est.compute(1_500, 100, 100, 0) is None
    assert est.compute(3_000, 0, 100, 0) is None
    assert est.compute(3_000, 100, 0, 0) is None


def test_rate_never_falls_below_min_rate_and_derivative_term():
    est = PIDRateEstimator(1000, min_rate=250)
    est.compute(1_000, 100, 1_000, 0)  # 100/s
    assert est.compute(2_000, 100, 1_000, 100_000) == 250.0  # a long queue: clamped at minRate
    d = PIDRateEstimator(1000, proportional=0.0, integral=0.0, derivative=1.0, min_rate=1)
    d.compute(1_000, 1_000, 1_000, 0)  # seeds 1000/s, error 0
    # error = 1000 - 500 = 500 over 2 s -> dError 250 -> 1000 - 250
    assert d.compute(3_000, 500, 1_000, 0) == pytest.approx(750.0)


@pytest.mark.parametrize("kw, bad", [({"proportional": -1.0}, "proportional"), ({"integral": -0.1}, "integral"),
                                      ({"derivative": -2}, "derived"), ({"min_rate": 0}, "minRate"),
                                      ({"proportional": True}, "proportional")])
def test_estimator_settings_are_checked(kw, bad):
    with pytest.raises(ConfigurationError, match=bad):
        PIDRateEstimator(1000, **kw)
    with pytest.raises(ConfigurationError, match="batch interval"):
        PIDRateEstimator(0)


def test_conf_keys_and_their_validation():
    assert rate_controller_from_conf({}, 1000) is None
    assert rate_controller_from_conf({"spark.streaming.backpressure.enabled": "false"}, 1000) is None
    on = {"spark.streaming.backpressure.enabled": "true", "spark.streaming.backpressure.initialRate": "500",
          "spark.streaming.backpressure.pid.minRate": "20", "spark.streaming.backpressure.pid.integral": "0.5"}
    rc = rate_controller_from_conf(on, 2000)
    assert rc is not None and rc.initial_rate == 500 and rc.estimator.min_rate == 20
    assert rc.estimator.integral == 0.5 and rc.estimator.batch_interval_ms == 2000
    for key, value, match in (("spark.streaming.backpressure.enabled", "yes", "'yes'"),
                              ("spark.streaming.backpressure.rateEstimator", "gradient", "'gradient'"),
                              ("spark.streaming.backpressure.initialRate", "-5", "initialRate"),
                              ("spark.streaming.backpressure.pid.proportional", "fast", "'fast'")):
        conf = {**on, key: value}
        with pytest.raises(ConfigurationError, match=match):
            rate_controller_from_conf(conf, 1000)


def test_controller_uses_initial_rate_until_the_first_estimate_and_counts_planned_records():
    rc = RateController(PIDRateEstimator(1000, min_rate=1), initial_rate=50)
    assert rc.rate() == 50
    rc.planned(1_000, 50)
    rc.batch_completed(1_000, 1_100, 100, 0)  # seeds 500/s
    assert rc.rate() == 50 and rc.updates == 0
    rc.planned(2_000, 50)
    rc.batch_completed(2_000, 2_050, 50, 0)  # 1000/s: error -500 -> 1000
    assert rc.rate() == pytest.approx(1_000.0) and rc.updates == 1
    rc.batch_completed(3_000, 3_050, 50, 0)  # a batch not planned here (a replay): nothing to learn
    assert rc.updates == 1
    assert RateController(PIDRateEstimator(1000)).rate() is None  # no initialRate: unlimited at first


def test_lag_share_split_capped_by_max_rate_with_the_min_rate_floor():
    current = {TP("t", 0): 0, TP("t", 1): 0, TP("t", 2): 100}
    latest = {TP("t", 0): 750, TP("t", 1): 250, TP("t", 2): 100}
    # 400/s over 2 s, lag shares 3/4 and 1/4
    assert RateLimit().backpressure_messages(2.0, 400, current, latest) == {TP("t", 0): 600, TP("t", 1): 200,
                                                                            TP("t", 2): 1}
    assert RateLimit(100, 1).backpressure_messages(2.0, 400, current, latest) == {
        TP("t", 0): 200, TP("t", 1): 200, TP("t", 2): 1}  # capped at maxRatePerPartition
    assert RateLimit(0, 0).backpressure_messages(1.0, 10, {TP("t", 0): 0, TP("t", 1): 0},
                                                 {TP("t", 0): 1, TP("t", 1): 3}) == {
        TP("t", 0): 3, TP("t", 1): 8}  # 2.5 and 7.5 round half up, as Scala's round
    assert RateLimit().backpressure_messages(1.0, 400, {TP("t", 0): 5}, {TP("t", 0): 5}) is None


def test_planner_applies_the_backpressure_rate():
    cluster = FakeKafkaCluster({"t": [(0, 900), (0, 300)]})
    p = DirectPlanner(cluster, Subscribe(["t"]), auto_offset_reset="earliest", discovery_interval_s=0.0)
    p.start()
    ranges = p.plan(1.0, 100.0)
    assert [r.count() for r in ranges] == [75, 25]
    p.advance(ranges)
    assert [r.count() for r in p.plan(1.0)] == [825, 275]  # no rate: up to the log end
