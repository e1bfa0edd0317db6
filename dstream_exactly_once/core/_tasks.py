"""The task planner: how a batch's ranges become Spark tasks, for every source.

A PySpark task costs tens of milliseconds whatever it reads, so one task per range makes a batch
cost what it *spans* (partitions, files) instead of what its data costs. The planner sits between a
source's planned ranges and the RDD and only shapes tasks; the batch, the offset log, the commits and
``offsetRanges()`` still see every range:

- an **empty** range (``start == end``) becomes no task;
- a range larger than the **split size** is cut into pieces of one batch, each read by its own
  task, when its reader can split it (:meth:`~._source.RangeReader.can_split`: Kafka ranges by
  offsets; uncompressed files by bytes, the reader finishing lines across piece boundaries;
  compressed files never);
- small ranges (and pieces) are **packed** in batch order into tasks of up to the **target size**,
  a size that aims at the **target task count** (``ceil(total / count)``); a range or piece larger
  than the target size is a task of its own;
- a range that names a **host** (a node-local file) is packed only with ranges of the same host,
  and its task keeps that host as its preferred location.

Sizes come from the ranges (:meth:`~._ranges.SourceRange.count`: records for Kafka, bytes for
files). The plan is a pure function of the ranges and :class:`TaskOptions` (no clock, no
randomness): the same ranges make the same tasks, so a replayed batch reads the same way.
Nothing here imports Spark; the Spark glue turns each :data:`Task` into one RDD partition.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, FrozenSet, List, Mapping, Optional, Sequence, Tuple

from .._checks import is_int
from ..errors import ConfigurationError
from ._ranges import SourceRange

__all__ = [
    "SPLIT_SIZE",
    "TARGET_COUNT",
    "TARGET_SIZE",
    "TASK_OPTIONS",
    "Piece",
    "Task",
    "TaskOptions",
    "one_task_per_range",
    "plan_tasks",
    "task_hosts",
    "task_size",
]

#: Option: the number of tasks a batch aims at (default: ``sc.defaultParallelism``).
TARGET_COUNT = "tasks.target.count"
#: Option: the most a packed task reads, in the source's unit (default: the batch's total size
#: divided by the target task count, rounded up).
TARGET_SIZE = "tasks.target.size"
#: Option: a range larger than this is split into pieces of at most this size (``0``: never split;
#: default: the target size, but not below the source's own floor).
SPLIT_SIZE = "tasks.split.size"

TASK_OPTIONS = (TARGET_COUNT, TARGET_SIZE, SPLIT_SIZE)


@dataclass(frozen=True)
class Piece:
    """Positions ``[start, end)`` of the batch's range number ``index`` (``range``); the whole range
    when :attr:`whole`."""

    index: int
    range: SourceRange
    start: int
    end: int

    @property
    def whole(self) -> bool:
        return self.start == self.range.start and self.end == self.range.end

    @property
    def size(self) -> int:
        return self.end - self.start

    def describe(self) -> str:
        if self.whole:
            return self.range.describe()
        return f"{self.range.describe()} piece [{self.start} -> {self.end})"


#: One Spark task: the pieces it reads, in order.
Task = Tuple[Piece, ...]


def task_size(task: Task) -> int:
    """What ``task`` reads, in the source's unit."""
    return sum(p.size for p in task)


