"""The ``deo-store`` Structured Streaming sink: each micro-batch in ONE store transaction.

Unit of parallelism: one Spark task per partition of the micro-batch turns its rows into
:class:`~dstream_exactly_once.Writes` (nothing is written on executors); the driver's
``commit(messages, batchId)`` merges them in partition order and commits them with the batch id in
one transaction of the store (SQLite, PostgreSQL or Redis).

Delivery guarantee: exactly-once into the store as long as the query restarts from its checkpoint.
The store keeps, per application (one application id per query), the next batch id to commit as a
position (compare-and-set ``stored == batchId`` → apply; ``== batchId + 1`` → the batch was
committed before, nothing is written) plus the commit-log entry of the batch id; a batch Spark
replays after a crash is therefore skipped, and one that never committed is applied once. Each
committed batch id is stored with the query run that committed it (Spark's query id, kept in the
checkpoint, and run id, new at each start; :mod:`._sink_runs`): a query started from a *new*
checkpoint against an application with committed batches — one or many — is refused with
:class:`~dstream_exactly_once.errors.OffsetConflictError` before anything is written, unless option
``new_checkpoint=continue`` continues the application from the stored state. The first commit of
each start of the query takes a new epoch; a zombie run still committing with an older one is
refused with :class:`~dstream_exactly_once.errors.FencedError`. Building the options
(:func:`store_sink_options`) writes nothing. ``abort`` writes nothing.

With option ``anchor=true`` (store-anchored positions, :mod:`.anchor`) the sink also commits the
``deo-kafka`` or ``aof`` source's positions, read from Spark's offset log in the query's
``checkpointLocation``, under the store's position keys in the same transaction: the query is then exactly-once also
when restarted on a new or lost checkpoint whose source starts from the store
(``starting.positions.store``/``.app``).

Output modes: ``append``; ``complete`` only with ``put`` rows (each batch holds the whole result
table and a ``put`` sets each key to its current value: "set" semantics) — an ``incr`` or ``row``
row in ``complete`` mode fails the batch before anything is written, naming the mode and the op
(it would add the whole table again at every batch). Spark refuses ``update`` for this sink.

Row shape (default): columns ``namespace`` (str), ``key`` (str), ``op`` (str) and ``value``:

- ``op = "incr"``: add ``value`` (an int or float; null counts 1) to ``namespace``/``key``;
- ``op = "put"``: set ``namespace``/``key`` to ``value`` (anything JSON holds; last write wins);
- ``op = "row"``: append ``value`` to the rows of ``namespace`` kept under the batch id (a replay
  replaces them); ``key`` is not used.

Alternatively option ``writes_function`` names a function (``"package.module:function"``) that
takes the task's iterator of rows and returns a :class:`Writes`; it runs on the executors.

Commit messages travel executor → driver pickled; each is bounded by option
``max_message_bytes`` (default 16 MiB): a task whose writes pickle to more fails with an error
naming the partition, the size and the option (no spilling). Aggregate in the query (``groupBy``)
so a task carries one write per key, not one per input row.
"""

from __future__ import annotations

import importlib
import json
import logging
import pickle
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

from .._redaction import redact_url
from ..core._ranges import SourceRange, register_range_kind
from ..errors import ConfigurationError, OffsetConflictError
from ..stores._writes import CommitOutcome, PlannedBatch, Writes
from ._sink_runs import QueryRun, decide_batch, read_state

__all__ = ["SINK_POSITION_KEY", "STORE_SINK_NAME", "SinkBatchRange", "StoreSinkOptions", "commit_batch",
           "merge_writes", "rows_to_writes", "store_sink_options"]

log = logging.getLogger(__name__)

#: The name to pass to ``writeStream.format``.
STORE_SINK_NAME = "deo-store"

#: The position key under which the store keeps a query's next batch id.
SINK_POSITION_KEY = "sink:batch"

#: Default bound of one task's commit message, in pickled bytes.
DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024

ROW_COLUMNS = ("namespace", "key", "op", "value")
ROW_OPS = ("incr", "put", "row")
_KNOWN_OPTIONS = ("store", "store.password", "app_id", "app", "new_checkpoint", "writes_function",
                  "max_message_bytes", "anchor", "path")
