"""Node-local files on several hosts: planning per host, on that host, and the executor's locality check.

The driver cannot stat another host's files, and the planner needs more than stats: it hashes
first bytes, tails before stored offsets and candidate copies, and searches newlines, all lazily
and depending on what it finds (see :mod:`._planner`). So instead of shipping file facts to the
driver, the driver ships each host's :class:`~._planner.FilePlanner` (its tracked identities — small
plain state) *to* that host in a task pinned there, the planner decides there with the
planner's decision table exactly as in local mode, and the task returns the ranges together with the
planner's new state. The driver keeps one planner per host; nothing else changes: the committer,
the store and the position documents (which record ``host``) are the local-mode ones.

Who runs a function on a host is injected (:data:`HostRunner`): the Spark glue
(``streaming/_pinned.py``) runs one task per host with Spark preferred locations, and every such task
— as every read of a range with a ``host`` — first calls :func:`check_host`, which fails the task
clearly when Spark placed it elsewhere (Spark retries it). Nothing here imports Spark.

Unit of parallelism: one planning task per host per batch, then one read task per file range.
Guarantee: as :class:`~._planner.FilePlanner` per host (exactly-once with a committer), provided
each listed host has an executor; a batch whose planning or reading cannot run on its host fails
(nothing is committed) instead of reading another host's files.
"""

from __future__ import annotations

import os
import socket
from datetime import datetime
from typing import Any, Callable, Collection, Dict, FrozenSet, List, Mapping, Optional, Sequence, Tuple

from ..core._ranges import Position, SourceRange
from ..core._source import BatchSource, RangeReader
from ..errors import ConfigurationError
from ._options import FILE_LOSS_OPTION, FileSourceOptions
from ._planner import COUNTERS, FilePlanner
from ._ranges import FileRange
from ._reader import FileRangeReader

__all__ = ["HostFilePlanner", "HostRunner", "check_host", "local_host_names", "parse_hosts"]

#: Runs ``fn(payload)`` for each ``(host, payload)`` on that host and returns the results in order.
HostRunner = Callable[[Sequence[Tuple[str, Any]], Callable[[Any], Any]], List[Any]]

_HOST_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_:[]")


def parse_hosts(value: Any, where: str = "option 'hosts'") -> Tuple[str, ...]:
    """The host names of ``value`` (``"h1,h2"`` or a sequence of names), in order, without repeats."""
    if isinstance(value, str):
        items = [h.strip() for h in value.split(",")]
    elif isinstance(value, (list, tuple)) and all(isinstance(h, str) for h in value):
        items = [h.strip() for h in value]
    else:
        raise ConfigurationError(f"{where} must be a comma-separated string of host names, got {value!r}")
    bad = [h for h in items if not h or not set(h) <= _HOST_CHARS]
    if bad or not items:
        raise ConfigurationError(f"{where} must name one or more hosts as Spark names its executors "
                                 f"(e.g. 'node1,node2' or '10.0.0.5,10.0.0.6'), got {value!r}")
    return tuple(dict.fromkeys(items))


def local_host_names() -> FrozenSet[str]:
    """The names this process's host goes by, as Spark would name its executor.

    ``SPARK_LOCAL_HOSTNAME`` and ``SPARK_LOCAL_IP`` (inherited by Python workers from the worker and
    executor JVMs) decide the address Spark gives an executor, so when either is set they are the
    answer; otherwise the host name, its fully qualified name and their addresses.
    """
    pinned = {os.environ.get(k, "").strip() for k in ("SPARK_LOCAL_HOSTNAME", "SPARK_LOCAL_IP")} - {""}
    if pinned:
        return frozenset(pinned)
    names = {socket.gethostname(), socket.getfqdn()} - {""}
    for name in list(names):
        try:
            canonical, aliases, addresses = socket.gethostbyname_ex(name)
        except OSError:
            continue
        names.update([canonical, *aliases, *addresses])
    return frozenset(names)


def check_host(host: str, what: str) -> None:
    """Fail unless this process runs on ``host``: a task pinned to ``host`` that Spark placed elsewhere
    (the host had no free executor within ``spark.locality.wait``, or none at all). Spark retries the
    task; the message says why it could not read here."""
    names = local_host_names()
    if host not in names:
        raise ConfigurationError(
            f"{what} must run on host {host!r} (its files are local to that host) but this task runs on "
            f"{sorted(names)!r}; Spark retries it. If this repeats: check that {host!r} is the name Spark "
            f"gives that host's executor (its Executors page), that it has an executor, and raise "
            f"spark.locality.wait so tasks wait for it")


class HostCheckedReader(RangeReader):
    """:class:`FileRangeReader` that first checks a range with a ``host`` is read on that host."""

    def __init__(self, inner: FileRangeReader) -> None:
        self.inner = inner

    def read(self, r: SourceRange) -> Any:
        if isinstance(r, FileRange) and r.host is not None:
            check_host(r.host, f"reading {r.describe()}")
        return self.inner.read(r)

    def can_split(self, r: SourceRange) -> bool:
        return self.inner.can_split(r)

    def read_part(self, r: SourceRange, start: int, end: int) -> Any:
        if isinstance(r, FileRange) and r.host is not None:
            check_host(r.host, f"reading bytes [{start} -> {end}) of {r.describe()}")
        return self.inner.read_part(r, start, end)


