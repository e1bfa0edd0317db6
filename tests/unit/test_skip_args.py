"""``skip_batch``'s arguments are checked before any store is opened (a fresh SQLite path stays absent)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict

import pytest

from dstream_exactly_once import ConfigurationError, skip_batch


@pytest.mark.parametrize("batch_id, kwargs, word", [
    (True, {}, "batch_id"), (-1, {}, "batch_id"), ([], {}, "batch_id"), ("3", {}, "batch_id"),
    ([1.5], {}, "batch_id"), ([2, 2], {}, "more than once"),
    (1, {"reason": " "}, "reason"), (1, {"reason": "x" * 1001}, "1001 characters"), (1, {"reason": 5}, "reason"),
    (1, {"execute": "yes"}, "execute"), (1, {"force": 1}, "force"),
])
def test_bad_arguments_are_refused_before_the_store_is_opened(tmp_path: Path, batch_id: Any, kwargs: Dict[str, Any],
                                                              word: str) -> None:
    with pytest.raises(ConfigurationError, match=word):
        skip_batch(f"sqlite:///{tmp_path}/s.db", "app", batch_id, **kwargs)
    assert list(tmp_path.iterdir()) == []


def test_store_or_url_must_be_one_of_them() -> None:
    with pytest.raises(ConfigurationError, match="store_or_url"):
        skip_batch(42, "app", 1)  # type: ignore[arg-type]