#: Options of earlier releases that are refused with a message saying what replaced them.
_GONE_OPTIONS = {"epoch": "the epoch is taken by the query's first commit after each start, not by building "
                          "the options; drop option 'epoch'"}


@register_range_kind
@dataclass(frozen=True, order=True)
class SinkBatchRange(SourceRange):
    """One micro-batch of a sink: positions ``[batch_id, batch_id + 1)`` of :data:`SINK_POSITION_KEY`.

    The stored position is the next batch id to commit, so the store's compare-and-set on it is
    the compare-and-set on the last committed batch id.
    """

    kind = "sink-batch"
    batch_id: int
    #: the JSON text of the run document stored beside the position (:mod:`._sink_runs`); "" for none
    run_doc: str = field(default="", compare=False)

    @property
    def position_key(self) -> str:
        return SINK_POSITION_KEY

    @property
    def start(self) -> int:
        return self.batch_id

    @property
    def end(self) -> int:
        return self.batch_id + 1

    def position_meta(self) -> Optional[Dict[str, Any]]:
        return json.loads(self.run_doc) if self.run_doc else None

    def to_json_obj(self) -> Any:
        if not self.run_doc:
            return {"batch_id": self.batch_id}
        return {"batch_id": self.batch_id, "run": json.loads(self.run_doc)}

    @classmethod
    def from_json_obj(cls, obj: Any) -> SinkBatchRange:
        run = obj.get("run")
        return cls(int(obj["batch_id"]), "" if run is None else json.dumps(run, separators=(",", ":"),
                                                                            sort_keys=True))

    def describe(self) -> str:
        return f"sink batch {self.batch_id}"


def _int_option(options: Mapping[str, str], name: str, default: int, minimum: int) -> int:
    raw = options.get(name)
    if raw is None:
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        value = minimum - 1
    if value < minimum:
        raise ConfigurationError(f"deo sink option {name!r} must be an int >= {minimum}, got {raw!r}")
    return value


def app_id_option(options: Mapping[str, Any], sink: str) -> str:
    """The application id of lower-cased sink ``options``: ``app_id``, or its alias ``app`` (not both)."""
    from ..stores import check_app_id

    if "app_id" in options and "app" in options and options["app_id"] != options["app"]:
        raise ConfigurationError(f"{sink} options 'app_id' {options['app_id']!r} and its alias 'app' "
                                 f"{options['app']!r} differ; give one")
    app = options.get("app_id", options.get("app"))
    if app is None:
        raise ConfigurationError(f"{sink} option 'app_id' is required (alias 'app'): the application id of this "
                                 f"query (1..200 of A-Z a-z 0-9 . _ : -)")
    check_app_id(app)
    return str(app)


def refuse_gone_options(options: Mapping[str, Any], sink: str) -> None:
    """Refuse options of earlier releases, saying what replaced them."""
    for key, why in _GONE_OPTIONS.items():
        if key in options:
            raise ConfigurationError(f"{sink} option {key!r} ({options[key]!r}) is no longer used: {why}")


def _with_password(url: str, password: Optional[str]) -> str:
    if not password:
        return url
    from urllib.parse import quote, urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.scheme == "sqlite" or not parts.hostname:
        raise ConfigurationError(f"deo sink option 'store.password' needs a server store URL (postgresql://, "
                                 f"redis://), got {redact_url(url)!r}")
    user = quote(parts.username or "", safe="")
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{user}:{quote(password, safe='')}@{host}"))


