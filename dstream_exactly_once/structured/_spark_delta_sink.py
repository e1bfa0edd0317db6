"""PySpark's Python Data Source classes of the ``deo-delta`` sink (the Spark-free logic is in
:mod:`~dstream_exactly_once.structured._delta_sink`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, List, Optional

try:
    from pyspark.sql.datasource import DataSource, DataSourceStreamWriter, WriterCommitMessage
except ImportError:  # PySpark 3.5 and older: said by name
    from ._requires import require_data_source_api

    require_data_source_api("the deo-delta Structured Streaming sink")
    raise

from ._delta_sink import (
    DELTA_SINK_NAME,
    DeltaSinkOptions,
    DeltaTaskFiles,
    check_delta_mode,
    commit_delta_batch,
    write_partition,
)
from ._sink_runs import task_run
from ._store_sink import task_batch

__all__ = ["DeltaCommitMessage", "DeltaSinkDataSource", "DeltaStreamWriter"]


@dataclass(frozen=True)
class DeltaCommitMessage(WriterCommitMessage):
    """One task's written files."""

    files: DeltaTaskFiles


class DeltaStreamWriter(DataSourceStreamWriter):
    """Files written per partition on executors; the one Delta commit and the store's decision on the driver."""

    def __init__(self, opts: DeltaSinkOptions, schema: Any) -> None:
        self.opts = opts
        self.schema = schema

    def write(self, iterator: Iterator[Any]) -> DeltaCommitMessage:
        partition, batch = task_batch(f"deo-delta app {self.opts.app}")
        run = task_run(f"deo-delta app {self.opts.app} batch {batch} partition {partition}")
        return DeltaCommitMessage(write_partition(self.opts, self.schema, batch, partition, iterator, run))

    def commit(self, messages: List[Optional[WriterCommitMessage]], batchId: int) -> None:  # noqa: N803
        files = [m.files if isinstance(m, DeltaCommitMessage) else None for m in messages]
        commit_delta_batch(self.opts, self.schema, files, batchId)

    def abort(self, messages: List[Optional[WriterCommitMessage]], batchId: int) -> None:  # noqa: N803
        """Nothing to undo: the files of an aborted batch are unreferenced (``dstream-eo delta orphans``)."""


class DeltaSinkDataSource(DataSource):
    """``writeStream.format("deo-delta")``: see :mod:`dstream_exactly_once.structured._delta_sink`."""

    @classmethod
    def name(cls) -> str:
        return DELTA_SINK_NAME

    def streamWriter(self, schema: Any, overwrite: bool) -> DeltaStreamWriter:  # noqa: N802
        """The writer of a micro-batch; ``overwrite`` (output mode ``complete``) is refused without
        ``merge_keys``, and the query's schema is checked against the table's (and the merge keys)."""
        from pyspark.sql.pandas.types import to_arrow_schema

        opts = DeltaSinkOptions.parse(self.options)
        check_delta_mode(bool(overwrite), opts.merge_keys)
        arrow = to_arrow_schema(schema)
        opts.check_table(arrow)
        return DeltaStreamWriter(opts, arrow)
