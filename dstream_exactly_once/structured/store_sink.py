"""The ``deo-store`` Structured Streaming sink: each micro-batch in ONE store transaction.

Unit of parallelism: one Spark task per partition of the micro-batch turns its rows into
:class:`~dstream_exactly_once.stores.writes.Writes` (nothing is written on executors); the driver's
``commit(messages, batchId)`` merges them in partition order and commits them with the batch id in
one transaction of the store (SQLite, PostgreSQL or Redis).

Delivery guarantee: exactly-once into the store as long as the query restarts from its checkpoint.
The store keeps, per application (one application id per query), the next batch id to commit as a
position (compare-and-set ``stored == batchId`` → apply; ``== batchId + 1`` → the batch was
committed before, nothing is written) plus the commit-log entry of the batch id; a batch Spark
replays after a crash is therefore skipped, and one that never committed is applied once. A query
start takes a new epoch (:func:`store_sink_options`); a zombie query still committing with an older
epoch is refused with :class:`~dstream_exactly_once.errors.FencedError`. ``abort`` writes nothing.
A query restarted from a *new* checkpoint against the same application id starts again at batch 0
and is refused with :class:`~dstream_exactly_once.errors.OffsetConflictError` naming the stored and
the offered batch id before anything is written (the store is checked before the commit-log lookup
would take the batch for a replay).

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
import logging
import pickle
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

from ..core.ranges import SourceRange, register_range_kind
from ..errors import ConfigurationError, OffsetConflictError
from ..stores.url import redact_url
from ..stores.writes import CommitOutcome, PlannedBatch, Writes

__all__ = ["SINK_POSITION_KEY", "STORE_SINK_NAME", "SinkBatchRange", "StoreSinkOptions", "check_next_batch",
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
_KNOWN_OPTIONS = ("store", "store.password", "app", "epoch", "writes_function", "max_message_bytes", "path")


@register_range_kind
@dataclass(frozen=True, order=True)
class SinkBatchRange(SourceRange):
    """One micro-batch of a sink: positions ``[batch_id, batch_id + 1)`` of :data:`SINK_POSITION_KEY`.

    The stored position is the next batch id to commit, so the store's compare-and-set on it is
    the compare-and-set on the last committed batch id.
    """

    kind = "sink-batch"
    batch_id: int

    @property
    def position_key(self) -> str:
        return SINK_POSITION_KEY

    @property
    def start(self) -> int:
        return self.batch_id

    @property
    def end(self) -> int:
        return self.batch_id + 1

    def to_json_obj(self) -> Any:
        return {"batch_id": self.batch_id}

    @classmethod
    def from_json_obj(cls, obj: Any) -> SinkBatchRange:
        return cls(int(obj["batch_id"]))

    def describe(self) -> str:
        return f"sink batch {self.batch_id}"


def _int_option(options: Mapping[str, str], name: str, default: Optional[int], minimum: int) -> int:
    raw = options.get(name)
    if raw is None:
        if default is None:
            raise ConfigurationError(f"deo sink option {name!r} is required (an int >= {minimum}); take one for "
                                     f"each query start with dstream_exactly_once.structured.store_sink_options()")
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        value = minimum - 1
    if value < minimum:
        raise ConfigurationError(f"deo sink option {name!r} must be an int >= {minimum}, got {raw!r}")
    return value


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
    """The checked options of a ``deo-store`` query (the store URL never appears in ``repr``)."""

    store: str
    app: str
    epoch: int
    writes_function: Optional[str]
    max_message_bytes: int

    def __repr__(self) -> str:
        return (f"StoreSinkOptions(store={redact_url(self.store)!r}, app={self.app!r}, epoch={self.epoch}, "
                f"writes_function={self.writes_function!r}, max_message_bytes={self.max_message_bytes})")

    @classmethod
    def parse(cls, options: Mapping[str, str], *, need_epoch: bool = True) -> StoreSinkOptions:
        """Check ``options`` (Spark's writer options); raises one :class:`ConfigurationError` naming the
        key, the bad value and what is allowed. Opens nothing."""
        from ..stores import check_app_id
        from ..stores.url import url_scheme

        lowered = {str(k).lower(): v for k, v in options.items()}
        unknown = sorted(k for k in lowered if k not in _KNOWN_OPTIONS and k != "checkpointlocation")
        if unknown:
            raise ConfigurationError(f"unknown deo sink option(s) {unknown}; allowed: {list(_KNOWN_OPTIONS)}")
        store = lowered.get("store")
        if not isinstance(store, str) or not store:
            raise ConfigurationError("deo sink option 'store' is required: a store URL (sqlite:///path.db, "
                                     "postgresql://…, redis://…)")
        if url_scheme(store) not in ("sqlite", "postgresql", "postgres", "redis", "rediss"):
            raise ConfigurationError(f"deo sink option 'store' must be a sqlite://, postgresql:// or redis:// URL, "
                                     f"got {redact_url(store)!r}")
        app = lowered.get("app")
        if app is None:
            raise ConfigurationError("deo sink option 'app' is required: the application id of this query "
                                     "(1..200 of A-Z a-z 0-9 . _ : -)")
        check_app_id(app)
        fn = lowered.get("writes_function") or None
        if fn is not None and (":" not in fn or not all(fn.partition(":")[::2])):
            raise ConfigurationError(f"deo sink option 'writes_function' must be 'package.module:function', "
                                     f"got {fn!r}")
        epoch = _int_option(lowered, "epoch", None if need_epoch else 0, 1 if need_epoch else 0)
        size = _int_option(lowered, "max_message_bytes", DEFAULT_MAX_MESSAGE_BYTES, 1024)
        return cls(_with_password(store, lowered.get("store.password")), app, epoch, fn, size)


def store_sink_options(store: str, app: str, *, writes_function: Optional[str] = None,
                       max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> Dict[str, str]:
    """Check the sink's options, take a new epoch for this query start, and return the writer options.

    Call it once per ``start()``: ``df.writeStream.format("deo-store").options(**store_sink_options(url,
    "app")).option("checkpointLocation", …).start()``. Every argument is checked (and the store
    reached) before the epoch is taken, so a refused call writes nothing; the new epoch fences any
    older query of the same application.
    """
    from ..option_registry import keyword_checks
    from ..stores import open_store

    keyword_checks("store_sink_options", store=store, writes_function=writes_function,
                   max_message_bytes=max_message_bytes)
    options = {"store": store, "app": app, "max_message_bytes": str(max_message_bytes)}
    if writes_function is not None:
        options["writes_function"] = writes_function
    checked = StoreSinkOptions.parse(options, need_epoch=False)
    if checked.writes_function is not None:
        _load_function(checked.writes_function)
    with open_store(checked.store, checked.app) as opened:
        options["epoch"] = str(opened.start_epoch())
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


def rows_to_writes(rows: Iterator[Any]) -> Writes:
    """The row shape's :class:`Writes` for ``rows`` (each with ``namespace``, ``key``, ``op``, ``value``)."""
    writes = Writes()
    batch_rows: Dict[str, List[Any]] = {}
    for row in rows:
        ns, key, op, value = row["namespace"], row["key"], row["op"], row["value"]
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


def check_next_batch(sink_name: str, app: str, stored: Optional[int], batch_id: int) -> None:
    """Refuse ``batch_id`` unless the store's next batch id ``stored`` is ``None``, ``batch_id`` or
    ``batch_id + 1`` (a replay); raises :class:`OffsetConflictError` naming both."""
    if stored is not None and stored not in (batch_id, batch_id + 1):
        raise OffsetConflictError(
            f"{sink_name} app {app}: batch {batch_id} does not follow the stored next batch id "
            f"{stored} (a new checkpoint against an application with committed batches?); nothing "
            f"was written. Start the query with a new 'app', or from the checkpoint that wrote "
            f"batch {stored - 1}")


def commit_batch(opts: StoreSinkOptions, parts: Sequence[Writes], batch_id: int, *,
                 sink_name: str = STORE_SINK_NAME) -> CommitOutcome:
    """Commit ``parts`` (in partition order) with ``batch_id`` in one store transaction."""
    from ..stores import open_store

    batch = PlannedBatch(batch_id, 0, (SinkBatchRange(batch_id),))
    with open_store(opts.store, opts.app) as store:
        stored = store.load_positions().get(SINK_POSITION_KEY)
        check_next_batch(sink_name, opts.app, None if stored is None else stored.offset, batch_id)
        outcome = store.commit(opts.epoch, batch, merge_writes(parts))
    if outcome is CommitOutcome.REPLAYED:
        log.info("%s app %s: batch %d was committed before; nothing written", sink_name, opts.app, batch_id)
    return outcome
