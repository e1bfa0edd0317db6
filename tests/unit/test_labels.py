"""Doris label generation: the original design's rule (default) and the always-valid strict mode."""

from __future__ import annotations

import hashlib
import logging
import os
import pickle
import re
import subprocess
import sys
import warnings

import pytest

from dstream_exactly_once.errors import ConfigurationError
from dstream_exactly_once.sinks._labels import MAX_LABEL_LENGTH, LabelGenerator, make_label

DORIS_LABEL = re.compile(r"^[-_A-Za-z0-9:]{1,128}$")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHECKPOINT = "hdfs://namenode:8020/user/spark/checkpoints/orders.v2|eu-west"


# ---------------------------------------------------------------- default mode (the design's rule)
def test_design_example_collapses_underscores() -> None:
    assert make_label("label___test", 7, 3) == "label_test_7_3"


@pytest.mark.parametrize("char", ["-", "|", "/", ":", "."])
def test_each_design_character_becomes_underscore(char: str) -> None:
    assert make_label(f"a{char}b", 0, 1) == "a_b_0_1"


def test_runs_of_replaced_characters_collapse_to_one_underscore() -> None:
    assert make_label("a-|/:.b", 2, 5) == "a_b_2_5"
    assert make_label("a_/_b__", 2, 5) == "a_b_2_5"


def test_checkpoint_location_label() -> None:
    label = make_label(CHECKPOINT, 12, 4)
    assert label == "hdfs_namenode_8020_user_spark_checkpoints_orders_v2_eu_west_12_4"
    assert DORIS_LABEL.match(label)


def test_label_is_built_from_batch_and_partition() -> None:
    labels = {make_label("app", b, p) for b in range(20) for p in range(20)}
    assert len(labels) == 400


