"""The exactly-once Delta Lake sink of the DStream API: a batch's files in ONE Delta commit.

See :mod:`dstream_exactly_once.sinks.delta` for the protocol, the crash points and the guarantee.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence

import pyarrow as pa

from ...errors import ConfigurationError, TableConflictError
from ...stores._base import PlannedBatch, TransactionalStore, Writes
from ._files import FileAdd, write_files
from ._merge import check_merge_keys, latest_by_key
from ._schema import check_partition_columns, check_schema, rows_to_table
from ._table import DeltaTarget, batch_metadata

__all__ = ["DeltaSink"]

log = logging.getLogger(__name__)

RowsFunc = Callable[[Iterable[Any]], Iterable[Any]]


class DeltaSink:
    """Exactly-once output of DStream batches into one Delta Lake table (``deltalake``, no JVM).

    Unit of parallelism: one Spark task per planned task of the batch (small ranges packed, large
    ones split), each writing its rows as Parquet files (one per table partition) into the table
    directory; the driver commits all of them in ONE Delta commit per batch, carrying the
    application transaction ``(app id, batch id)`` and the batch's input positions.

    Delivery guarantee: exactly-once — a batch's rows are in the table once, whatever crashes,
    replays or zombie drivers happen — provided nothing else commits to the table under the same
    application transaction id, and the table's log keeps its transaction (Delta expires application
    transactions only when ``delta.setTransactionRetentionDuration`` is set). Readers see a batch
    all at once or not at all. Files of a crashed attempt stay unreferenced (invisible) until
    ``dstream-eo delta orphans --apply`` removes them.

    Merge by key (upsert): with ``merge_keys=[...]`` each batch updates the table's rows whose keys
    match and inserts the others, in ONE Delta merge commit carrying the same application
    transaction (replays and crashes as above). Unit of parallelism in this mode: one Spark task
    per planned task turns its records into Arrow; the driver keeps each key's last row of the batch
    (task order, then record order) and runs the merge, so a batch's rows pass through the driver.

    Attach it with :meth:`attach` (``sink.attach(stream, rows=...)``), which uses the stream's
    :meth:`~dstream_exactly_once.ExactlyOnceDStream.commit_each_batch`.
    """

    def __init__(self, table_uri: str, *, schema: Optional[pa.Schema] = None, partition_by: Sequence[str] = (),
                 app_id: Optional[str] = None, storage_options: Optional[Mapping[str, str]] = None,
                 namespace: str = "__delta__", merge_keys: Sequence[str] = ()) -> None:
        if not isinstance(table_uri, str) or not table_uri.strip():
            raise ConfigurationError(f"table_uri must be a non-empty str (a path or URI), got {table_uri!r}")
        if schema is not None and not isinstance(schema, pa.Schema):
            raise ConfigurationError(f"schema must be a pyarrow.Schema or None, got {type(schema).__name__}")
        if isinstance(partition_by, str) or not all(isinstance(c, str) and c for c in partition_by):
            raise ConfigurationError(f"partition_by must be a list of column names, got {partition_by!r}")
        if app_id is not None and (not isinstance(app_id, str) or not app_id):
            raise ConfigurationError(f"app_id must be a non-empty str or None, got {app_id!r}")
        if storage_options is not None and not all(isinstance(k, str) and isinstance(v, str)
                                                   for k, v in dict(storage_options).items()):
            raise ConfigurationError("storage_options must map str to str")
        if not isinstance(namespace, str) or not namespace:
            raise ConfigurationError(f"namespace must be a non-empty str, got {namespace!r}")
        if isinstance(merge_keys, str) or not all(isinstance(c, str) and c for c in merge_keys):
            raise ConfigurationError(f"merge_keys must be a list of column names (empty: append), got {merge_keys!r}")
        self.target = DeltaTarget(table_uri, storage_options)
        self.schema = schema
        self.partition_by = list(partition_by)
        self.app_id = app_id
        self.namespace = namespace
        self.merge_keys = list(merge_keys)
        if schema is not None:
            check_partition_columns(self.partition_by, schema, None, self.target.describe())
            check_merge_keys(self.merge_keys, schema, self.target.describe())

    def __repr__(self) -> str:
        merge = f", merge_keys={self.merge_keys!r}" if self.merge_keys else ""
        return (f"DeltaSink({self.target.table_uri!r}, partition_by={self.partition_by!r}, app_id={self.app_id!r}"
                f"{merge})")

    @property
    def table_uri(self) -> str:
        return self.target.table_uri

    def txn_app_id(self, store_app_id: str) -> str:
        """The Delta application transaction id of the sink: ``app_id``, or the store's application id."""
        return self.app_id if self.app_id is not None else store_app_id

    def record_key(self, store_app_id: str) -> str:
        """The key of the sink's batch record in the store (namespace ``namespace``)."""
        return f"{self.txn_app_id(store_app_id)}@{self.table_uri}"

    # ------------------------------------------------------------------ checks, before anything is written
    def check(self) -> pa.Schema:
        """Check the sink against the table (schema, partition columns); returns the batch schema.

        Reads the table only. A table that does not exist yet needs ``schema=`` (the first batch's
        commit creates it). Raises :class:`ConfigurationError` naming the column and both types."""
        table = self.target.load()
        where = self.target.describe()
        if table is None:
            if self.schema is None:
                raise ConfigurationError(f"{where} does not exist; pass schema= (a pyarrow.Schema) to create it with "
                                         f"the first batch")
            return self.schema
        table_schema = self.target.arrow_schema(table)
        if self.schema is not None:
            check_schema(self.schema, table_schema, where)
        schema = self.schema if self.schema is not None else table_schema
        check_partition_columns(self.partition_by, schema, self.target.partition_columns(table), where)
        check_merge_keys(self.merge_keys, schema, where)
        return schema

    def attach(self, stream: Any, rows: Optional[RowsFunc] = None) -> None:
        """Write each batch of ``stream`` (an exactly-once stream) to the table exactly once.

        ``rows`` maps a partition's records to rows (dicts, tuples in column order, pyspark Rows or
        Arrow record batches); default: the records themselves. The table is checked here, before the
        stream takes its epoch."""
        if rows is not None and not callable(rows):
            raise ConfigurationError(f"rows must be a function (records) -> rows, or None, got {rows!r}")
        schema = self.check()
        if self.schema is None:
            self.schema = schema

        def output(batch: PlannedBatch, rdd: Any) -> Writes:
            return self.write_batch(stream.store, stream.epoch, batch, rdd, rows)

        stream.commit_each_batch(output)

    # ------------------------------------------------------------------ the protocol
    def _recorded(self, store: TransactionalStore) -> Optional[Dict[str, Any]]:
        record = store.get_value(self.namespace, self.record_key(store.app_id))
        return record if isinstance(record, dict) else None

    def _committed_before(self, store: TransactionalStore, table: Any, batch_id: int) -> bool:
        """Whether the table holds ``batch_id`` under the sink's transaction; refuses a table whose
        transaction this store never started (another application sharing the transaction id)."""
        app = self.txn_app_id(store.app_id)
        done = self.target.transaction_version(table, app)
        if done is None or done < batch_id:
            return False
        record = self._recorded(store)
        if record is None or int(record.get("batch", -1)) < batch_id:
            raise ConfigurationError(
                f"{self.target.describe()} holds batch {done} of application transaction {app!r}, but this store's "
                f"application {store.app_id!r} never started batch {batch_id} for it: another application writes "
                f"under the same transaction id. Give the sink its own app_id= (nothing was written)")
        return True

    def _commit_or_lost(self, store: TransactionalStore, batch_id: int, lost_note: str,
                        commit: Callable[[], int]) -> Optional[int]:
        """Run the batch's table ``commit``; the version written, or ``None`` when it lost the race to
        another attempt of the same batch (an older driver) that put the batch in the table. A commit
        lost to any other change raises :class:`TableConflictError`."""
        try:
            return commit()
        except TableConflictError:
            if not self._committed_before(store, self.target.load(), batch_id):
                raise
            log.warning("%s: another attempt of batch %d of %r committed first (an older driver)%s",
                        self.target.describe(), batch_id, self.txn_app_id(store.app_id), lost_note)
            return None

    def write_tasks(self, rdd: Any, schema: pa.Schema, rows: Optional[RowsFunc], batch_id: int) -> List[FileAdd]:
        """Write the batch's files, one Spark task per partition of ``rdd``; the files' add actions."""
        uri, partition_by, where = self.table_uri, self.partition_by, f"{self.target.describe()} batch {batch_id}"
        to_rows = rows if rows is not None else (lambda records: records)

        def per_task(index: int, records: Iterable[Any]) -> List[FileAdd]:
            return write_files(uri, rows_to_table(to_rows(records), schema, where), partition_by, index)

        return list(rdd.mapPartitionsWithIndex(per_task).collect())

    def write_batch(self, store: TransactionalStore, epoch: int, batch: PlannedBatch, rdd: Any,
                    rows: Optional[RowsFunc] = None) -> Writes:
        """Write ``batch`` (its RDD ``rdd``) to the table exactly once; returns the store writes that
        commit with the batch's positions (the batch's record).

        1. the table already holds the batch's transaction → a replay: nothing is written;
        2. executors write the files;
        3. the store records them as pending (epoch checked: a fenced driver stops here);
        4. ONE Delta commit adds them with the transaction ``(app, batch id)``.
        """
        schema = self.schema if self.schema is not None else self.check()
        key, app = self.record_key(store.app_id), self.txn_app_id(store.app_id)
        table = self.target.latest()
        base = {"batch": batch.batch_id, "table": self.table_uri}
        if self._committed_before(store, table, batch.batch_id):
            log.info("%s already holds batch %d of %r; nothing written", self.target.describe(), batch.batch_id, app)
            return Writes().put(self.namespace, key, {**base, "state": "committed", "version": None, "files": []})
        if self.merge_keys:
            return self._merge_batch(store, epoch, batch, rdd, rows, schema, table)
        adds = self.write_tasks(rdd, schema, rows, batch.batch_id)
        files = [a.path for a in adds]
        store.commit(epoch, batch, Writes().put(self.namespace, key, {**base, "state": "pending", "files": files}),
                     ranges=[], complete_batch=False)
        total = sum(a.rows for a in adds)
        meta = batch_metadata(app, batch.batch_id, batch.ranges, total)
        version = self._commit_or_lost(store, batch.batch_id, "; this attempt's files stay unreferenced",
                                       lambda: self.target.commit(table, adds, schema, self.partition_by, app,
                                                                  batch.batch_id, meta))
        if version is None:
            return Writes().put(self.namespace, key, {**base, "state": "committed", "version": None, "files": []})
        log.info("%s: batch %d committed as version %d (%d files, %d rows)", self.target.describe(), batch.batch_id,
                 version, len(adds), total)
        return Writes().put(self.namespace, key, {**base, "state": "committed", "version": version, "files": files,
                                                  "rows": total})

    def _merge_batch(self, store: TransactionalStore, epoch: int, batch: PlannedBatch, rdd: Any,
                     rows: Optional[RowsFunc], schema: pa.Schema, table: Any) -> Writes:
        """``write_batch`` in merge mode: the executors turn their records into Arrow tables, the
        driver keeps each key's last row of the batch and upserts them in ONE Delta commit."""
        key, app = self.record_key(store.app_id), self.txn_app_id(store.app_id)
        base = {"batch": batch.batch_id, "table": self.table_uri}
        where = f"{self.target.describe()} batch {batch.batch_id}"
        to_rows = rows if rows is not None else (lambda records: records)

        def per_task(_index: int, records: Iterable[Any]) -> List[pa.Table]:
            return [rows_to_table(to_rows(records), schema, where)]

        parts = list(rdd.mapPartitionsWithIndex(per_task).collect())
        data = latest_by_key(pa.concat_tables(parts) if parts else schema.empty_table(), self.merge_keys)
        store.commit(epoch, batch, Writes().put(self.namespace, key, {**base, "state": "pending", "files": []}),
                     ranges=[], complete_batch=False)
        meta = batch_metadata(app, batch.batch_id, batch.ranges, data.num_rows)
        version = self._commit_or_lost(store, batch.batch_id, "",
                                       lambda: self.target.merge(table, data, self.merge_keys, self.partition_by, app,
                                                                 batch.batch_id, meta))
        if version is None:
            return Writes().put(self.namespace, key, {**base, "state": "committed", "version": None, "files": []})
        log.info("%s: batch %d merged as version %d (%d rows by %s)", self.target.describe(), batch.batch_id, version,
                 data.num_rows, ", ".join(self.merge_keys))
        return Writes().put(self.namespace, key, {**base, "state": "committed", "version": version, "files": [],
                                                  "rows": data.num_rows})
