"""``Writes``: increments kept per namespace, seen through a read-only (namespace, key) view."""

from __future__ import annotations

import pickle

import pytest

from dstream_exactly_once.errors import ConfigurationError
from dstream_exactly_once.stores import Writes
from dstream_exactly_once.stores._value_codec import split_increments


def test_increments_view_reads_like_the_flat_dict_it_replaces():
    w = Writes().incr("a", "x", 2).incr("b", "y").incr("a", "x", 3).incr("a", "z", 0.5)
    assert dict(w.increments) == {("a", "x"): 5, ("b", "y"): 1, ("a", "z"): 0.5}
    assert len(w.increments) == 3 and ("a", "x") in w.increments and ("a", "q") not in w.increments
    assert w.increments.get("not a pair") is None and "ab" not in w.increments and 7 not in w.increments
    with pytest.raises(KeyError):
        w.increments[("zz", "x")]
    with pytest.raises(TypeError):
        w.increments[("a", "x")] = 1  # type: ignore[index]


def test_counters_are_handed_over_only_while_every_total_is_a_64_bit_int():
    w = Writes().incr("a", "x", 2).incr("b", "y", -3)
    assert w.counters() == {"a": {"x": 2}, "b": {"y": -3}}
    assert split_increments(w) == ({"a": {"x": 2}, "b": {"y": -3}}, [])
    assert Writes().incr("a", "x", 0.5).counters() is None  # a float: the checked path
    big = Writes().incr("a", "x", 2**63 - 1).incr("a", "x", 1)  # the total leaves 64 bits
    assert big.counters() is None
    with pytest.raises(ConfigurationError, match="64-bit"):
        split_increments(big)


def test_constructor_copy_equality_and_pickling_keep_everything():
    w = Writes({("a", "x"): 2}, puts={("p", "k"): "[1]"}, batch_rows={"r": ["{}"]}, labels=["L"])
    assert w == Writes().incr("a", "x", 2).put("p", "k", [1]).put_batch_rows("r", [{}]).add_label("L")
    c = w.copy()
    c.incr("a", "x")
    assert w.increments[("a", "x")] == 2 and c.increments[("a", "x")] == 3 and c != w
    assert pickle.loads(pickle.dumps(w)) == w
    assert not Writes() and Writes().incr("a", "x")
    with pytest.raises(ConfigurationError):
        Writes({("a", "x"): "1"})  # type: ignore[dict-item]