def test_exactly_128_characters_is_kept_without_warning() -> None:
    app = "a" * (MAX_LABEL_LENGTH - len("_1_2"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        label = make_label(app, 1, 2)
    assert len(label) == MAX_LABEL_LENGTH


def test_long_label_keeps_a_readable_tail_and_a_digest_of_the_app_id(caplog: pytest.LogCaptureFixture) -> None:
    # Was: the last 128 characters, with a warning (issue #12 defect 11: long ids collided).
    app = "head" + "x" * 200 + "tail"
    with caplog.at_level(logging.WARNING, logger="dstream_exactly_once.sinks._labels"), warnings.catch_warnings():
        warnings.simplefilter("error")
        label = make_label(app, 31, 7)
    assert len(label) == MAX_LABEL_LENGTH and DORIS_LABEL.match(label)
    digest = hashlib.sha256(app.encode()).hexdigest()[:32]
    assert label == ("x" * 200 + "tail")[-(MAX_LABEL_LENGTH - 38):] + f"_{digest}_31_7"
    assert caplog.records == []


def test_length_is_checked_after_collapsing() -> None:
    app = "a//" * 60  # 180 characters, but collapses to "a_" * 60: the label fits and is kept
    assert make_label(app, 0, 0) == "a_" * 60 + "0_0"
    longer = "a//" * 100  # collapses to "a_" * 100: too long, shortened with a digest
    assert make_label(longer, 0, 0) == make_label(longer, 0, 0, strict=True)
    assert len(make_label(longer, 0, 0)) <= MAX_LABEL_LENGTH


def test_default_mode_refuses_characters_doris_refuses() -> None:
    with pytest.raises(ConfigurationError, match=r"refuses.*strict=True"):
        make_label("my app=1", 0, 0)
    with pytest.raises(ConfigurationError, match="strict=True"):
        make_label("应用", 0, 0)


# ---------------------------------------------------------------- strict mode
def test_strict_equals_default_when_default_is_valid() -> None:
    for app in ("label___test", CHECKPOINT, "a-b", "x" * 100):
        assert make_label(app, 3, 9, strict=True) == make_label(app, 3, 9)


@pytest.mark.parametrize("app", ["my app", "a=b", "ä", "应用/检查点", "tab\there", "#?&%", " "])
def test_strict_labels_use_doris_alphabet(app: str) -> None:
    label = make_label(app, 4, 2, strict=True)
    assert DORIS_LABEL.match(label), label
    assert label.endswith("_4_2")


def test_strict_long_label_is_hash_based_and_at_most_128() -> None:
    app = "hdfs://nn/" + "deep/" * 60 + "app"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # strict never truncates, so never warns
        label = make_label(app, 123456, 17, strict=True)
    assert len(label) <= MAX_LABEL_LENGTH
    assert DORIS_LABEL.match(label)
    assert re.search(r"_[0-9a-f]{32}_123456_17$", label)
    assert label.startswith("deep_") or "deep_app" in label  # a readable part of the app id


def test_strict_hash_is_stable_across_calls() -> None:
    app = "z" * 300
    assert make_label(app, 1, 2, strict=True) == make_label(app, 1, 2, strict=True)
    assert LabelGenerator(app, strict=True)(1, 2) == make_label(app, 1, 2, strict=True)


def test_strict_hash_is_stable_across_processes_and_hash_seeds() -> None:
    app = "应用/" + "q" * 300
    code = ("import sys; from dstream_exactly_once.sinks._labels import make_label; "
            f"sys.stdout.write(make_label({app!r}, 5, 6, strict=True))")
    outputs = set()
    for seed in ("0", "1", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed, PYTHONPATH=ROOT)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        outputs.add(out.stdout)
    assert outputs == {make_label(app, 5, 6, strict=True)}


def test_both_modes_keep_distinct_long_app_ids_apart() -> None:
    # Default mode used to give both the same label (same last 128 characters): defect 11.
    a, b = "A" + "x" * 300, "B" + "x" * 300
    assert make_label(a, 0, 0) != make_label(b, 0, 0)
    assert make_label(a, 0, 0, strict=True) != make_label(b, 0, 0, strict=True)


def test_strict_keeps_distinct_replaced_app_ids_apart() -> None:
    assert make_label("应用", 0, 0, strict=True) != make_label("检查", 0, 0, strict=True)
    assert make_label("a b", 0, 0, strict=True) != make_label("a=b", 0, 0, strict=True)


def test_distinct_inputs_give_distinct_strict_labels() -> None:
    apps = ["app", "app2", "x" * 300, "y" * 300, "应用", "a b"]
    labels = {make_label(a, b, p, strict=True) for a in apps for b in (0, 1, 10) for p in (0, 1, 11)}
    assert len(labels) == len(apps) * 9


def test_strict_with_huge_ids_still_valid() -> None:
    label = make_label("app", 10**150, 10**5, strict=True)
    assert DORIS_LABEL.match(label)


# ---------------------------------------------------------------- validation
@pytest.mark.parametrize("bad", ["", None, 3, b"app"])
def test_bad_app_id(bad: object) -> None:
    with pytest.raises(ConfigurationError, match=re.escape(repr(bad))):
        make_label(bad, 0, 0)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [-1, 1.0, "1", None, True])
def test_bad_batch_id(bad: object) -> None:
    with pytest.raises(ConfigurationError, match=r"batch id .*" + re.escape(repr(bad))):
        make_label("app", bad, 0)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [-2, 0.5, "0", None, False])
def test_bad_partition_id(bad: object) -> None:
    with pytest.raises(ConfigurationError, match=r"partition id .*" + re.escape(repr(bad))):
        make_label("app", 0, bad)  # type: ignore[arg-type]


def test_configuration_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        make_label("app", -1, 0)


# ---------------------------------------------------------------- LabelGenerator
def test_generator_matches_make_label_and_pickles() -> None:
    gen = LabelGenerator(CHECKPOINT)
    assert gen(3, 4) == gen.label(3, 4) == make_label(CHECKPOINT, 3, 4)
    clone = pickle.loads(pickle.dumps(gen))
    assert clone == gen and hash(clone) == hash(gen)
    assert clone(3, 4) == gen(3, 4)
    assert "strict=False" in repr(gen)


def test_generator_validates_app_id_up_front() -> None:
    with pytest.raises(ConfigurationError):
        LabelGenerator("")
    with pytest.raises(ConfigurationError, match="strict=True"):
        LabelGenerator("has space")
    assert DORIS_LABEL.match(LabelGenerator("has space", strict=True)(0, 0))


def test_generator_shortens_long_labels_without_warning() -> None:
    # Was: a truncation warning once per generator; shortened labels no longer collide.
    gen = LabelGenerator("p" * 200)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        labels = [gen(0, 0), gen(1, 1), gen(2, 2)]
    assert caught == []
    assert labels == [make_label("p" * 200, i, i) for i in range(3)] and len(set(labels)) == 3


