"""Executor side of the Delta sink: one task's rows written as Parquet files into the table directory.

A task writes one file per table partition it has rows for (one file for an unpartitioned table)
and returns, for each, the Delta ``add`` action as a plain dict (:class:`FileAdd`). Nothing here
touches the Delta log: a file the driver never commits is unreferenced — invisible to readers —
and ``dstream-eo delta orphans`` lists and removes it. File names are unique per write
(``part-{task}-{uuid}.snappy.parquet``), so two attempts of one task never write the same file.
"""

from __future__ import annotations

import json
import os
import posixpath
import time
import uuid
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["FileAdd", "HIVE_NULL", "open_table_dir", "write_files"]

#: The directory name of a null partition value (Hive's, which Delta readers know).
HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"

_STATS_TYPES = (pa.types.is_integer, pa.types.is_floating, pa.types.is_string, pa.types.is_large_string)


@dataclass(frozen=True)
class FileAdd:
    """A written Parquet file, as the Delta ``add`` action the driver commits.

    ``path`` is the file path relative to the table root (the log stores it URI-encoded); ``rows`` its
    record count.
    """

    path: str
    size: int
    partition_values: Mapping[str, Optional[str]]
    modification_time: int
    stats: str
    rows: int


def open_table_dir(table_uri: str) -> Tuple[Any, str]:
    """``(pyarrow filesystem, root path)`` of a table URI (a local path, ``file://``, or any URI
    ``pyarrow.fs.FileSystem.from_uri`` knows)."""
    from pyarrow import fs

    if "://" not in table_uri:
        return fs.LocalFileSystem(), os.path.abspath(table_uri)
    filesystem, root = fs.FileSystem.from_uri(table_uri)
    return filesystem, root


def _partition_value(value: Any) -> Optional[str]:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _escape(text: str) -> str:
    """A partition value as a directory name component (Hive-style: special characters as ``%XX``)."""
    return "".join(c if c.isalnum() or c in "-_." else "".join(f"%{b:02X}" for b in c.encode()) for c in text)


def _stats(table: pa.Table) -> str:
    stats: Dict[str, Any] = {"numRecords": table.num_rows, "minValues": {}, "maxValues": {}, "nullCount": {}}
    for name, column in zip(table.column_names, table.columns, strict=True):
        stats["nullCount"][name] = column.null_count
        if any(test(column.type) for test in _STATS_TYPES) and column.null_count < len(column):
            mm = pc.min_max(column)
            lo, hi = mm["min"].as_py(), mm["max"].as_py()
            if isinstance(lo, float) and (lo != lo or hi != hi or abs(lo) == float("inf") or abs(hi) == float("inf")):
                continue  # JSON has no NaN/Infinity: no bounds for this column
            stats["minValues"][name], stats["maxValues"][name] = lo, hi
    return json.dumps(stats, separators=(",", ":"), allow_nan=False)


_SAMPLE = 2048


def _dictionary_columns(table: pa.Table) -> Any:
    """The columns worth Parquet's dictionary encoding: those whose first rows repeat values (at most
    one distinct value in two). Dictionary-encoding a column of mostly distinct values (ids, measures)
    costs most of the write and makes the file larger. ``True`` (every column) when a column is nested."""
    names = []
    for name, column in zip(table.column_names, table.columns, strict=True):
        if pa.types.is_nested(column.type):
            return True
        sample = column.slice(0, _SAMPLE)
        if len(sample) and pc.count_distinct(sample, mode="all").as_py() * 2 <= len(sample):
            names.append(name)
    return names


def _groups(table: pa.Table, partition_by: Sequence[str]) -> List[Tuple[Dict[str, Optional[str]], pa.Table]]:
    """``table`` split by the values of ``partition_by``, each part without those columns."""
    if not partition_by:
        return [({}, table)]
    keys = table.select(list(partition_by)).group_by(list(partition_by)).aggregate([]).to_pylist()
    out = []
    for key in keys:
        mask = None
        for name, value in key.items():
            column = table[name]
            test = pc.is_null(column) if value is None else pc.equal(column, pa.scalar(value, column.type))
            mask = test if mask is None else pc.and_(mask, test)
        part = table.filter(mask).drop_columns(list(partition_by))
        out.append(({n: _partition_value(v) for n, v in key.items()}, part))
    return out


def write_files(table_uri: str, table: pa.Table, partition_by: Sequence[str], task_id: int,
                *, compression: str = "snappy") -> List[FileAdd]:
    """Write ``table`` (one task's rows) under ``table_uri``: one Parquet file per partition value
    (partition columns are in the directory names, not in the files). Returns the files' add
    actions; an empty table writes nothing."""
    import pyarrow.parquet as pq

    if table.num_rows == 0:
        return []
    filesystem, root = open_table_dir(table_uri)
    adds = []
    for values, part in _groups(table, partition_by):
        dirs = [f"{_escape(n)}={HIVE_NULL if v is None else _escape(v)}" for n, v in values.items()]
        name = f"part-{task_id:05d}-{uuid.uuid4()}.{compression}.parquet"
        relative = posixpath.join(*dirs, name) if dirs else name
        full = posixpath.join(root, relative)
        filesystem.create_dir(posixpath.dirname(full), recursive=True)
        pq.write_table(part, full, filesystem=filesystem, compression=compression,
                       use_dictionary=_dictionary_columns(part))
        info = filesystem.get_file_info(full)
        mtime = info.mtime_ns // 1_000_000 if info.mtime_ns else int(time.time() * 1000)
        adds.append(FileAdd(relative, int(info.size), values, mtime, _stats(part), part.num_rows))
    return adds