@dataclass(frozen=True)
class TaskOptions:
    """How a batch's ranges become tasks (see the module docstring).

    ``target_count`` (>= 1), ``target_size`` (>= 1) and ``split_size`` (>= 0, ``0`` never splits) are
    ``None`` for their defaults; ``pack=False`` gives every non-empty range a task of its own and
    ``split=False`` never splits (both are set by output patterns that commit per task, not by users);
    ranges of the position keys in ``skip`` get no task (a replay's ranges an earlier attempt committed).
    """

    target_count: Optional[int] = None
    target_size: Optional[int] = None
    split_size: Optional[int] = None
    pack: bool = True
    split: bool = True
    skip: FrozenSet[str] = frozenset()

    def __post_init__(self) -> None:
        for name, low in (("target_count", 1), ("target_size", 1), ("split_size", 0)):
            value = getattr(self, name)
            if value is not None and (not is_int(value) or value < low):
                raise ConfigurationError(f"TaskOptions {name} must be an int >= {low} or None, got {value!r}")

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any], where: str = "option") -> TaskOptions:
        """The task options among ``options`` (``tasks.target.count``, ``tasks.target.size``,
        ``tasks.split.size``; ints or decimal strings); other keys are ignored."""
        values: Dict[str, Optional[int]] = {}
        for key, low in ((TARGET_COUNT, 1), (TARGET_SIZE, 1), (SPLIT_SIZE, 0)):
            raw = options.get(key)
            if raw is None:
                values[key] = None
                continue
            value: Any = raw.strip() if isinstance(raw, str) else raw
            if isinstance(value, str) and value.isdigit():
                value = int(value)
            if not is_int(value) or value < low:
                allowed = "0 (never split) or a size in the source's unit" if low == 0 else f"an int >= {low}"
                raise ConfigurationError(f"{where} {key!r} must be {allowed}, got {raw!r}")
            values[key] = value
        return cls(values[TARGET_COUNT], values[TARGET_SIZE], values[SPLIT_SIZE])

    def with_shape(self, *, pack: bool, split: bool) -> TaskOptions:
        """These options with packing/splitting turned off where an output pattern needs it."""
        return TaskOptions(self.target_count, self.target_size, self.split_size, self.pack and pack,
                           self.split and split, self.skip)

    def skipping(self, keys: FrozenSet[str]) -> TaskOptions:
        """These options, giving no task to the ranges of the position keys ``keys``."""
        return TaskOptions(self.target_count, self.target_size, self.split_size, self.pack, self.split,
                           self.skip | keys)


def one_task_per_range(ranges: Sequence[SourceRange]) -> List[Task]:
    """Every range its own task, empty ones included: partition ``i`` reads ``ranges[i]`` (the
    Spark-2.4 ``HasOffsetRanges`` layout)."""
    return [(Piece(i, r, r.start, r.end),) for i, r in enumerate(ranges)]


def plan_tasks(ranges: Sequence[SourceRange], options: TaskOptions, *, parallelism: int = 1,
               can_split: Callable[[SourceRange], bool] = lambda r: True,
               host_of: Callable[[SourceRange], Optional[str]] = lambda r: None,
               split_floor: int = 1) -> List[Task]:
    """The tasks that read ``ranges`` (see the module docstring).

    ``parallelism`` is the default target task count (``sc.defaultParallelism``); ``can_split`` says
    which ranges the reader can cut; ``host_of`` names the host a range must be read on (``None``:
    any); ``split_floor`` is the smallest default split size (a source's own floor: splitting below
    it costs more than it saves). Every position of every non-empty range is read by exactly one
    piece; the tasks keep batch order (by their first piece).
    """
    live = [(i, r) for i, r in enumerate(ranges) if r.count() > 0 and r.position_key not in options.skip]
    if not live:
        return []
    if not options.pack and not options.split:
        return [(Piece(i, r, r.start, r.end),) for i, r in live]
    total = sum(r.count() for _, r in live)
    count = options.target_count if options.target_count is not None else max(1, parallelism)
    target = options.target_size if options.target_size is not None else max(1, -(-total // count))
    split_size = 0
    if options.split:
        split_size = options.split_size if options.split_size is not None else max(target, split_floor)
    pieces: List[Piece] = []
    for i, r in live:
        pieces.extend(_split(i, r, split_size if split_size and can_split(r) else 0))
    if not options.pack:
        return [(p,) for p in pieces]
    open_tasks: Dict[Optional[str], List[Piece]] = {}
    done: List[List[Piece]] = []
    for p in pieces:
        host = host_of(p.range)
        current = open_tasks.get(host)
        if current is not None and sum(q.size for q in current) + p.size > target:
            done.append(current)
            current = None
        if current is None:
            current = open_tasks[host] = []
        current.append(p)
    done.extend(open_tasks.values())
    done.sort(key=lambda t: (t[0].index, t[0].start))
    return [tuple(t) for t in done]


def _split(index: int, r: SourceRange, split_size: int) -> List[Piece]:
    """``r`` as pieces of at most ``split_size`` (equal sizes, the first ones one larger; ``0``: whole)."""
    size = r.count()
    if not split_size or size <= split_size:
        return [Piece(index, r, r.start, r.end)]
    n = -(-size // split_size)
    base, extra = divmod(size, n)
    out: List[Piece] = []
    pos = r.start
    for k in range(n):
        step = base + (1 if k < extra else 0)
        out.append(Piece(index, r, pos, pos + step))
        pos += step
    return out


def task_hosts(task: Task, host_of: Callable[[SourceRange], Optional[str]]) -> Optional[str]:
    """The host ``task`` must run on (its pieces share it), or ``None``."""
    return host_of(task[0].range) if task else None
