"""The source plug-in contract: what the exactly-once core needs from a source.

A source is a replayable log cut into explicit ranges on the driver and read range by range on
the executors (the shape of bytewax's ``list_parts``/``build_part``):

- :class:`BatchSource` — the driver side: resume from stored positions (and validate everything
  against the live source before anything is written), plan each batch's ranges, skip past replayed
  ranges, hooks after a commit, and close.
- :class:`RangeReader` — the executor side: a picklable callable that reads one range, a piece of
  one, or a planned task's pieces (:mod:`._tasks`).
- Position encoding — the source's :class:`~dstream_exactly_once.core._ranges.SourceRange` type
  (position key, ``[start, end)``, an optional document stored beside the position).

:data:`CONTRACT` lists every member of the three, in one place (a unit test holds the classes to it).
What is only shown to people — how progress records group a kind's positions, what ``dstream-eo
offsets`` prints of them — is not part of it: a source registers that per range kind as a
:class:`~dstream_exactly_once.core._range_display.RangeDisplay`, beside its live log
(:mod:`~dstream_exactly_once.core._live_log`, what operator tools ask of the live source).

Kafka (``kafka/_source.py``, ``kafka/_range_reader.py``) and append-only files (``files/_planner.py``,
``files/_reader.py``) implement it; the committer, batch log and stores only ever see these
interfaces. Nothing here imports Spark.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from datetime import datetime
from itertools import chain
from typing import Any, Collection, Dict, Iterable, List, Mapping, Sequence, Tuple

from ._ranges import Position, SourceRange
from ._tasks import Piece

__all__ = ["CONTRACT", "BatchSource", "RangeReader"]

#: The source contract: the public members of each piece (optional hooks have defaults).
CONTRACT: Dict[str, Tuple[str, ...]] = {
    # a range's identity and positions, its offset-log encoding, and the words messages use
    "SourceRange": ("kind", "position_key", "start", "end", "count", "position_meta", "to_json_obj",
                    "from_json_obj", "encode_many", "decode_many", "parse_position_key", "counts_records",
                    "legacy_list_encoding", "describe", "position_unit", "start_name", "end_name",
                    "reanchor_position"),
    # the driver side: resume, plan, replay, commit hooks, retirement, metrics, close
    "BatchSource": ("kind", "describe", "start", "advance", "plan", "reader", "after_commit",
                    "retired_positions", "forget_positions", "latest_positions", "data_loss_unit",
                    "data_loss_option", "data_loss_skips", "event_counters", "close"),
    # the executor side: a range, a piece of one, a planned task's pieces
    "RangeReader": ("read", "can_split", "read_part", "reads_pieces_together", "read_pieces"),
}


class RangeReader(ABC):
    """Reads one range on an executor. Instances are pickled into Spark tasks, so they hold only
    configuration (no open connections or files); per-process resources are opened lazily.

    Reading is deterministic: the same range yields the same records every time it is read (task
    retries and replayed batches rely on it), or raises.
    """

    @abstractmethod
    def read(self, r: SourceRange) -> Iterable[Any]:
        """The records of ``r``, in position order."""

    def can_split(self, r: SourceRange) -> bool:
        """Whether :meth:`read_part` can read ``r`` in pieces (default: no)."""
        return False

    def read_part(self, r: SourceRange, start: int, end: int) -> Iterable[Any]:
        """The records of the piece ``[start, end)`` of ``r`` (only called when :meth:`can_split`
        allows it, or for the whole range). Reading every piece of a range yields the records of
        :meth:`read` once each, in order."""
        if (start, end) == (r.start, r.end):
            return self.read(r)
        raise NotImplementedError(f"{type(self).__name__} cannot read a piece of {r.describe()}")

    #: Whether :meth:`read_pieces` reads a task's pieces together (one client for all of them);
    #: otherwise the Spark glue reads them one after the other with :meth:`read`/:meth:`read_part`.
    reads_pieces_together: bool = False

    def read_pieces(self, pieces: Sequence[Piece]) -> Iterable[Any]:
        """The records of a planned task's ``pieces``, piece after piece, each in position order
        (default: each piece read on its own)."""
        return chain.from_iterable(self.read(p.range) if p.whole else self.read_part(p.range, p.start, p.end)
                                   for p in pieces)


class BatchSource(ABC):
    """The driver side of a source. Lifecycle::

        start(positions) -> ( plan(time) | advance(replayed ranges) )* -> close()

    ``start`` is called before the exactly-once committer takes its epoch: it must check
    everything that can be wrong with the user's input against the live source and raise a
    :class:`~dstream_exactly_once.errors.ConfigurationError` (or a more precise library error)
    without writing anything anywhere. It may be called a second time, with fresher positions, if
    the store changed between the check and the epoch.
    """

    #: Range kind this source plans (``SourceRange.kind``).
    kind: str = ""

    #: What :meth:`data_loss_skips` counts: ``offsets`` (Kafka) or ``bytes`` (files).
    data_loss_unit: str = "offsets"

    #: How a user chooses this source's skip data-loss policy (named in data-loss errors).
    data_loss_option: str = "the source's skip data-loss policy"

    @abstractmethod
    def describe(self) -> str:
        """One line naming what is read (topics, a path pattern), for messages and progress."""

    @abstractmethod
    def start(self, positions: Mapping[str, Position]) -> None:
        """Resume after ``positions`` (``{position_key: Position}`` committed in the store; empty on a
        first start, when the source's own starting policy applies) and validate the input."""

    @abstractmethod
    def advance(self, ranges: Sequence[SourceRange]) -> None:
        """Later plans start where ``ranges`` end (the ranges of batches replayed from the offset log)."""

    @abstractmethod
    def plan(self, time: datetime) -> List[SourceRange]:
        """The ranges of the batch at ``time`` (at most one per stream partition; may be empty or all
        empty) and advance past them."""

    @abstractmethod
    def reader(self) -> RangeReader:
        """The executor-side reader of this source's ranges."""

    def after_commit(self, ranges: Sequence[SourceRange]) -> None:  # noqa: B027 - optional hook
        """Called on the driver after a batch's ranges committed (e.g. mirror offsets for monitoring).
        Must not raise for anything short of a bug: the commit has happened."""

    def retired_positions(self) -> Collection[str]:
        """Position keys of stream partitions this source will never read again (for files: a file
        gone after being read to its end, or whose unread bytes were reported lost). The committer
        deletes their stored positions in a commit once no batch kept in the offset log reads them,
        then calls :meth:`forget_positions`; until then the source keeps them. Default: none."""
        return ()

    def forget_positions(self, keys: Collection[str]) -> None:  # noqa: B027 - optional hook
        """The stored positions of ``keys`` (from :meth:`retired_positions`) were deleted by a commit:
        drop every trace of them; a key is never planned again."""

    def latest_positions(self) -> Mapping[str, int]:
        """The newest position of each stream partition the source knows (for lag); empty if unknown."""
        return {}

    def data_loss_skips(self) -> int:
        """Positions the driver skipped so far because the data was gone under a skip data-loss policy
        (losses found while reading are reported by the reader); 0 if none."""
        return 0

    def event_counters(self) -> Mapping[str, int]:
        """Counts of events the source reported (e.g. files skipped as unreadable), published in each
        progress record's ``sources[0].metrics``; empty if none."""
        return {}

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release driver-side resources (clients, file handles); safe to call twice."""