@dataclass(frozen=True)
class StoreSinkOptions:
    """The checked options of a ``deo-store`` query (the store URL never appears in ``repr``).

    ``complete`` says the query runs in output mode ``complete`` (set by the sink when Spark creates
    its writer)."""

    store: str
    app: str
    writes_function: Optional[str]
    max_message_bytes: int
    new_checkpoint: str = "refuse"
    complete: bool = False
    #: the local checkpoint directory whose offset log the sink reads (option ``anchor=true``), else None
    anchor_checkpoint: Optional[str] = None

    def __repr__(self) -> str:
        return (f"StoreSinkOptions(store={redact_url(self.store)!r}, app_id={self.app!r}, "
                f"writes_function={self.writes_function!r}, max_message_bytes={self.max_message_bytes}, "
                f"new_checkpoint={self.new_checkpoint!r}, complete={self.complete}, "
                f"anchor_checkpoint={self.anchor_checkpoint!r})")

    @classmethod
    def parse(cls, options: Mapping[str, str], *, sink: str = "deo sink") -> StoreSinkOptions:
        """Check ``options`` (Spark's writer options); raises one :class:`ConfigurationError` naming the
        key, the bad value and what is allowed. Opens nothing, writes nothing."""
        from ..stores import check_store_url, store_schemes
        from ..stores._url import url_scheme
        from ._sink_runs import check_new_checkpoint_option

        lowered = {str(k).lower(): v for k, v in options.items()}
        refuse_gone_options(lowered, sink)
        unknown = sorted(k for k in lowered if k not in _KNOWN_OPTIONS and k != "checkpointlocation")
        if unknown:
            raise ConfigurationError(f"unknown {sink} option(s) {unknown}; allowed: {list(_KNOWN_OPTIONS)}")
        store = lowered.get("store")
        if not isinstance(store, str) or not store:
            raise ConfigurationError(f"{sink} option 'store' is required: a store URL (sqlite:///path.db, "
                                     "postgresql://…, redis://…)")
        if url_scheme(store) not in store_schemes():
            raise ConfigurationError(f"{sink} option 'store' must be a sqlite://, postgresql://, redis:// or "
                                     f"redis+cluster:// URL, got {redact_url(store)!r}")
        app = app_id_option(lowered, sink)
        fn = lowered.get("writes_function") or None
        if fn is not None and (":" not in fn or not all(fn.partition(":")[::2])):
            raise ConfigurationError(f"{sink} option 'writes_function' must be 'package.module:function', "
                                     f"got {fn!r}")
        size = _int_option(lowered, "max_message_bytes", DEFAULT_MAX_MESSAGE_BYTES, 1024)
        new_checkpoint = check_new_checkpoint_option(lowered.get("new_checkpoint"), sink)
        url = _with_password(store, lowered.get("store.password"))
        check_store_url(url, app)  # the URL's options and values, a SQLite file's directory: nothing opened
        anchor = str(lowered.get("anchor", "false")).strip().lower()
        if anchor not in ("true", "false"):
            raise ConfigurationError(f"{sink} option 'anchor' must be true or false, got {lowered['anchor']!r}")
        checkpoint = None
        if anchor == "true":
            from .anchor import check_checkpoint_location

            if "new_checkpoint" in lowered and new_checkpoint != "refuse":
                raise ConfigurationError(f"{sink} option 'new_checkpoint' ({lowered['new_checkpoint']!r}) does not "
                                         f"apply with anchor=true: a new checkpoint always continues from the store's "
                                         f"positions; drop option 'new_checkpoint'")
            checkpoint = check_checkpoint_location(lowered.get("checkpointlocation"), sink)
        return cls(url, app, fn, size, new_checkpoint, anchor_checkpoint=checkpoint)


def store_sink_options(store: str, app_id: Optional[str] = None, *, app: Optional[str] = None,
                       writes_function: Optional[str] = None, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
                       new_checkpoint: str = "refuse", anchor: bool = False) -> Dict[str, str]:
    """Check the sink's options and return them as writer options; nothing is opened or written.

    ``df.writeStream.format("deo-store").options(**store_sink_options(url, "app")).option(
    "checkpointLocation", …).start()``. ``app`` is an alias of ``app_id``. The store is first reached,
    and the epoch of the query's start taken, by the query's first commit: building the options
    never fences a running query. ``new_checkpoint="continue"`` lets a query started from a new
    checkpoint continue an application whose store holds committed batches (otherwise refused).
    ``anchor=True`` keeps the ``deo-kafka`` or ``aof`` source's positions in the store with each batch
    (:mod:`.anchor`; the query then needs an absolute local ``checkpointLocation``, checked when the
    query starts).
    """
    from ..option_registry import keyword_checks

    keyword_checks("store_sink_options", store=store, writes_function=writes_function,
                   max_message_bytes=max_message_bytes)
    options = {"store": store, "max_message_bytes": str(max_message_bytes), "new_checkpoint": str(new_checkpoint)}
    if app_id is not None:
        options["app_id"] = app_id
    if app is not None:
        options["app"] = app
    if writes_function is not None:
        options["writes_function"] = writes_function
    if not isinstance(anchor, bool):
        raise ConfigurationError(f"store_sink_options anchor must be True or False, got {anchor!r}")
    checked = StoreSinkOptions.parse(options)
    if anchor:
        options["anchor"] = "true"
        if new_checkpoint != "refuse":
            StoreSinkOptions.parse({**options, "checkpointLocation": "/"})  # the anchor/new_checkpoint clash
    if checked.writes_function is not None:
        _load_function(checked.writes_function)
    options.pop("app", None)
    options["app_id"] = checked.app
    return options


