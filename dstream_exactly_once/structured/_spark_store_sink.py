"""PySpark's Python Data Source classes of the ``deo-store`` sink (the Spark-free logic is in
:mod:`~dstream_exactly_once.structured._store_sink`)."""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from typing import Any, Iterator, List, Optional

try:
    from pyspark.sql.datasource import DataSource, DataSourceStreamWriter, WriterCommitMessage
except ImportError:  # PySpark 3.5 and older: said by name
    from ._requires import require_data_source_api

    require_data_source_api("the deo-store Structured Streaming sink")
    raise

from ..errors import ConfigurationError
from ._sink_runs import QueryRun, run_of_messages, task_run
from ._store_sink import (
    STORE_SINK_NAME,
    StoreSinkOptions,
    _load_function,
    check_complete_writes,
    check_message_size,
    check_row_schema,
    commit_batch,
    rows_to_writes,
    task_ids,
)

__all__ = ["StoreCommitMessage", "StoreSinkDataSource", "StoreStreamWriter"]


@dataclass(frozen=True)
class StoreCommitMessage(WriterCommitMessage):
    """One task's writes, pickled (bounded by ``max_message_bytes``), and the query run it belongs to."""

    partition_id: int
    writes_pickle: bytes
    run: QueryRun


class StoreStreamWriter(DataSourceStreamWriter):
    """Rows → :class:`Writes` on executors; one store transaction per micro-batch on the driver."""

    def __init__(self, opts: StoreSinkOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[Any]) -> StoreCommitMessage:
        partition, batch = task_ids()
        what = f"deo-store app {self.opts.app} batch {batch} partition {partition}"
        run = task_run(what)
        if self.opts.writes_function is None:
            writes = rows_to_writes(iterator, complete=self.opts.complete)
        else:
            writes = _load_function(self.opts.writes_function)(iterator)
            from ..stores._writes import Writes

            if not isinstance(writes, Writes):
                raise ConfigurationError(f"deo sink writes_function {self.opts.writes_function!r} must return a "
                                         f"Writes, got {type(writes).__name__}")
            if self.opts.complete:
                check_complete_writes(writes, f"{what}, writes_function {self.opts.writes_function!r}")
        return StoreCommitMessage(partition, check_message_size(writes, self.opts.max_message_bytes, what), run)

    def commit(self, messages: List[Optional[WriterCommitMessage]], batchId: int) -> None:  # noqa: N803
        parts = []
        for m in sorted((m for m in messages if m is not None), key=lambda m: m.partition_id):  # type: ignore[attr-defined]
            parts.append(pickle.loads(m.writes_pickle))  # type: ignore[attr-defined]
        if len(parts) != len(messages):
            raise ConfigurationError(f"deo-store app {self.opts.app} batch {batchId}: {len(messages) - len(parts)} "
                                     f"task(s) sent no commit message; nothing was written")
        run = run_of_messages([m.run for m in messages if m is not None],  # type: ignore[attr-defined]
                              f"deo-store app {self.opts.app} batch {batchId}")
        commit_batch(self.opts, parts, batchId, run)

    def abort(self, messages: List[Optional[WriterCommitMessage]], batchId: int) -> None:  # noqa: N803
        """Nothing was written by the tasks: nothing to undo."""


class StoreSinkDataSource(DataSource):
    """``writeStream.format("deo-store")``: see :mod:`dstream_exactly_once.structured._store_sink`."""

    @classmethod
    def name(cls) -> str:
        return STORE_SINK_NAME

    def streamWriter(self, schema: Any, overwrite: bool) -> StoreStreamWriter:  # noqa: N802
        """The writer of a micro-batch; ``overwrite`` is Spark's flag of output mode ``complete``
        (Spark refuses ``update`` for this sink before asking)."""
        from dataclasses import replace

        opts = replace(StoreSinkOptions.parse(self.options, sink=STORE_SINK_NAME), complete=bool(overwrite))
        if opts.writes_function is None:
            check_row_schema(schema.fieldNames())
        return StoreStreamWriter(opts)
