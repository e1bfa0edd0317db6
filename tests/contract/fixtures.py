"""The fixtures every contract suite shares; each backend's subclass gives ``store_url``."""

from __future__ import annotations

from typing import Iterator

import pytest

from dstream_exactly_once.stores import TransactionalStore, open_store


class ContractFixtures:
    """``store_url`` (per backend), ``store`` (the test's app, opened and closed around the test) and
    ``epoch`` (one taken on it)."""

    @pytest.fixture
    def store_url(self) -> str:
        raise NotImplementedError

    @pytest.fixture
    def store(self, store_url: str, app_id: str) -> Iterator[TransactionalStore]:
        s = open_store(store_url, app_id)
        yield s
        s.close()

    @pytest.fixture
    def epoch(self, store: TransactionalStore) -> int:
        return store.start_epoch()
