"""``spark.readStream.format("aof")``: growing append-only files as a Structured Streaming source.

Built on PySpark's Python Data Source API (4.0+; admission control and ``Trigger.AvailableNow``
need 4.2+) and on the file source's plug-ins: the driver-side :class:`~dstream_exactly_once.files.FilePlanner` plans
each micro-batch's byte ranges, the executor-side :class:`~dstream_exactly_once.files.FileRangeReader` reads one
range per Spark task. :func:`register_aof` (or :func:`dstream_exactly_once.structured.register`)
makes the format known to a session::

    from dstream_exactly_once.structured import register
    register(spark)
    lines = (spark.readStream.format("aof")
             .option("path", "/var/log/app/service.log*")
             .option("bytes.max", 1 << 20)
             .load())

Offsets are the planner's position documents (:mod:`._aof_offsets`), written by Spark in the
checkpoint's offset log, so a query restarted from its checkpoint re-reads exactly the ranges of an
unfinished micro-batch and continues after the last one. Options: :mod:`._aof_options`.

Unit of parallelism: one Spark task per file range per micro-batch. Delivery: each complete line
once per micro-batch it belongs to, across rotation by rename, copytruncate and compression and
across restarts from the same checkpoint; end to end exactly-once with an idempotent or
transactional sink, otherwise at-least-once (a micro-batch replayed after a crash is read again,
with the same lines). Bytes gone before they were read follow ``fail.on.data.loss``: ``true``
stops the query with a :class:`~dstream_exactly_once.errors.DataLossError` naming the file range;
``false`` logs them at WARN and counts them in the offset's ``events`` (``losses``, ``lost_bytes``,
seen in each query progress's ``endOffset``).
"""

from __future__ import annotations

import logging
from typing import Any, Dict, Iterator, Optional, Sequence, Tuple

from ...errors import ConfigurationError, DataLossError

try:
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
except ImportError:  # PySpark 3.5 and older: said by name
    from ...structured._requires import require_data_source_api

    require_data_source_api("the aof Structured Streaming source")
    raise
from pyspark.sql.types import BinaryType, LongType, StringType, StructField, StructType

from ...core._ranges import Position
from .. import FilePlanner, FileRange, FileRangeReader
from ._aof_offsets import admit, advance, doc_from_positions, empty_doc, gone_keys, positions_of, ranges_between
from ._aof_options import AofOptions, parse_aof_options

try:  # PySpark 4.2+: admission control and Trigger.AvailableNow
    from pyspark.sql.streaming.datasource import ReadMaxBytes, ReadMaxFiles, SupportsTriggerAvailableNow
except ImportError:  # pragma: no cover - PySpark 4.0/4.1
    ReadMaxBytes = ReadMaxFiles = None  # type: ignore[assignment,misc]
    SupportsTriggerAvailableNow = object  # type: ignore[assignment,misc]

log = logging.getLogger(__name__)

__all__ = ["AofDataSource", "AofStreamReader", "FileRangePartition", "register_aof"]


def register_aof(spark: Any) -> None:
    """Make ``spark.readStream.format("aof")`` known to the session ``spark``. Spark conf
    ``spark.aof.<name>`` set at this call applies to every ``aof`` query (``.option()`` wins)."""
    conf = {k: v for k, v in dict(spark.conf.getAll).items() if k.startswith("spark.aof.")}
    master = spark.conf.get("spark.master", None)
    # a class made here carries the session's conf when Spark pickles it to its Python workers
    source = type("AofDataSource", (AofDataSource,), {"session_conf": conf, "session_master": master,
                                                       "__module__": __name__})
    parse_aof_options({"path": "/"}, conf)  # bad spark.aof.* conf fails here, once (the master: at load())
    spark.dataSource.register(source)


class FileRangePartition(InputPartition):
    """One Spark task of an ``aof`` micro-batch: one :class:`~dstream_exactly_once.files.FileRange`."""

    def __init__(self, value: FileRange) -> None:
        super().__init__(value)


class AofDataSource(DataSource):
    """The ``aof`` format (register it with :func:`register_aof`). Reading only, streaming only."""

    #: Spark conf ``spark.aof.*`` captured by :func:`register_aof`.
    session_conf: Dict[str, str] = {}
    #: The session's master captured by :func:`register_aof` (``None``: not checked).
    session_master: Optional[str] = None

    def __init__(self, options: Dict[str, str]) -> None:
        super().__init__(options)
        self.aof = parse_aof_options(dict(options), self.session_conf, self.session_master)

    @classmethod
    def name(cls) -> str:
        return "aof"

    def schema(self) -> StructType:
        return aof_schema(self.aof)

    def streamReader(self, schema: StructType) -> AofStreamReader:  # noqa: N802 - Spark's name
        return AofStreamReader(self.aof)


def aof_schema(o: AofOptions) -> StructType:
    """``value`` (string; binary with ``line.decoding=bytes``), then ``path`` (``include.file.name``),
    ``offset`` (``include.byte.offset``) and ``file_id`` (``include.file.id``)."""
    fields = [StructField("value", BinaryType() if o.source.line_decoding == "bytes" else StringType(), False)]
    if o.source.include_file_name:
        fields.append(StructField("path", StringType(), False))
    if o.source.include_byte_offset:
        fields.append(StructField("offset", LongType(), False))
    if o.include_file_id:
        fields.append(StructField("file_id", StringType(), False))
    return StructType(fields)


class AofStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):  # type: ignore[misc,valid-type]
    """Plans micro-batches of file ranges on the driver and reads one range per task.

    The planner follows the files between calls; its state always matches the last offset this
    reader returned, and is rebuilt from the offset Spark gives whenever they differ (a restart from
    a checkpoint, a batch whose ranges were held back by a read limit).
    """

    def __init__(self, options: AofOptions) -> None:
        self.aof = options
        self._planner: Optional[FilePlanner] = None
        self._doc: Optional[Dict[str, Any]] = None  # the offset the planner's state matches
        self._available_now = False
        self._target: Optional[Dict[str, int]] = None  # AvailableNow: sizes when the run began

    # ---------------------------------------------------------------- offsets
    def initialOffset(self) -> Dict[str, Any]:  # noqa: N802 - Spark's name
        """A new query's start: after the positions of ``starting.positions.app`` in
        ``starting.positions.store`` when set, else nothing read (``starting.offsets`` applies)."""
        if self.aof.positions_store is None or self.aof.positions_app is None:
            return empty_doc()
        positions = load_stored_positions(self.aof.positions_store, self.aof.positions_app)
        if not positions:
            log.warning("aof source: the store holds no committed positions for app %r (option "
                        "starting.positions.app); the query starts per starting.offsets", self.aof.positions_app)
            return empty_doc()
        return doc_from_positions(positions)

    def getDefaultReadLimit(self) -> Any:  # noqa: N802 - Spark's name
        cap = self.aof.max_bytes_per_trigger
        if cap is not None and ReadMaxBytes is not None:
            return ReadMaxBytes(cap)
        return super().getDefaultReadLimit()

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802 - Spark's name
        """``Trigger.AvailableNow``: the run reads what the files hold when its first micro-batch is
        planned (each identity up to its size then, in batches within the read limits) and stops."""
        self._available_now, self._target = True, None

    def latestOffset(self, start: Optional[Dict[str, Any]] = None, limit: Any = None) -> Dict[str, Any]:  # noqa: N802
        if start is None:  # PySpark 4.0/4.1 call it without arguments
            start = self._doc if self._doc is not None else self.initialOffset()
        planner = self._planner_at(start)
        before = planner.counters
        planned = planner.plan()
        after = planner.counters
        if self._available_now and self._target is None:
            self._target = dict(planner.latest_positions())
        ranges = [r for r in planned if isinstance(r, FileRange)]
        taken = admit(ranges, _limit(limit, "max_bytes", ReadMaxBytes), _limit(limit, "max_files", ReadMaxFiles),
                      self._target if self._available_now else None)
        states = planner.tracked()
        end = advance(start, taken,
                      gone=[k for k, (state, _, _) in states.items() if state == "gone"],
                      retired=[k for k, (state, _, _) in states.items() if state == "retired"],
                      events={k: after[k] - before.get(k, 0) for k in after})
        if len(taken) < len(ranges):  # the planner went further than this batch: rebuild it from `end`
            self._planner = None
        self._doc = end
        return start if end == start else end

    def _planner_at(self, start: Dict[str, Any]) -> FilePlanner:
        """The planner whose state is ``start`` (the one kept since the last call, or a new one)."""
        if self._planner is not None and self._doc == start:
            return self._planner
        planner = FilePlanner(self.aof.path, self.aof.source)
        planner.start(positions_of(start))
        planner.mark_gone(gone_keys(start))
        self._planner, self._doc = planner, start
        return planner

    def partitions(self, start: Dict[str, Any], end: Dict[str, Any]) -> Sequence[InputPartition]:
        return [FileRangePartition(r) for r in ranges_between(start, end)]

    def commit(self, end: Dict[str, Any]) -> None:
        """Nothing to do: the checkpoint's offset and commit logs are the source's positions."""

    # ---------------------------------------------------------------- executors
    def read(self, partition: InputPartition) -> Iterator[Tuple[Any, ...]]:
        r = partition.value
        if not isinstance(r, FileRange):
            raise ConfigurationError(f"the aof source reads FileRange partitions, got {r!r}")
        o = self.aof
        records = FileRangeReader(o.path, o.source).read(r)
        try:
            for rec in records:
                yield _row(rec, r, o)
        except DataLossError as exc:
            raise DataLossError(
                f"{exc}; the query stops (fail.on.data.loss=true). Restart it from the same checkpoint with "
                f".option('fail.on.data.loss', 'false') to continue without the bytes of {r.describe()} "
                f"(they are then logged at WARN)") from None


def _row(rec: Any, r: FileRange, o: AofOptions) -> Tuple[Any, ...]:
    """The row of one reader record (a line, or ``(path, offset, line)`` and its subsets)."""
    if isinstance(rec, tuple):
        line, extra = rec[-1], rec[:-1]
    else:
        line, extra = rec, ()
    row: Tuple[Any, ...] = (line, *extra)
    return (*row, r.position_key) if o.include_file_id else row


def _limit(limit: Any, attr: str, kind: Any) -> Optional[int]:
    """``limit``'s ``attr`` when it is a ``kind`` read limit (``None`` otherwise: read all available)."""
    if kind is not None and isinstance(limit, kind):
        value = getattr(limit, attr)
        return int(value) if isinstance(value, int) else None
    return None


def load_stored_positions(url: str, app_id: str) -> Dict[str, Position]:
    """The committed positions of the application ``app_id`` (a DStream file app, or a query whose
    ``deo-store`` sink has ``anchor=true``) in the store at ``url`` (read only; ``{}``: none)."""
    from ...stores import open_store

    store = open_store(url, app_id)
    try:
        positions = store.load_positions()
    finally:
        store.close()
    return positions

