"""Opening the store and building the committer for a stream factory, with one cleanup policy.

``exactly_once()``, ``KafkaUtils.createExactlyOnceStream`` and
``FileUtils.createExactlyOnceFileStream`` all end the same way: open the store they were given (a
URL, opened read-only here, or an opened store), then build the
:class:`~dstream_exactly_once.engine._committer.BatchCommitter`, which checks the stored positions
against the source without writing. :func:`open_committer` does both; when either step fails it
closes what it opened (the store when it opened it from a URL, and the source when the caller hands
over ``close_source``) and re-raises the error unchanged. The epoch — the first write — is taken
only when the StreamingContext starts (:class:`~._exactly_once.ExactlyOnceDStream` arranges it), so
a launch refused at the factory or at an output call leaves the store exactly as it was and fences
no running driver.
"""

from __future__ import annotations

import logging
from typing import Callable, Optional

from ..core._retry import RetryPolicy
from ..core._source import BatchSource
from ..engine._committer import BatchCommitter
from ..errors import ConfigurationError
from ..stores import open_store
from ..stores._base import TransactionalStore

log = logging.getLogger(__name__)

__all__ = ["open_committer", "open_store_arg"]


def open_store_arg(store: object, app_id: object) -> TransactionalStore:
    """The store a stream factory was given: a URL (with ``app_id``) opened now, or an opened store."""
    if isinstance(store, str):
        return open_store(store, app_id)  # type: ignore[arg-type]  # checked there; read-only until the epoch
    if isinstance(store, TransactionalStore):
        if app_id is not None and app_id != store.app_id:
            raise ConfigurationError(f"app_id {app_id!r} differs from the opened store's app_id {store.app_id!r}")
        return store
    raise ConfigurationError(f"store must be a store URL (sqlite:///…, postgresql://…, redis://…) or a "
                             f"TransactionalStore, got {store!r}")


def open_committer(store: object, app_id: object, source: BatchSource, *, retain_batches: int,
                   retry: RetryPolicy, close_source: Optional[Callable[[], None]] = None,
                   check: Optional[Callable[[TransactionalStore], None]] = None,
                   catch_up: bool = False) -> BatchCommitter:
    """The committer of ``source`` over ``store`` (see :func:`open_store_arg`); ``check(store)`` reads
    the opened store and may refuse the launch before anything is written. ``catch_up``: see
    :attr:`BatchCommitter.catch_up`.

    On any failure the store is closed if it was opened here from a URL (a store the caller
    passed opened stays open: it is the caller's), ``close_source`` is called, and the error is
    raised unchanged. Nothing is written to the store here: the committer takes its epoch in
    :meth:`~dstream_exactly_once.engine._committer.BatchCommitter.start`.
    """
    opened: Optional[TransactionalStore] = None
    try:
        opened = open_store_arg(store, app_id)
        if check is not None:
            check(opened)
        return BatchCommitter(opened, source, retain_batches=retain_batches, retry=retry, start=False,
                              catch_up=catch_up)
    except BaseException:
        if opened is not None and isinstance(store, str):
            _quietly(opened.close, "closing the store of a failed launch")
        if close_source is not None:
            _quietly(close_source, "closing the source of a failed launch")
        raise


def _quietly(close: Callable[[], None], what: str) -> None:
    """``close()``; its own error is logged, never raised over the launch's error."""
    try:
        close()
    except Exception:  # noqa: BLE001 - the launch's error is the one the caller needs
        log.warning("%s failed", what, exc_info=True)