def test_generator_validates_ids() -> None:
    with pytest.raises(ConfigurationError, match="partition id"):
        LabelGenerator("app")(0, -1)


# ---------------------------------------------------------------- issue #12 defect 11: long app ids must not collide
LONG_A = "hdfs://nn/checkpoints/team-a/" + "orders.v2/" * 20
LONG_B = "hdfs://nn/checkpoints/team-b/" + "orders.v2/" * 20  # same last 128 characters as LONG_A


@pytest.mark.parametrize("strict", [False, True])
def test_long_app_ids_sharing_their_tail_get_distinct_labels(strict: bool) -> None:
    assert LONG_A != LONG_B and LONG_A[-MAX_LABEL_LENGTH:] == LONG_B[-MAX_LABEL_LENGTH:]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing is cut without a digest, so nothing to warn about
        label_a, label_b = make_label(LONG_A, 3, 1, strict=strict), make_label(LONG_B, 3, 1, strict=strict)
    assert label_a != label_b
    assert LabelGenerator(LONG_A, strict=strict)(3, 1) != LabelGenerator(LONG_B, strict=strict)(3, 1)


@pytest.mark.parametrize("strict", [False, True])
def test_long_app_ids_differing_only_at_the_start_get_distinct_labels(strict: bool) -> None:
    apps = [f"{prefix}-" + "z" * 300 for prefix in ("a", "b", "c", "aa", "A")]
    labels = {make_label(app, b, p, strict=strict) for app in apps for b in (0, 7, 10**12) for p in (0, 1, 63)}
    assert len(labels) == len(apps) * 9


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("app", [LONG_A, "q" * 124, "q" * 125, "a//" * 100, "x" * 5000, "z" * 10**5])
def test_long_labels_are_valid_deterministic_and_within_the_cap(strict: bool, app: str) -> None:
    label = make_label(app, 123456, 17, strict=strict)
    assert DORIS_LABEL.match(label), label
    assert len(label) <= MAX_LABEL_LENGTH
    assert label == make_label(app, 123456, 17, strict=strict) == LabelGenerator(app, strict=strict)(123456, 17)
    assert label.endswith("_123456_17")


def test_long_app_id_with_refused_characters() -> None:
    app = "head-" + "é" * 200  # refused characters, whatever the length: strict=True replaces them
    with pytest.raises(ConfigurationError, match="strict=True"):
        make_label(app, 0, 0)
    with pytest.raises(ConfigurationError, match="strict=True"):
        LabelGenerator("my app " + "x" * 200)  # also when they would have been cut off
    label = make_label(app, 0, 0, strict=True)
    assert DORIS_LABEL.match(label) and label != make_label("head-" + "è" * 200, 0, 0, strict=True)


def test_long_default_labels_equal_strict_ones() -> None:
    for app in (LONG_A, "p" * 200, "a//" * 100):
        assert make_label(app, 31, 7) == make_label(app, 31, 7, strict=True)


def test_labels_that_fit_are_unchanged() -> None:
    """Labels already in users' Doris tables keep their exact value (pinned literals)."""
    assert make_label("app-1.orders", 5, 0) == "app_1_orders_5_0"
    app = "a" * (MAX_LABEL_LENGTH - len("_1_2"))
    assert make_label(app, 1, 2) == app + "_1_2" == make_label(app, 1, 2, strict=True)


def test_long_labels_are_pinned_across_versions() -> None:
    """A label is a stored identifier: this exact value must never change (sha256, not hash())."""
    assert make_label("p" * 200, 31, 7) == (
        "p" * 90 + "_cfe25c9c31133c49e5775ae5b19155a1_31_7")


def test_long_labels_are_the_same_in_other_processes_and_hash_seeds() -> None:
    code = ("import sys; from dstream_exactly_once.sinks._labels import make_label; "
            f"sys.stdout.write(make_label({LONG_A!r}, 5, 6))")
    outputs = set()
    for seed in ("0", "1", "4242"):
        env = dict(os.environ, PYTHONHASHSEED=seed, PYTHONPATH=ROOT)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        outputs.add(out.stdout)
    assert outputs == {make_label(LONG_A, 5, 6)}
