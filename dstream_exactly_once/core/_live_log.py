"""The live log behind a range kind's positions, as operator tools see it (``dstream-eo offsets``).

The store holds positions; where the log they point into starts and ends now, which stream
partitions it has and which position a record time falls on are the source's to answer (Kafka: the
broker). A source registers an opener for its range kind (:func:`register_live_log`) when its package
is imported; the CLI opens it by kind (:func:`open_live_log`) with the operator's connection
settings and never imports the source. Everything is addressed by position key, as the store names
stream partitions. Nothing here imports a source or Spark.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ..errors import ConfigurationError

__all__ = ["LiveLog", "live_log_kinds", "open_live_log", "register_live_log"]


class LiveLog(ABC):
    """The live log of one range kind, reached with an operator's connection settings. Reading only;
    :meth:`close` releases its clients (safe to call twice)."""

    #: The range kind whose positions this log holds (``SourceRange.kind``).
    kind: str = ""

    @property
    @abstractmethod
    def where(self) -> str:
        """Where the log lives, as messages and reports name it (Kafka: the bootstrap servers)."""

    @abstractmethod
    def stream_partitions(self, groups: Sequence[str]) -> Dict[str, Dict[int, str]]:
        """``{group: {partition number: position key}}`` of every stream partition of each of
        ``groups`` (Kafka: a topic's partitions). A group the log does not have raises
        :class:`~dstream_exactly_once.errors.ConfigurationError` naming it and :attr:`where`."""

    @abstractmethod
    def ends(self, keys: Sequence[str]) -> Tuple[Dict[str, int], Dict[str, int]]:
        """``(earliest, latest)``: the first position still in the log and the next position to be
        written, of each of ``keys``."""

    @abstractmethod
    def positions_at(self, keys: Sequence[str], time_ms: int) -> Dict[str, Optional[int]]:
        """The first position of each of ``keys`` whose record time is at or after ``time_ms``
        (milliseconds since 1970), ``None`` where no record is that new."""

    @abstractmethod
    def close(self) -> None:
        """Release the clients of this log."""


#: an opener: the operator's connection settings (a JSON object) → the live log
Opener = Callable[[Mapping[str, Any]], LiveLog]

_OPENERS: Dict[str, Opener] = {}


def register_live_log(kind: str, opener: Opener) -> None:
    """Register ``opener`` as the way to the live log of range kind ``kind`` (re-registering replaces)."""
    if not isinstance(kind, str) or not kind:
        raise ConfigurationError(f"a live log needs a non-empty str range kind, got {kind!r}")
    _OPENERS[kind] = opener


def live_log_kinds() -> List[str]:
    """The range kinds with a registered live log, sorted."""
    return sorted(_OPENERS)


def open_live_log(kind: str, settings: Mapping[str, Any]) -> LiveLog:
    """The live log of range kind ``kind``, opened with ``settings`` (the source checks them)."""
    opener = _OPENERS.get(kind)
    if opener is None:
        raise ConfigurationError(f"no live log is registered for range kind {kind!r}; kinds with one: "
                                 f"{live_log_kinds() or '(none)'} (is the source's package installed and imported?)")
    return opener(settings)