def _start_on_host(payload: Tuple[str, FilePlanner, Dict[str, Position]]) -> FilePlanner:
    host, planner, positions = payload
    check_host(host, f"starting the file planner of {planner.pattern.path} for host {host!r}")
    planner.start(positions)
    return planner


def _plan_on_host(payload: Tuple[str, FilePlanner, Optional[datetime]]) -> Tuple[FilePlanner, List[SourceRange]]:
    host, planner, time = payload
    check_host(host, f"planning {planner.pattern.path} for host {host!r}")
    ranges = planner.plan(time)
    return planner, ranges


class HostFilePlanner(BatchSource):
    """Plans the node-local files ``path`` names on each of ``hosts``: one :class:`FilePlanner` per host,
    run on that host by ``runner`` (see the module docstring). Ranges carry their ``host``; read them
    with :meth:`reader` (which checks the host) in tasks pinned to it."""

    kind = "file"
    data_loss_unit = "bytes"
    data_loss_option = FILE_LOSS_OPTION

    def __init__(self, path: str, hosts: Sequence[str], runner: HostRunner,
                 options: Optional[FileSourceOptions] = None) -> None:
        self.hosts = parse_hosts(list(hosts), "hosts")
        self.options = options if options is not None else FileSourceOptions()
        self.planners: Dict[str, FilePlanner] = {h: FilePlanner(path, self.options, host=h) for h in self.hosts}
        self.path = path
        self._run = runner

    def describe(self) -> str:
        return f"{self.planners[self.hosts[0]].describe()} on hosts {','.join(self.hosts)}"

    def start(self, positions: Mapping[str, Position]) -> None:
        per_host: Dict[str, Dict[str, Position]] = {h: {} for h in self.hosts}
        for key, pos in sorted(positions.items()):
            host = pos.meta.get("host") if isinstance(pos.meta, dict) else None
            if host not in per_host:
                raise ConfigurationError(
                    f"stored position {key!r} was read on host {host!r}, which option 'hosts' "
                    f"({','.join(self.hosts)!r}) does not list; list every host this app_id has read "
                    f"(a stream started with shared.filesystem=true cannot continue per host)")
            per_host[host][key] = pos
        started = self._run([(h, (h, self.planners[h], per_host[h])) for h in self.hosts], _start_on_host)
        self.planners = dict(zip(self.hosts, started, strict=True))

    def plan(self, time: Optional[datetime] = None) -> List[SourceRange]:
        done = self._run([(h, (h, self.planners[h], time)) for h in self.hosts], _plan_on_host)
        out: List[SourceRange] = []
        for h, (planner, ranges) in zip(self.hosts, done, strict=True):
            self.planners[h] = planner
            out.extend(ranges)
        return out

    def advance(self, ranges: Sequence[SourceRange]) -> None:
        per_host: Dict[str, List[SourceRange]] = {h: [] for h in self.hosts}
        for r in ranges:
            host = r.host if isinstance(r, FileRange) else None
            if host not in per_host:
                raise ConfigurationError(f"a replayed range {r!r} names host {host!r}, not one of option "
                                         f"'hosts' ({','.join(self.hosts)!r})")
            per_host[host].append(r)
        for h, rs in per_host.items():
            self.planners[h].advance(rs)  # no filesystem access: runs on the driver

    def reader(self) -> RangeReader:
        return HostCheckedReader(FileRangeReader(self.path, self.options))

    def retired_positions(self) -> List[str]:
        """:meth:`FilePlanner.retired_positions` of every host."""
        return sorted(k for p in self.planners.values() for k in p.retired_positions())

    def forget_positions(self, keys: Collection[str]) -> None:
        for p in self.planners.values():  # no filesystem access: runs on the driver
            p.forget_positions(keys)

    def latest_positions(self) -> Mapping[str, int]:
        out: Dict[str, int] = {}
        for p in self.planners.values():
            out.update(p.latest_positions())
        return out

    @property
    def counters(self) -> Dict[str, int]:
        """:attr:`FilePlanner.counters` summed over the hosts."""
        out = dict.fromkeys(COUNTERS, 0)
        for p in self.planners.values():
            for k, n in p.counters.items():
                out[k] += n
        return out

    def event_counters(self) -> Dict[str, int]:
        """:attr:`counters` (for the progress records)."""
        return self.counters

    def data_loss_skips(self) -> int:
        return self.counters["lost_bytes"]

    def tracked(self) -> Dict[str, Tuple[str, str, int]]:
        """:meth:`FilePlanner.tracked` of every host (position keys are unique across hosts)."""
        out: Dict[str, Tuple[str, str, int]] = {}
        for p in self.planners.values():
            out.update(p.tracked())
        return out

    def close(self) -> None:
        for p in self.planners.values():
            p.close()