def _load_function(path: str) -> Callable[[Iterator[Any]], Writes]:
    module, _, name = path.partition(":")
    try:
        fn = importlib.import_module(module)
        for part in name.split("."):
            fn = getattr(fn, part)
    except (ImportError, AttributeError) as exc:
        raise ConfigurationError(f"deo sink option 'writes_function' {path!r} cannot be imported: {exc}") from exc
    if not callable(fn):
        raise ConfigurationError(f"deo sink option 'writes_function' {path!r} is not callable")
    return fn  # type: ignore[return-value]


def check_row_schema(field_names: Sequence[str]) -> None:
    """Refuse a schema without the row shape's columns (before the query writes anything)."""
    missing = [c for c in ROW_COLUMNS if c not in field_names]
    if missing:
        raise ConfigurationError(f"the deo-store sink needs columns {list(ROW_COLUMNS)} (or option "
                                 f"'writes_function'); missing {missing} in {list(field_names)}")


def _plain(value: Any) -> Any:
    as_dict = getattr(value, "asDict", None)
    if callable(as_dict):
        return as_dict(recursive=True)
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return value


def complete_mode_error(what: str, op: str) -> ConfigurationError:
    """The refusal of a non-``put`` write in output mode ``complete`` (``what`` names where)."""
    return ConfigurationError(
        f"{what}: op {op!r} in output mode 'complete' is refused: each micro-batch of a complete-mode query "
        f"holds the whole result table, so {op!r} would add it again at every batch; in complete mode the "
        f"deo-store sink applies 'put' only (each key set to its current value), otherwise use output mode "
        f"'append'; nothing was written")


def check_complete_writes(writes: Writes, what: str) -> None:
    """Refuse ``writes`` (of a complete-mode batch) holding anything but puts."""
    if writes.increments:
        raise complete_mode_error(what, "incr")
    if writes.batch_rows:
        raise complete_mode_error(what, "row")
    if writes.statements:
        raise complete_mode_error(what, "execute")


def rows_to_writes(rows: Iterator[Any], *, complete: bool = False) -> Writes:
    """The row shape's :class:`Writes` for ``rows`` (each with ``namespace``, ``key``, ``op``, ``value``);
    ``complete``: the query runs in output mode ``complete``, where only ``put`` is accepted."""
    writes = Writes()
    batch_rows: Dict[str, List[Any]] = {}
    for row in rows:
        ns, key, op, value = row["namespace"], row["key"], row["op"], row["value"]
        if complete and op != "put" and op in ROW_OPS:
            raise complete_mode_error(f"deo-store row (namespace {ns!r}, key {key!r})", op)
        if op == "incr":
            writes.incr(ns, key, 1 if value is None else value)
        elif op == "put":
            writes.put(ns, key, _plain(value))
        elif op == "row":
            batch_rows.setdefault(ns, []).append(_plain(value))
        else:
            raise ConfigurationError(f"column 'op' of a deo-store row must be one of {list(ROW_OPS)}, got {op!r} "
                                     f"(namespace {ns!r}, key {key!r})")
    for ns, values in batch_rows.items():
        writes.put_batch_rows(ns, values)
    return writes


def merge_writes(parts: Sequence[Writes]) -> Writes:
    """One :class:`Writes` holding ``parts`` in order (increments add up, later puts win)."""
    if not parts:
        return Writes()
    out = parts[0].copy()
    for w in parts[1:]:
        for (ns, key), amount in w.increments.items():
            out.incr(ns, key, amount)
        out.puts.update(w.puts)
        for ns, rows in w.batch_rows.items():
            out.batch_rows.setdefault(ns, []).extend(rows)
        out.labels.extend(w.labels)
        out.statements.extend(w.statements)
    return out


