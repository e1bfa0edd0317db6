"""The committer's launch (engine/_committer.py): it opens the store it was given as a URL, checks the
source against it read-only, and on failure closes what it opened and leaves the store exactly as it was."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List

import pytest

from dstream_exactly_once.core._retry import NO_RETRY
from dstream_exactly_once.engine import _committer as committer_module
from dstream_exactly_once.engine._committer import BatchCommitter
from dstream_exactly_once.errors import ConfigurationError, DStreamExactlyOnceError
from dstream_exactly_once.stores import open_store
from dstream_exactly_once.stores.sql._sqlite import SQLiteStore

from .test_core import CountingSource


def files(tmp_path: Path) -> Dict[str, bytes]:
    """The store's content: the database file and its write-ahead log (a read-only connection may
    leave an empty log and the shared-memory index behind; neither holds data)."""
    out = {p.name: p.read_bytes() for p in sorted(tmp_path.iterdir()) if not p.name.endswith("-shm")}
    return {name: data for name, data in out.items() if data or not name.endswith("-wal")}


@pytest.fixture
def opened(monkeypatch: Any) -> List[SQLiteStore]:
    """Every store the committer opens, in order (it opens a URL through ``store_or_open``)."""
    stores: List[SQLiteStore] = []
    real = committer_module.store_or_open

    def recording(store: object, app_id: object) -> Any:
        stores.append(real(store, app_id))
        return stores[-1]

    monkeypatch.setattr(committer_module, "store_or_open", recording)
    return stores


def test_failed_launch_from_a_url_closes_the_store_and_the_source(tmp_path: Path, opened: List[SQLiteStore]) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    with open_store(url, "app") as st:
        st.start_epoch()
    before = files(tmp_path)
    closed: List[str] = []
    with pytest.raises(ConfigurationError, match="topic 'numbrs' does not exist"):
        BatchCommitter(url, CountingSource(valid=False), app_id="app", start=False,
                       retain_batches=10, retry=NO_RETRY,
                       close_source=lambda: closed.append("source"))
    assert closed == ["source"]
    assert len(opened) == 1 and opened[0]._conn is None  # closed: it was opened here
    assert files(tmp_path) == before


def test_failed_launch_on_an_opened_store_leaves_it_open(tmp_path: Path) -> None:
    with open_store(f"sqlite:///{tmp_path / 'state.db'}", "app") as st:
        epoch = st.start_epoch()
        with pytest.raises(ConfigurationError):
            BatchCommitter(st, CountingSource(valid=False), app_id="app", start=False,
                           retain_batches=10, retry=NO_RETRY)
        assert st.current_epoch() == epoch and st._conn is not None  # the caller's store, still usable
        with pytest.raises(ConfigurationError, match="app_id 'other' differs"):
            BatchCommitter(st, CountingSource(), app_id="other", start=False,
                           retain_batches=10, retry=NO_RETRY)


def test_bad_app_id_with_a_url_creates_no_file(tmp_path: Path) -> None:
    path = tmp_path / "fresh.db"
    with pytest.raises(ConfigurationError, match=r"app_id must be 1 to 200 characters .* got None"):
        BatchCommitter(f"sqlite:///{path}", CountingSource(), app_id=None, start=False,
                       retain_batches=10, retry=NO_RETRY)
    assert not path.exists()


def test_a_launch_that_succeeds_takes_the_epoch_only_when_started(tmp_path: Path) -> None:
    """The committer of a successful launch has written nothing (no file) until start() takes the
    epoch; start() is idempotent."""
    path = tmp_path / "state.db"
    committer = BatchCommitter(f"sqlite:///{path}", CountingSource(), app_id="app", start=False,
                               retain_batches=10, retry=NO_RETRY)
    try:
        assert not path.exists() and not committer.started
        with pytest.raises(DStreamExactlyOnceError, match="has not taken its epoch yet"):
            committer.epoch  # noqa: B018 - the property raises
        assert committer.start() == 1 == committer.epoch == committer.start()
        with open_store(f"sqlite:///{path}", "app") as st:
            assert st.current_epoch() == 1
    finally:
        committer.store.close()


def test_a_failed_start_closes_what_the_launch_opened(tmp_path: Path, monkeypatch: Any,
                                                     opened: List[SQLiteStore]) -> None:
    """With ``start`` (the default) the epoch is taken in the constructor; when that fails, the store
    opened from the URL is closed and the source is closed too, as for a failure before it."""
    from dstream_exactly_once.errors import StoreError

    def refuse(self: SQLiteStore) -> int:
        raise StoreError("no epoch today")

    monkeypatch.setattr(SQLiteStore, "start_epoch", refuse)
    closed: List[str] = []
    with pytest.raises(StoreError, match="no epoch today"):
        BatchCommitter(f"sqlite:///{tmp_path / 'state.db'}", CountingSource(), app_id="app", retain_batches=10,
                       retry=NO_RETRY, close_source=lambda: closed.append("source"))
    assert closed == ["source"]
    assert len(opened) == 1 and opened[0]._conn is None


def test_a_committer_whose_launch_failed_still_has_a_repr(tmp_path: Path) -> None:
    """A traceback that shows its frames' locals (pytest --showlocals, error trackers) calls repr() on
    the half-built committer."""
    with pytest.raises(ConfigurationError) as info:
        BatchCommitter(f"sqlite:///{tmp_path / 'x.db'}", CountingSource(), app_id=None, start=False)
    tb = info.value.__traceback__
    selves = []
    while tb is not None:
        if isinstance(tb.tb_frame.f_locals.get("self"), BatchCommitter):
            selves.append(tb.tb_frame.f_locals["self"])
        tb = tb.tb_next
    assert selves and repr(selves[0]) == "BatchCommitter(store=None, epoch=None, next_batch_id=0)"
