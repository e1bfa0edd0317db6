"""What a Delta table's log says about the sink: the last committed batch, where the stream stands, and
files no commit names.

Read-only helpers of the operator command ``dstream-eo delta`` (:mod:`dstream_exactly_once.cli._delta`),
and :func:`table_offsets` / :func:`table_positions`: the positions a stream starts from when only the
table is left.
A file is *unreferenced* when no ``add`` or ``remove`` action of the log (JSON commits and
checkpoints) names it: a file written by a batch attempt that crashed before its table commit. Files
removed by a later commit (kept for time travel) are referenced, and are ``VACUUM``'s business.
"""

from __future__ import annotations

import json
import posixpath
import time
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Set
from urllib.parse import unquote

from ...errors import ConfigurationError
from ._files import open_table_dir
from ._table import METADATA_KEY, DeltaTarget

__all__ = ["UnreferencedFile", "last_committed_batch", "remove_files", "table_offsets", "table_positions",
           "unreferenced_files"]

_LOG_DIR = "_delta_log"


@dataclass(frozen=True)
class UnreferencedFile:
    """A data file under the table root that no log action names: ``path`` relative to the root."""

    path: str
    size: int
    age_s: float


def _table(uri: str, storage_options: Optional[Dict[str, str]]) -> Any:
    table = DeltaTarget(uri, storage_options).load()
    if table is None:
        raise ConfigurationError(f"{uri} is not a Delta table (no _delta_log)")
    return table


def last_committed_batch(uri: str, app_id: Optional[str] = None, storage_options: Optional[Dict[str, str]] = None,
                         *, scan: int = 1000) -> Optional[Dict[str, Any]]:
    """The newest commit of the sink in the table's history (of ``app_id`` if given, among the last
    ``scan`` commits): ``{"app_id", "batch_id", "rows", "positions", "version", "timestamp"}``, or ``None``."""
    table = _table(uri, storage_options)
    for info in table.history(scan):
        raw = info.get(METADATA_KEY)
        if raw is None:
            continue
        try:
            entry = json.loads(raw) if isinstance(raw, str) else dict(raw)
        except (TypeError, ValueError):
            continue
        if app_id is not None and entry.get("app_id") != app_id:
            continue
        entry["version"] = info.get("version")
        entry["timestamp"] = info.get("timestamp")
        if entry.get("app_id") is not None:
            txn = table.transaction_version(entry["app_id"])
            entry["transaction_version"] = None if txn is None else int(txn)
        return dict(entry)
    return None


def table_positions(uri: str, app_id: Optional[str] = None, storage_options: Optional[Dict[str, str]] = None,
                    *, scan: int = 1000) -> Dict[str, int]:
    """Where the stream stands according to the table alone: ``{position key: next position to read}``,
    the ``end`` of every input range of the sink's newest batch in the table (of ``app_id`` if given,
    among the last ``scan`` commits). These are the positions the store committed with that batch.

    Raises :class:`ConfigurationError` when the table holds no batch of the sink, or its newest one
    records no positions (the ``deo-delta`` Structured Streaming sink leaves them to Spark's checkpoint).
    Reads the table only."""
    last = last_committed_batch(uri, app_id, storage_options, scan=scan)
    who = f" of application transaction {app_id!r}" if app_id is not None else ""
    if last is None:
        raise ConfigurationError(f"{uri}: no batch{who} committed by the exactly-once Delta sink in the last {scan} "
                                 f"commits; no positions to start from")
    positions = {str(p["partition"]): int(p["end"]) for p in last.get("positions") or []}
    if not positions:
        raise ConfigurationError(f"{uri}: batch {last.get('batch_id')} of application transaction "
                                 f"{last.get('app_id')!r} (table version {last.get('version')}) records no input "
                                 f"positions (a deo-delta Structured Streaming query keeps them in its checkpoint)")
    return positions