def task_ids() -> Tuple[int, Optional[str]]:
    """``(partition id, batch id as Spark's task-local property says)`` of the running task."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        return 0, None
    return ctx.partitionId(), ctx.getLocalProperty("streaming.sql.batchId")


def task_batch(what: str) -> Tuple[int, int]:
    """``(partition id, micro-batch id)`` of the running task; raises when Spark gave it no batch id
    (``what`` names the sink and application)."""
    partition, batch = task_ids()
    if batch is None:
        raise RuntimeError(f"{what} partition {partition}: Spark gave the task no micro-batch id (property "
                           f"streaming.sql.batchId)")
    return partition, int(batch)


def check_message_size(writes: Writes, limit: int, what: str) -> bytes:
    """``writes`` pickled, refused when over ``limit`` bytes (``what`` names the task)."""
    data = pickle.dumps(writes, protocol=pickle.HIGHEST_PROTOCOL)
    if len(data) > limit:
        raise ConfigurationError(f"{what}: its writes pickle to {len(data)} bytes, over the commit-message limit "
                                 f"max_message_bytes={limit}; aggregate rows per key in the query, repartition "
                                 f"into more tasks or raise option 'max_message_bytes'")
    return data


def commit_batch(opts: StoreSinkOptions, parts: Sequence[Writes], batch_id: int, ident: QueryRun, *,
                 sink_name: str = STORE_SINK_NAME, epoch: Optional[int] = None) -> CommitOutcome:
    """Commit ``parts`` (in partition order) as Spark batch ``batch_id`` of the query run ``ident`` in one
    store transaction, under the rules of :mod:`._sink_runs` (a replay writes nothing). ``epoch``: the
    epoch the run's first commit uses when the sink took it earlier in this batch (``deo-delta``
    records the batch's files under it before its table commit); ``None``: that commit takes one."""
    from ..stores import open_store

    where = f"{sink_name} app {opts.app} batch {batch_id}"
    if opts.anchor_checkpoint is not None:
        from .anchor import anchored_commit

        with open_store(opts.store, opts.app) as store:
            if read_state(store, SINK_POSITION_KEY) is not None:
                raise OffsetConflictError(
                    f"{where}: the application's batches were committed without anchor=true (the store holds "
                    f"position {SINK_POSITION_KEY!r}, no source positions); start the query without anchor=true "
                    f"from its checkpoint, or with anchor=true under a new application id; nothing was written")
            outcome = anchored_commit(store, merge_writes(parts), opts.anchor_checkpoint, batch_id, ident, where)
        if outcome is CommitOutcome.REPLAYED:
            log.info("%s was committed before by this query; nothing written", where)
        return outcome
    with open_store(opts.store, opts.app) as store:
        state = read_state(store, SINK_POSITION_KEY)
        if state is None:
            from .anchor import ANCHOR_KEY, ANCHOR_NAMESPACE

            if store.get_value(ANCHOR_NAMESPACE, ANCHOR_KEY) is not None:
                raise OffsetConflictError(
                    f"{where}: the application's batches were committed with anchor=true (its source positions are "
                    f"in the store); start the query with anchor=true as before, or use a new application id; "
                    f"nothing was written")
        decision = decide_batch(where, state, ident, batch_id, opts.new_checkpoint)
        if decision.replay:
            log.info("%s (the application's batch %d) was committed before by this query; nothing written", where,
                     decision.app_batch)
            return CommitOutcome.REPLAYED
        if decision.epoch is not None:
            epoch = decision.epoch
        elif epoch is None:
            epoch = store.start_epoch()
        doc = json.dumps(decision.meta(ident, epoch), separators=(",", ":"), sort_keys=True)
        batch = PlannedBatch(decision.app_batch, 0, (SinkBatchRange(decision.app_batch, doc),))
        outcome = store.commit(epoch, batch, merge_writes(parts))
    if outcome is CommitOutcome.REPLAYED:
        log.info("%s was committed before; nothing written", where)
    return outcome
