"""PySpark's Python Data Source classes of the ``deo-doris`` sink (the Spark-free logic is in
:mod:`~dstream_exactly_once.structured._doris_sink`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, List, Optional

try:
    from pyspark.sql.datasource import DataSource, DataSourceStreamWriter, WriterCommitMessage
except ImportError:  # PySpark 3.5 and older: said by name
    from ._requires import require_data_source_api

    require_data_source_api("the deo-doris Structured Streaming sink")
    raise

from ._doris_sink import (
    DORIS_SINK_NAME,
    DorisCommit,
    DorisSinkOptions,
    abort_batch,
    check_doris_mode,
    commit_doris_batch,
    load_partition,
)
from ._sink_runs import task_run
from ._store_sink import task_batch

__all__ = ["DorisCommitMessage", "DorisSinkDataSource", "DorisStreamWriter"]


@dataclass(frozen=True)
class DorisCommitMessage(WriterCommitMessage):
    """One task's label and pre-committed transaction."""

    commit: DorisCommit


class DorisStreamWriter(DataSourceStreamWriter):
    """Pre-commit per partition on executors; the decision and the Doris commits on the driver."""

    def __init__(self, opts: DorisSinkOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[Any]) -> DorisCommitMessage:
        partition, batch = task_batch(f"deo-doris app {self.opts.app}")
        run = task_run(f"deo-doris app {self.opts.app} batch {batch} partition {partition}")
        return DorisCommitMessage(load_partition(self.opts, batch, partition, iterator, run))

    @staticmethod
    def _commits(messages: List[Optional[WriterCommitMessage]]) -> List[Optional[DorisCommit]]:
        return [m.commit if isinstance(m, DorisCommitMessage) else None for m in messages]

    def commit(self, messages: List[Optional[WriterCommitMessage]], batchId: int) -> None:  # noqa: N803
        commit_doris_batch(self.opts, self._commits(messages), batchId)

    def abort(self, messages: List[Optional[WriterCommitMessage]], batchId: int) -> None:  # noqa: N803
        abort_batch(self.opts, self._commits(messages), batchId)


class DorisSinkDataSource(DataSource):
    """``writeStream.format("deo-doris")``: see :mod:`dstream_exactly_once.structured._doris_sink`."""

    @classmethod
    def name(cls) -> str:
        return DORIS_SINK_NAME

    def streamWriter(self, schema: Any, overwrite: bool) -> DorisStreamWriter:  # noqa: N802
        """The writer of a micro-batch; ``overwrite`` (output mode ``complete``) is refused."""
        opts = DorisSinkOptions.parse(self.options)
        check_doris_mode(bool(overwrite))
        return DorisStreamWriter(opts)
