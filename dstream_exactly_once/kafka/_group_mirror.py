"""Committed offsets mirrored to a Kafka consumer group, for lag tools only, off the batch path.

An exactly-once stream keeps its offsets in the store; ``monitor_group`` additionally shows them in
a Kafka consumer group so standard lag tools (``kafka-consumer-groups.sh``, Burrow) see progress.
That group is never read back, so mirroring is best effort and must never slow or fail a batch:
:meth:`GroupMirror.offer` only records the newest offsets and wakes one background thread, which
commits them with a :class:`~dstream_exactly_once.RetryPolicy` (a new group's
coordinator may not be ready at the first try). Offsets offered while a commit runs are merged
(the highest per partition) and sent by the next one. A mirror that keeps failing logs a WARN line
per batch of offsets it gave up on and counts it in :attr:`GroupMirror.failures`.
"""

from __future__ import annotations

import functools
import logging
import threading
from typing import Any, Callable, Dict, Mapping, Optional

from ..core._retry import RetryPolicy
from ._offsets import TopicAndPartition

log = logging.getLogger(__name__)

__all__ = ["MIRROR_RETRY", "GroupCommitter", "GroupMirror"]

#: How long one set of offsets is retried: a few seconds, then the next commit's offsets take over.
MIRROR_RETRY = RetryPolicy(max_attempts=5, max_seconds=10.0, base_delay=0.5, max_delay=2.0)

Offsets = Dict[TopicAndPartition, int]


class GroupMirror:
    """Commits offered offsets to consumer group ``group`` from a background thread.

    ``commit(offsets)`` does one commit (raising a library error whose ``retriable`` flag says
    whether to try again); ``close_client()`` releases what ``commit`` opened and is called by
    :meth:`close` on the mirror's own thread.
    """

    def __init__(self, group: str, commit: Callable[[Offsets], None],
                 close_client: Callable[[], None] = lambda: None, policy: RetryPolicy = MIRROR_RETRY) -> None:
        self.group = group
        self.failures = 0
        self.mirrored = 0
        self._commit = commit
        self._close_client = close_client
        self._policy = policy
        self._cond = threading.Condition()
        self._pending: Offsets = {}
        self._busy = False
        self._closed = False
        self._thread: Optional[threading.Thread] = None

    def offer(self, offsets: Mapping[TopicAndPartition, int]) -> None:
        """Mirror ``offsets`` soon (returns at once); ignored after :meth:`close`."""
        with self._cond:
            if self._closed:
                return
            for tp, off in offsets.items():
                if off > self._pending.get(tp, -1):
                    self._pending[tp] = off
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=f"dstream-eo-mirror-{self.group}",
                                                daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def flush(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds until everything offered was mirrored (or given up on)."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._pending and not self._busy, timeout)

    def close(self, timeout: float = 5.0) -> None:
        """Mirror what is pending (waiting at most ``timeout`` seconds), then stop; safe to call twice."""
        self.flush(timeout)
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            thread = self._thread
        if thread is None:
            self._close_client()
        elif thread is not threading.current_thread():
            thread.join(timeout)

    def _run(self) -> None:
        try:
            while True:
                with self._cond:
                    self._cond.wait_for(lambda: self._pending or self._closed)
                    if not self._pending:
                        return
                    offsets, self._pending = self._pending, {}
                    self._busy = True
                try:
                    self._policy.call(functools.partial(self._commit, offsets),
                                      f"mirroring offsets to group {self.group!r}")
                    self.mirrored += 1
                except Exception as exc:  # noqa: BLE001 - monitoring must never fail the stream
                    self.failures += 1
                    log.warning("could not mirror offsets to consumer group %r (monitoring only; the store "
                                "holds the stream's offsets): %s", self.group, exc)
                finally:
                    with self._cond:
                        self._busy = False
                        self._cond.notify_all()
        finally:
            self._close_client()


class GroupCommitter:
    """``commit(offsets)`` for :class:`GroupMirror`: commits through a metadata client made by
    ``open_client()`` (with ``mirror_group_offsets(group, offsets)`` and ``close()``), and replaces
    the client after any failure: kafka-python's admin client keeps a failed coordinator look-up
    (a new group's first commit), and later commits through it report success and commit nothing.
    """

    def __init__(self, group: str, open_client: Callable[[], Any]) -> None:
        self.group = group
        self._open_client = open_client
        self._client: Any = None
        self.opened = 0

    def __call__(self, offsets: Offsets) -> None:
        client = self._client
        if client is None:
            client = self._client = self._open_client()
            self.opened += 1
        try:
            client.mirror_group_offsets(self.group, offsets)
        except Exception:
            self.close()
            raise

    def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            client.close()
