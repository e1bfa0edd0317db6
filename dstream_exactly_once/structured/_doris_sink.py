"""The ``deo-doris`` Structured Streaming sink: Doris Stream Load in two phases, decided by the store.

Unit of parallelism: one Stream Load per Spark partition per micro-batch, under the label
``{app}.{table}`` + batch id + partition id (:class:`~dstream_exactly_once.sinks.LabelGenerator`:
at most 128 characters, hashed when longer — the labels :class:`~dstream_exactly_once.sinks.doris.DorisSink`
gives application ``app``).

Protocol (two-phase commit, the offset store decides):

1. executor, ``write``: when the store already holds the decision of this batch nothing is loaded;
   otherwise the task's rows are pre-committed under the partition's label (invisible rows, a
   transaction id). A label still held by a pre-committed transaction of a crashed attempt of the same
   batch is aborted first (no decision names it) and the rows are loaded again; a label Doris reports
   as finished is not loaded again. The task returns label and transaction id as its commit message.
2. driver, ``commit(messages, batchId)``: ONE store transaction records the decision — every label
   with its transaction id, plus the query's next batch id under compare-and-set
   (``stored == batchId``) and the epoch check, exactly as the ``deo-store`` sink commits. This is
   the commit point.
3. driver: each recorded Doris transaction is committed (``already committed`` counts as success).

``abort(messages, batchId)`` aborts the pre-committed transactions of a batch without a decision and
leaves those of a decided batch alone (they get committed).

Crash points: after 1 (no decision) — the replayed batch aborts the old transactions and loads again;
after 2 — the replayed batch loads nothing, finds the decision and commits the transactions it names
(:meth:`DorisSink.recover <dstream_exactly_once.sinks.doris.DorisSink.recover>`); after 3 — the same,
each transaction is found committed. Delivery guarantee: exactly-once provided the query restarts
from its checkpoint and an in-doubt transaction is resolved within Doris's pre-commit timeout
(``stream_load_default_precommit_timeout_second``, 1 h); past it the store counted rows Doris
aborted and the replay raises :class:`~dstream_exactly_once.errors.LoadRejectedError` naming the
label. A replay with fewer partitions than the crashed attempt leaves the extra pre-committed loads
to Doris's timeout (they were never decided, so nothing is lost or doubled).

Runs: the decision of each batch is stored with the query run that made it, and a new checkpoint on
an application with decided batches is refused before anything is loaded, as the ``deo-store`` sink
does (:mod:`._sink_runs`; option ``new_checkpoint=continue`` continues the application, its batches
taking the store's next batch ids, so its labels never meet those of the run before). Output mode:
``append`` only — ``complete`` is refused when the query starts (it would load the whole result
table into Doris again at every micro-batch); Spark refuses ``update`` for this sink.

Rows: ``format=csv`` (default) sends each row's values joined by ``column_separator``; ``format=json``
sends each row as an object of its columns. The store and Doris passwords travel in options
``store.password`` and ``doris.password`` and never appear in reprs, logs or errors.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ..errors import ConfigurationError, DStreamExactlyOnceError, LoadRejectedError
from ..stores._writes import CommitOutcome, PlannedBatch
from ._sink_runs import BatchDecision, QueryRun, decide_batch, read_state, run_of_messages
from ._store_sink import SINK_POSITION_KEY, SinkBatchRange, StoreSinkOptions, commit_batch

__all__ = ["DORIS_SINK_NAME", "DorisCommit", "DorisSinkOptions", "abort_batch", "commit_doris_batch",
           "doris_sink_options", "load_partition"]

log = logging.getLogger(__name__)

#: The name to pass to ``writeStream.format``.
DORIS_SINK_NAME = "deo-doris"

_DORIS_OPTIONS = ("fe", "db", "table", "user", "doris.password", "format", "columns", "column_separator",
                  "strict_labels")
_STORE_OPTIONS = ("store", "store.password", "app_id", "app", "new_checkpoint")
_BOOLS = {"true": True, "false": False}


def check_doris_mode(complete: bool) -> None:
    """Refuse output mode ``complete`` (Spark's ``overwrite`` flag) when the query starts."""
    if complete:
        raise ConfigurationError("the deo-doris sink accepts output mode 'append' only, got 'complete': each "
                                 "micro-batch of a complete-mode query holds the whole result table, which would "
                                 "be loaded into Doris again at every batch; write the query in append mode")


@dataclass(frozen=True)
class DorisCommit:
    """One task's commit message: its label and pre-committed transaction (``None``: nothing loaded),
    and the query run of the task."""

    partition_id: int
    label: str
    txn_id: Optional[int]
    rows: int
    finished_before: bool = False
    run: Optional[QueryRun] = None


@dataclass(frozen=True)
class DorisSinkOptions:
    """The checked options of a ``deo-doris`` query: the store part and the Doris part.

    Neither password appears in ``repr``.
    """

    store: StoreSinkOptions
    doris: Mapping[str, str]

    def __repr__(self) -> str:
        shown = {k: v for k, v in self.doris.items() if k != "doris.password"}
        return f"DorisSinkOptions(store={self.store!r}, doris={shown!r})"

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> DorisSinkOptions:
        """Check ``options``; raises one :class:`ConfigurationError` naming the key, the bad value and
        what is allowed. Opens nothing, writes nothing."""
        lowered = {str(k).lower(): v for k, v in options.items()}
        doris = {k: str(v) for k, v in lowered.items() if k in _DORIS_OPTIONS}
        rest = {k: v for k, v in lowered.items() if k not in _DORIS_OPTIONS}
        unknown = sorted(k for k in rest if k not in _STORE_OPTIONS + ("epoch", "path", "checkpointlocation"))
        if unknown:
            raise ConfigurationError(f"unknown deo-doris option(s) {unknown}; allowed: {', '.join(_STORE_OPTIONS)} "
                                     f"(app: alias of app_id), {', '.join(_DORIS_OPTIONS)}")
        for key in ("fe", "db", "table"):
            if not doris.get(key):
                raise ConfigurationError(f"deo-doris option {key!r} is required (fe: the FE URL "
                                         f"http://host:8030, db and table: the target table)")
        strict = doris.get("strict_labels", "false").lower()
        if strict not in _BOOLS:
            raise ConfigurationError(f"deo-doris option 'strict_labels' must be true or false, "
                                     f"got {doris['strict_labels']!r}")
        opts = cls(StoreSinkOptions.parse(rest, sink=DORIS_SINK_NAME), doris)
        opts.sink()  # checks the Doris settings and the labels before anything runs
        return opts

    @property
    def app(self) -> str:
        return self.store.app

    def client(self) -> Any:
        """The Stream Load client of these options."""
        from ..sinks.doris import DorisStreamLoadClient

        d = self.doris
        kwargs: Dict[str, Any] = {"user": d.get("user", "root"), "password": d.get("doris.password", ""),
                                  "format": d.get("format", "csv")}
        if d.get("columns"):
            kwargs["columns"] = d["columns"]
        if d.get("column_separator"):
            kwargs["column_separator"] = d["column_separator"]
        try:
            return DorisStreamLoadClient(d["fe"], d["db"], d["table"], **kwargs)
        except ConfigurationError as exc:
            raise ConfigurationError(f"deo-doris options: {exc}") from None

    def sink(self) -> Any:
        """The :class:`~dstream_exactly_once.sinks.doris.DorisSink` whose labels, records and recovery
        this sink shares."""
        from ..sinks.doris import DorisSink

        return DorisSink(self.client(), strict_labels=_BOOLS[self.doris.get("strict_labels", "false").lower()])


def doris_sink_options(store: str, app_id: str, fe: str, db: str, table: str, *, user: str = "root",
                       password: str = "", new_checkpoint: str = "refuse", **doris: str) -> Dict[str, str]:
    """Check the sink's options and return them as writer options; nothing is opened or written.

    ``df.writeStream.format("deo-doris").options(**doris_sink_options(url, "app", "http://fe:8030", "db",
    "table")).option("checkpointLocation", …).start()``. The store is first reached, and the epoch
    of the query's start taken, by the query's first commit. ``doris`` takes further options
    (``format``, ``columns``, ``column_separator``, ``strict_labels``); ``new_checkpoint`` as for
    :func:`~dstream_exactly_once.structured.store_sink_options`.
    """
    from ..option_registry import keyword_checks

    keyword_checks("doris_sink_options", store=store, db=db, table=table, user=user, **doris)
    if password != "":
        keyword_checks("doris_sink_options", password=password)
    options = {"store": store, "app_id": app_id, "fe": fe, "db": db, "table": table, "user": user,
               "new_checkpoint": new_checkpoint, **doris}
    if password:
        options["doris.password"] = password
    DorisSinkOptions.parse(options)
    return options


def _decision(opts: DorisSinkOptions, store: Any, batch_id: int, run: QueryRun) -> BatchDecision:
    return decide_batch(f"{DORIS_SINK_NAME} app {opts.app} batch {batch_id}", read_state(store, SINK_POSITION_KEY),
                        run, batch_id, opts.store.new_checkpoint)


def _decided(opts: DorisSinkOptions, store: Any, batch_id: int, run: Optional[QueryRun]) -> bool:
    """Whether the store decided Spark batch ``batch_id`` of ``run`` (for an abort: never raises)."""
    state = read_state(store, SINK_POSITION_KEY)
    if state is None or run is None:
        return False
    try:
        return _decision(opts, store, batch_id, run).replay
    except DStreamExactlyOnceError:  # another run's batch or a replaced run: judged by the stored numbers
        return state.query in (None, run.query) and state.next_batch > state.base + batch_id


def _row_values(row: Any, json_format: bool) -> Any:
    as_dict = getattr(row, "asDict", None)
    if json_format:
        return as_dict(recursive=True) if callable(as_dict) else row
    return tuple(row) if callable(as_dict) else row


def load_partition(opts: DorisSinkOptions, batch_id: int, partition_id: int, rows: Iterable[Any],
                   run: QueryRun) -> DorisCommit:
    """Phase one for one task (on an executor) of Spark batch ``batch_id`` of ``run``: pre-commit ``rows``
    under the partition's label (of the application's batch id). A batch of another checkpoint is
    refused here, before anything is loaded."""
    from ..stores import open_store

    sink = opts.sink()
    client = sink.client
    with open_store(opts.store.store, opts.app) as store:
        decision = _decision(opts, store, batch_id, run)
    label = sink.label_for(opts.app, decision.app_batch, partition_id)
    if decision.replay:
        log.info("deo-doris app %s batch %d: decided before; %s is not loaded again", opts.app, batch_id, label)
        return DorisCommit(partition_id, label, None, 0, True, run)
    body = client.encode_rows(_row_values(r, client.format == "json") for r in rows)
    if not body:
        return DorisCommit(partition_id, label, None, 0, run=run)
    try:
        result = client.stream_load(label, body, two_phase_commit=True)
    except LoadRejectedError:
        # A crashed attempt of this undecided batch may hold the label pre-committed: abort it (no
        # decision names it) and load again; anything else is raised as it is.
        if client.resolve_in_doubt(label, None, "abort").value != "aborted":
            raise
        log.warning("deo-doris app %s batch %d: aborted the undecided pre-committed load %s of an earlier "
                    "attempt; loading again", opts.app, batch_id, label)
        result = client.stream_load(label, body, two_phase_commit=True)
    if result.replayed:
        return DorisCommit(partition_id, label, result.txn_id, 0, True, run)
    if result.txn_id is None:
        raise LoadRejectedError(f"{client.describe(label)}: pre-commit answered without a transaction id")
    return DorisCommit(partition_id, label, result.txn_id, result.loaded_rows, run=run)


def _check_messages(opts: DorisSinkOptions, messages: Sequence[Optional[DorisCommit]], batch_id: int
                    ) -> List[DorisCommit]:
    parts = sorted((m for m in messages if m is not None), key=lambda m: m.partition_id)
    if len(parts) != len(messages):
        raise ConfigurationError(f"deo-doris app {opts.app} batch {batch_id}: {len(messages) - len(parts)} "
                                 f"task(s) sent no commit message; nothing was decided")
    return parts


def _recover(opts: DorisSinkOptions, store: Any, batch_id: int, partitions: int) -> Dict[str, Any]:
    batch = PlannedBatch(batch_id, 0, (SinkBatchRange(batch_id),))
    return opts.sink().recover(store, batch, partition_ids=range(partitions))  # type: ignore[no-any-return]


def commit_doris_batch(opts: DorisSinkOptions, messages: Sequence[Optional[DorisCommit]], batch_id: int
                       ) -> Tuple[CommitOutcome, Dict[str, str]]:
    """Phases two and three on the driver: record the decision of ``batch_id``, then commit its loads.

    Returns the store's outcome and ``{label: Doris outcome}``. A batch decided before (a replay) is
    finished as the store recorded it; the messages of the replay load nothing.
    """
    from ..stores import open_store
    from ..stores._writes import Writes

    parts = _check_messages(opts, messages, batch_id)
    run = run_of_messages([m.run for m in parts if m.run is not None],  # type: ignore[misc]
                          f"{DORIS_SINK_NAME} app {opts.app} batch {batch_id}")
    sink = opts.sink()
    table = f"{sink.client.db}.{sink.client.table}"
    with open_store(opts.store.store, opts.app) as store:
        app_batch = _decision(opts, store, batch_id, run).app_batch
    writes = Writes()
    for m in parts:
        if m.txn_id is not None and not m.finished_before:
            writes.add_label(m.label)
            writes.put(sink.namespace, m.label, {"txn_id": m.txn_id, "rows": m.rows, "table": table,
                                                 "batch": app_batch, "partition": m.partition_id})
    outcome = commit_batch(opts.store, [writes], batch_id, run, sink_name=DORIS_SINK_NAME)
    with open_store(opts.store.store, opts.app) as store:
        if outcome is CommitOutcome.REPLAYED:
            done = _recover(opts, store, app_batch, len(parts))
            log.info("deo-doris app %s batch %d: decided before; in-doubt loads finished: %s", opts.app, batch_id,
                     {k: v.value for k, v in done.items()})
        else:
            done = {m.label: sink.client.commit_txn(m.txn_id) for m in parts
                    if m.txn_id is not None and not m.finished_before}
    return outcome, {k: v.value for k, v in done.items()}


def abort_batch(opts: DorisSinkOptions, messages: Sequence[Optional[DorisCommit]], batch_id: int) -> List[str]:
    """Abort the pre-committed loads of ``batch_id`` unless the store decided it; the labels aborted."""
    from ..stores import open_store

    runs = [m.run for m in messages if m is not None and m.run is not None]
    with open_store(opts.store.store, opts.app) as store:
        if _decided(opts, store, batch_id, runs[0] if runs else None):
            log.warning("deo-doris app %s batch %d: abort after the store decided it; its loads stay pre-committed "
                        "and the replay of the batch commits them", opts.app, batch_id)
            return []
    client = opts.client()
    aborted = []
    for m in messages:
        if m is not None and m.txn_id is not None and not m.finished_before:
            client.abort_txn(m.txn_id)
            aborted.append(m.label)
    return aborted
