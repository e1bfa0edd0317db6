"""``--shard I/N`` (tests/conftest.py): whole files, every file in exactly one shard, balanced."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.conftest import SHARD_SECONDS, _shard


class Item:
    def __init__(self, path: str, slow: bool = True) -> None:
        self.path, self.slow = Path(path), slow

    def get_closest_marker(self, name: str):
        return object() if name == "slow" and self.slow else None


def config(spec):
    deselected = []
    hook = SimpleNamespace(pytest_deselected=lambda items: deselected.extend(items))
    return SimpleNamespace(getoption=lambda name: spec, hook=hook), deselected


def items():
    heavy = list(SHARD_SECONDS)[:4]
    return ([Item(f"tests/integration/{name}") for name in heavy for _ in range(2)]
            + [Item(f"tests/integration/test_light_{i}.py") for i in range(5)] + [Item("tests/unit/test_x.py", False)])


def test_every_file_runs_in_exactly_one_shard_and_the_shards_are_balanced():
    every = items()
    kept = []
    for i in (1, 2):
        mine = list(every)
        cfg, dropped = config(f"{i}/2")
        _shard(cfg, mine)
        assert len(mine) + len(dropped) == len(every)
        kept.append(mine)
    assert sorted(map(id, kept[0] + kept[1])) == sorted(map(id, every))
    for a in kept[0]:
        assert all(a.path != b.path for b in kept[1])  # a file is never split
    load = [sum(SHARD_SECONDS.get(p, 20.0) for p in {it.path.name for it in part if it.slow}) for part in kept]
    assert max(load) <= 1.5 * min(load), load


@pytest.mark.parametrize("spec", ["0/2", "3/2", "x", "1/0"])
def test_a_bad_shard_is_refused(spec):
    cfg, _ = config(spec)
    with pytest.raises(pytest.UsageError, match="--shard must be I/N"):
        _shard(cfg, items())
