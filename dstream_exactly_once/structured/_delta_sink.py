"""The ``deo-delta`` Structured Streaming sink: each micro-batch in ONE Delta Lake commit (``deltalake``).

Unit of parallelism: one Spark task per partition of the micro-batch writes its rows as Parquet
files into the table directory (one file per table partition value) and returns their Delta
``add`` actions as its commit message; the driver's ``commit(messages, batchId)`` adds all of them in
one Delta commit.

Protocol (the table's application transaction decides the data, the store the batch ids):

1. executor, ``write``: the store's batch id of the micro-batch is worked out as the ``deo-store``
   sink does (:mod:`._sink_runs`; a batch of another checkpoint is refused here). When the store
   decided the batch, or the table already holds the application transaction of that batch id,
   nothing is written; otherwise the rows become files (unreferenced: no reader sees them);
2. driver, ``commit``: the table's transaction of the application is read; at the batch id → the
   commit was made before (nothing is added, go to 4); below it →
3. driver: ONE store transaction records the batch's files as ``pending`` in the sink's record
   (key ``{txn app id}@{table}``, namespace ``__delta__``), with the epoch check (the run's first
   commit takes its epoch here): a replaced, older run stops here, before the table; then ONE
   Delta commit adds every file with the transaction ``(txn app id, batch id)`` and the batch's ids
   and row count in the commit's custom metadata (key ``dstreamExactlyOnce``);
4. driver: ONE store transaction records the batch with its run, under compare-and-set of the
   query's next batch id and the epoch check, exactly as the ``deo-store`` sink commits; the
   record is now ``committed`` with the table version.

Merge by key (upsert), option ``merge_keys``: in step 1 each task turns its rows into an Arrow table
and sends it in its commit message (no file is written on the executors; the batch's rows pass
through the driver); in step 2 the driver keeps each key's last row of the batch (task order, then
row order) and runs ONE Delta merge commit — rows whose keys match are updated, the others
inserted — carrying the same application transaction and metadata. Replays and crashes are as
for an append: the merge commit is made once.

Crash points: before the Delta commit — the files stay unreferenced (the store's ``pending`` record
names them; ``dstream-eo delta orphans`` removes them) and the replayed batch writes new ones;
between the Delta commit and 4 — the replay finds the transaction in the table and writes nothing;
after 4 — the replay finds the store's decision. Two runs committing one
batch: Delta refuses the second commit carrying the same application transaction, and the loser
finds the batch in the table. A table that is more than one batch ahead of the store under the
sink's transaction id (another application writing under it) is refused, not taken for a replay.

Delivery guarantee: exactly-once provided the query restarts from its checkpoint and nothing else
commits to the table under the sink's transaction id. Output modes: ``append``; ``complete`` only with
``merge_keys`` (each batch holds the whole result table, upserted by key: "set" semantics; a key
that leaves the result keeps its last row in the table); without ``merge_keys`` ``complete`` is
refused when the query starts. Spark refuses ``update`` for Python data sources. The table's schema,
``partition_by`` and ``merge_keys`` are checked against the query's schema when the query starts,
before anything is written; a table that does not exist yet is created by the first batch's commit.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ..errors import ConfigurationError, TableConflictError
from ..stores._writes import CommitOutcome, PlannedBatch, Writes
from ._sink_runs import BatchDecision, QueryRun, decide_batch, read_state, run_of_messages
from ._store_sink import SINK_POSITION_KEY, SinkBatchRange, StoreSinkOptions, commit_batch

__all__ = ["DELTA_SINK_NAME", "DeltaSinkOptions", "DeltaTaskFiles", "commit_delta_batch", "delta_sink_options",
           "write_partition"]

log = logging.getLogger(__name__)

#: The name to pass to ``writeStream.format``.
DELTA_SINK_NAME = "deo-delta"

_DELTA_OPTIONS = ("table", "partition_by", "txn_app_id", "merge_keys")
_STORE_OPTIONS = ("store", "store.password", "app_id", "app", "new_checkpoint")
_NAMESPACE = "__delta__"


def check_delta_mode(complete: bool, merge_keys: Sequence[str] = ()) -> None:
    """Refuse output mode ``complete`` (Spark's ``overwrite`` flag) without ``merge_keys`` when the query starts."""
    if complete and not merge_keys:
        raise ConfigurationError("the deo-delta sink accepts output mode 'complete' only with option merge_keys, got "
                                 "'complete' without: each micro-batch of a complete-mode query holds the whole result "
                                 "table, which would be appended to the Delta table again at every batch; write the "
                                 "query in append mode, or upsert each batch by key with merge_keys")


@dataclass(frozen=True)
class DeltaTaskFiles:
    """One task's commit message: the files it wrote (``()``: none), their rows, and the task's query run;
    ``skipped``: the batch was decided or committed before, so nothing was written; ``data``: in merge
    mode, the task's rows as an Arrow table (no file is written)."""

    partition_id: int
    files: Tuple[Any, ...]
    rows: int
    run: QueryRun
    skipped: bool = False
    data: Optional[Any] = None


@dataclass(frozen=True)
class DeltaSinkOptions:
    """The checked options of a ``deo-delta`` query: the store part and the Delta part."""

    store: StoreSinkOptions
    table: str
    partition_by: Tuple[str, ...]
    txn_app_id: Optional[str]
    merge_keys: Tuple[str, ...] = ()

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> DeltaSinkOptions:
        """Check ``options``; raises one :class:`ConfigurationError` naming the key, the bad value and what
        is allowed. Opens nothing, writes nothing."""
        from ..option_registry import entry_point

        entry = entry_point(DELTA_SINK_NAME)
        lowered = {str(k).lower(): v for k, v in options.items()}
        delta = {k: v for k, v in lowered.items() if k in _DELTA_OPTIONS}
        rest = {k: v for k, v in lowered.items() if k not in _DELTA_OPTIONS}
        unknown = sorted(k for k in rest if k not in _STORE_OPTIONS + ("path", "checkpointlocation"))
        if unknown:
            raise ConfigurationError(f"unknown deo-delta option(s) {unknown}; allowed: {', '.join(_STORE_OPTIONS)} "
                                     f"(app: alias of app_id), {', '.join(_DELTA_OPTIONS)}")
        if not delta.get("table"):
            raise ConfigurationError("deo-delta option 'table' is required (the Delta table's path or URI)")
        for key in _DELTA_OPTIONS:
            if key in delta:
                entry.option(key).parse(delta[key], f"deo-delta option {key!r}")
        parts = _columns(delta.get("partition_by"))
        keys = _columns(delta.get("merge_keys"))
        if len(set(keys)) != len(keys):
            raise ConfigurationError(f"deo-delta option 'merge_keys' names a column twice: {delta['merge_keys']!r}")
        return cls(StoreSinkOptions.parse(rest, sink=DELTA_SINK_NAME), str(delta["table"]), parts,
                   delta.get("txn_app_id") or None, keys)

    @property
    def app(self) -> str:
        return self.store.app

    @property
    def txn_app(self) -> str:
        """The application transaction id in the table: ``txn_app_id``, or the application id."""
        return self.txn_app_id or self.store.app

    def target(self) -> Any:
        from ..sinks.delta._table import DeltaTarget

        return DeltaTarget(self.table)

    def check_table(self, schema: Any) -> None:
        """Check the query's Arrow ``schema``, ``partition_by`` and ``merge_keys`` (columns of the schema)
        against the table, if it exists."""
        from ..sinks.delta._merge import check_merge_keys
        from ..sinks.delta._schema import check_partition_columns, check_schema

        target = self.target()
        table = target.load()
        where = f"deo-delta {target.describe()}"
        if table is not None:
            check_schema(schema, target.arrow_schema(table), where)
        check_partition_columns(self.partition_by, schema, None if table is None else target.partition_columns(table),
                                where)
        check_merge_keys(self.merge_keys, schema, where)


def _columns(value: Any) -> Tuple[str, ...]:
    """A comma-separated option value as column names (blank: none)."""
    return tuple(c.strip() for c in str(value or "").split(",") if c.strip())


def delta_sink_options(store: str, app_id: str, table_uri: str, *, partition_by: Optional[Sequence[str]] = None,
                       txn_app_id: Optional[str] = None, new_checkpoint: str = "refuse",
                       merge_keys: Optional[Sequence[str]] = None) -> Dict[str, str]:
    """Check the sink's options and return them as writer options; nothing is opened or written.

    ``df.writeStream.format("deo-delta").options(**delta_sink_options(url, "app", "/data/orders"))
    .option("checkpointLocation", …).start()``. ``partition_by`` names the table's partition columns
    (a non-empty list; ``None``: not partitioned); ``txn_app_id`` the application transaction id in
    the table (default ``app_id``); ``new_checkpoint`` as for
    :func:`~dstream_exactly_once.structured.store_sink_options`; ``merge_keys`` (a non-empty
    list; ``None``: append) makes each batch ONE merge by these columns (upsert). The keys are checked
    against the query's schema when the query starts.
    """
    from ..option_registry import keyword_checks

    keyword_checks("delta_sink_options", store=store, app_id=app_id, table_uri=table_uri, partition_by=partition_by,
                   txn_app_id=txn_app_id, new_checkpoint=new_checkpoint, merge_keys=merge_keys)
    for name, columns in (("partition_by", partition_by), ("merge_keys", merge_keys)):
        if columns is not None and any("," in c for c in columns):
            raise ConfigurationError(f"delta_sink_options() option {name!r} must be a list of column names "
                                     f"without commas, got {columns!r}")
    options = {"store": store, "app_id": app_id, "table": table_uri, "new_checkpoint": new_checkpoint}
    if partition_by:
        options["partition_by"] = ",".join(partition_by)
    if txn_app_id is not None:
        options["txn_app_id"] = txn_app_id
    if merge_keys:
        options["merge_keys"] = ",".join(merge_keys)
    DeltaSinkOptions.parse(options)
    return options


def _decision(opts: DeltaSinkOptions, store: Any, batch_id: int, run: QueryRun) -> BatchDecision:
    return decide_batch(f"{DELTA_SINK_NAME} app {opts.app} batch {batch_id}", read_state(store, SINK_POSITION_KEY),
                        run, batch_id, opts.store.new_checkpoint)


def _in_table(opts: DeltaSinkOptions, table: Any, app_batch: int) -> bool:
    """Whether the table holds ``app_batch`` under the sink's transaction; refuses a table ahead of the store."""
    done = opts.target().transaction_version(table, opts.txn_app)
    if done is None or done < app_batch:
        return False
    if done > app_batch:
        raise ConfigurationError(
            f"deo-delta {opts.target().describe()} holds batch {done} of application transaction {opts.txn_app!r} "
            f"but application {opts.app!r} of the store is at batch {app_batch}: another application writes under "
            f"the same transaction id. Give the sink its own txn_app_id (nothing was written)")
    return True


def write_partition(opts: DeltaSinkOptions, schema: Any, batch_id: int, partition_id: int, rows: Iterable[Any],
                    run: QueryRun) -> DeltaTaskFiles:
    """Step 1 for one task (on an executor) of Spark batch ``batch_id`` of ``run``: write ``rows`` as files."""
    from ..sinks.delta._files import write_files
    from ..sinks.delta._schema import rows_to_table
    from ..stores import open_store

    with open_store(opts.store.store, opts.app) as store:
        decision = _decision(opts, store, batch_id, run)
    if decision.replay or _in_table(opts, opts.target().load(), decision.app_batch):
        log.info("deo-delta app %s batch %d: committed before; partition %d writes nothing", opts.app, batch_id,
                 partition_id)
        return DeltaTaskFiles(partition_id, (), 0, run, True)
    where = f"deo-delta {opts.table} batch {batch_id} partition {partition_id}"
    table = rows_to_table(rows, schema, where)
    if opts.merge_keys:
        return DeltaTaskFiles(partition_id, (), table.num_rows, run, data=table)
    files = write_files(opts.table, table, opts.partition_by, partition_id)
    return DeltaTaskFiles(partition_id, tuple(files), sum(f.rows for f in files), run)


def _record_pending(opts: DeltaSinkOptions, store: Any, decision: BatchDecision, run: QueryRun,
                    parts: Sequence[DeltaTaskFiles]) -> int:
    """Step 3's store transaction: the batch's files as ``pending`` in the sink's record, under the
    run's epoch (its first commit takes one); a replaced run is refused here. Returns the epoch."""
    epoch = decision.epoch if decision.epoch is not None else store.start_epoch()
    doc = json.dumps(decision.meta(run, epoch), separators=(",", ":"), sort_keys=True)
    batch = PlannedBatch(decision.app_batch, 0, (SinkBatchRange(decision.app_batch, doc),))
    record = {"batch": decision.app_batch, "table": opts.table, "state": "pending",
              "files": [f.path for p in parts for f in p.files]}
    store.commit(epoch, batch, Writes().put(_NAMESPACE, _record_key(opts), record), ranges=[], complete_batch=False)
    return epoch


def _record_key(opts: DeltaSinkOptions) -> str:
    return f"{opts.txn_app}@{opts.table}"


def _commit_table(opts: DeltaSinkOptions, schema: Any, parts: Sequence[DeltaTaskFiles], batch_id: int,
                  app_batch: int, table: Any) -> Tuple[Optional[int], int]:
    """Step 3's Delta commit (a merge with ``merge_keys``) on the snapshot ``table``; the version
    written (``None``: another run committed the batch first) and the rows added or merged."""
    target = opts.target()
    try:
        if opts.merge_keys:
            data = _merge_rows(schema, parts, opts.merge_keys)
            meta = _metadata(opts, app_batch, batch_id, data.num_rows)
            return (int(target.merge(table, data, opts.merge_keys, opts.partition_by, opts.txn_app, app_batch, meta)),
                    data.num_rows)
        files, rows = [f for p in parts for f in p.files], sum(p.rows for p in parts)
        meta = _metadata(opts, app_batch, batch_id, rows)
        return int(target.commit(table, files, schema, opts.partition_by, opts.txn_app, app_batch, meta)), rows
    except TableConflictError:
        if not _in_table(opts, target.load(), app_batch):
            raise
        log.warning("deo-delta app %s batch %d: another run committed it first%s", opts.app, batch_id,
                    "" if opts.merge_keys else "; this run's files stay unreferenced")
        return None, 0


def _metadata(opts: DeltaSinkOptions, app_batch: int, batch_id: int, rows: int) -> Dict[str, str]:
    """The custom metadata of a batch's commit (the store's and Spark's batch ids, the rows)."""
    from ..sinks.delta._table import METADATA_KEY

    return {METADATA_KEY: json.dumps({"app_id": opts.txn_app, "batch_id": app_batch, "spark_batch_id": batch_id,
                                      "rows": rows, "positions": []}, separators=(",", ":"), sort_keys=True)}


def _merge_rows(schema: Any, parts: Sequence[DeltaTaskFiles], keys: Sequence[str]) -> Any:
    """The rows of a merge batch: the tasks' tables in partition order, each key's last row kept."""
    import pyarrow as pa

    from ..sinks.delta._merge import latest_by_key

    tables = [p.data for p in parts if p.data is not None]
    return latest_by_key(pa.concat_tables(tables) if tables else schema.empty_table(), keys)


def commit_delta_batch(opts: DeltaSinkOptions, schema: Any, messages: Sequence[Optional[DeltaTaskFiles]],
                       batch_id: int) -> Tuple[CommitOutcome, Optional[int]]:
    """Steps 2 to 4 on the driver; returns the store's outcome and the table version written
    (``None`` when nothing was added: a replay)."""
    from ..stores import open_store

    parts = sorted((m for m in messages if m is not None), key=lambda m: m.partition_id)
    if len(parts) != len(messages):
        raise ConfigurationError(f"deo-delta app {opts.app} batch {batch_id}: {len(messages) - len(parts)} task(s) "
                                 f"sent no commit message; nothing was committed")
    run = run_of_messages([m.run for m in parts], f"{DELTA_SINK_NAME} app {opts.app} batch {batch_id}")
    with open_store(opts.store.store, opts.app) as store:
        decision = _decision(opts, store, batch_id, run)
        if decision.replay:
            log.info("deo-delta app %s batch %d: decided before; nothing committed", opts.app, batch_id)
            return CommitOutcome.REPLAYED, None
        table = opts.target().load()
        in_table = _in_table(opts, table, decision.app_batch)
        epoch = None if in_table else _record_pending(opts, store, decision, run, parts)
    version, rows = (None, 0) if in_table else _commit_table(opts, schema, parts, batch_id, decision.app_batch, table)
    files: List[str] = [f.path for p in parts for f in p.files] if version is not None else []
    record = {"batch": decision.app_batch, "table": opts.table, "state": "committed", "version": version,
              "files": files, "rows": rows}
    writes = Writes().put(_NAMESPACE, _record_key(opts), record)
    return commit_batch(opts.store, [writes], batch_id, run, sink_name=DELTA_SINK_NAME, epoch=epoch), version
