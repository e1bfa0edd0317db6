"""Retiring the partitions of a source that stores no positions (a direct stream).

With a store, the committer deletes a retired partition's stored position in a commit once no batch
kept in the offset log reads it (:meth:`~.committer.BatchCommitter.position_drops`). A direct stream
has no store and no offset log: its batches are self-contained ranges, so nothing it replays needs
the planner's record of a partition it will never read again. :class:`RetiredPartitions` lets such a
source forget a retired partition once it has stayed retired for ``grace_batches`` planned batches,
so a rotating log's identities stay bounded by the files present plus those retired within the
grace, however long the stream runs. During the grace a partition that comes back (a file that
reappears under the pattern) continues where it stopped.
"""

from __future__ import annotations

from typing import Dict, List

from ..errors import ConfigurationError
from ._source import BatchSource

__all__ = ["DIRECT_GRACE_BATCHES", "RetiredPartitions"]

#: Planned batches a direct stream keeps a retired partition before forgetting it.
DIRECT_GRACE_BATCHES = 3


class RetiredPartitions:
    """Forgets ``source``'s retired partitions (:meth:`BatchSource.retired_positions`) ``grace_batches``
    planned batches after they were first retired (:meth:`BatchSource.forget_positions`).

    Call :meth:`after_plan` once after each ``source.plan(time)``, on the thread that plans.
    """

    def __init__(self, source: BatchSource, grace_batches: int = DIRECT_GRACE_BATCHES) -> None:
        if isinstance(grace_batches, bool) or not isinstance(grace_batches, int) or grace_batches < 0:
            raise ConfigurationError(f"grace_batches must be an int >= 0, got {grace_batches!r}")
        self.source = source
        self.grace_batches = grace_batches
        self._planned = 0
        self._since: Dict[str, int] = {}  # retired key -> the planned batch that first found it retired
        self.forgotten = 0  #: partitions forgotten so far

    def after_plan(self) -> List[str]:
        """Forget the partitions retired for ``grace_batches`` batches; returns their keys."""
        self._planned += 1
        retired = set(self.source.retired_positions())
        self._since = {k: self._since.get(k, self._planned) for k in retired}  # one that came back leaves
        due = sorted(k for k, since in self._since.items() if self._planned - since >= self.grace_batches)
        if due:
            self.source.forget_positions(due)
            for k in due:
                del self._since[k]
            self.forgotten += len(due)
        return due

    def pending(self) -> int:
        """Retired partitions still within their grace."""
        return len(self._since)
