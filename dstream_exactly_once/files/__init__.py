"""The append-only file source ("ss-aof"): growing log files read as replayable logs.

Positions are byte offsets of a file *identity* (a content fingerprint, device/inode as a hint),
so rotation by rename, copytruncate and delayed compression neither loses nor doubles lines.
Nothing here imports Spark but the sub-packages ``files/spark/`` (``FileUtils``, the DStream facade) and
``files/structured/`` (the ``aof`` Structured Streaming source).

- :class:`FileRange` (``ranges``) — the range kind ``"file"`` and its identity document;
- :class:`FileSourceOptions` (``options``) — ``starting.offsets``, ``bytes.max``, ``md5.*`` …;
- :class:`FilePlanner` (``planner``) — the driver side (:class:`~..core._source.BatchSource`);
- :class:`FileRangeReader` (``reader``) — the executor side (:class:`~..core._source.RangeReader`).
"""

from . import _live  # noqa: F401 - registers how positions of range kind "file" are shown
from ._options import FileSourceOptions
from ._planner import FilePlanner
from ._ranges import FileRange
from ._reader import FileRangeReader

__all__ = ["FilePlanner", "FileRange", "FileRangeReader", "FileSourceOptions"]