def table_offsets(uri: str, app_id: Optional[str] = None, storage_options: Optional[Dict[str, str]] = None,
                  *, scan: int = 1000) -> Dict[Any, int]:
    """:func:`table_positions` of a Kafka stream as ``{TopicAndPartition: next offset}``: the
    ``fromOffsets`` of ``KafkaUtils.createDirectStream`` or the ``{TopicAndPartition: offset}`` form of
    ``KafkaUtils.createExactlyOnceStream``'s ``topics``, so a stream whose store is lost starts where
    the table stands::

        offsets = table_offsets("/data/orders", "orders")
        stream = KafkaUtils.createExactlyOnceStream(ssc, params, offsets, store=url, app_id="orders-2")

    A store's committed offsets win over these, so start an application the store has no positions
    of; its sink then commits under its own application transaction id (the old id's batches stay
    in the table). Raises :class:`ConfigurationError` when a position is not a Kafka partition's."""
    from ...kafka._offsets import OffsetRange

    positions = table_positions(uri, app_id, storage_options, scan=scan)
    out: Dict[Any, int] = {}
    for key, end in positions.items():
        tp = OffsetRange.parse_position_key(key)
        if tp is None:
            raise ConfigurationError(f"{uri}: position {key!r} of the sink's newest batch is not a Kafka partition's "
                                     f"(topic/partition); use table_positions() for other sources")
        out[tp] = end
    return out


def _log_paths(filesystem: Any, root: str) -> Set[str]:
    """Every path an ``add`` or ``remove`` action of the log names (JSON commits and checkpoints)."""
    import pyarrow.parquet as pq
    from pyarrow import fs

    names: Set[str] = set()
    for info in filesystem.get_file_info(fs.FileSelector(posixpath.join(root, _LOG_DIR), allow_not_found=True)):
        base = posixpath.basename(info.path)
        if base.endswith(".json") and base[:1].isdigit():
            with filesystem.open_input_stream(info.path) as stream:
                for line in stream.read().decode("utf-8").splitlines():
                    if not line.strip():
                        continue
                    action = json.loads(line)
                    for kind in ("add", "remove"):
                        if isinstance(action.get(kind), dict):
                            names.add(unquote(action[kind]["path"]))
        elif ".checkpoint" in base and base.endswith(".parquet"):
            with filesystem.open_input_file(info.path) as handle:
                columns = [c for c in ("add", "remove") if c in pq.read_schema(handle).names]
            with filesystem.open_input_file(info.path) as handle:
                table = pq.read_table(handle, columns=columns)
            for kind in columns:
                names.update(unquote(p) for p in table.column(kind).combine_chunks().field("path").to_pylist() if p)
    return names


def unreferenced_files(uri: str, storage_options: Optional[Dict[str, str]] = None, *,
                       min_age_s: float = 0.0) -> List[UnreferencedFile]:
    """The data files under the table root that no log action names and that are at least ``min_age_s``
    seconds old (a running batch's files are unreferenced until its commit), sorted by path."""
    from pyarrow import fs

    table = _table(uri, storage_options)
    filesystem, root = open_table_dir(uri)
    referenced = _log_paths(filesystem, root) | set(DeltaTarget(uri).committed_files(table))
    now = time.time()
    out = []
    for info in filesystem.get_file_info(fs.FileSelector(root, recursive=True)):
        if info.type != fs.FileType.File:
            continue
        relative = posixpath.relpath(info.path, root)
        if relative.split("/", 1)[0].startswith(("_", ".")) or not relative.endswith(".parquet"):
            continue  # the log, and the hidden files of other tools
        age = now - (info.mtime_ns or 0) / 1e9
        if relative not in referenced and age >= min_age_s:
            out.append(UnreferencedFile(relative, int(info.size), age))
    return sorted(out, key=lambda f: f.path)


def remove_files(uri: str, files: Iterable[UnreferencedFile]) -> List[str]:
    """Delete ``files`` (from :func:`unreferenced_files`) under the table root; the paths deleted."""
    filesystem, root = open_table_dir(uri)
    done = []
    for f in files:
        filesystem.delete_file(posixpath.join(root, f.path))
        done.append(f.path)
    return done
