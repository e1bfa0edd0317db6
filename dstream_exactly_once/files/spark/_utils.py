"""``FileUtils``: DStreams over growing append-only files (the ss-aof source) on the shared core.

The Spark-free source lives in :mod:`dstream_exactly_once.files` (``FilePlanner`` plans byte
ranges on the driver, ``FileRangeReader`` reads one range on an executor); this module only wires
it to Spark the way :mod:`dstream_exactly_once.kafka.spark._utils` wires Kafka: a
:class:`FileDStream` of :class:`FileRDD` batches for the direct stream, and an
:class:`~dstream_exactly_once.ExactlyOnceDStream` driven by the core's
:class:`~dstream_exactly_once.engine._committer.BatchCommitter` for exactly-once output.

Deployment: local mode (``local``, ``local[N]``, ``local-cluster[…]``: one host); a filesystem
every executor sees at the same paths (NFS, a shared volume: declare it with the option
``shared.filesystem=true``); or node-local files on the hosts named by the option ``hosts=h1,h2``:
each host's files are planned by a task pinned to that host (:mod:`dstream_exactly_once.files._hosts`)
and each task is read on its host (:mod:`dstream_exactly_once.streaming._pinned`), checking where it runs.
Any other master without one of the two options is refused (:mod:`dstream_exactly_once.files._deployment`,
the options both forms of the file source share). See ``docs/files.md``.

Tasks: the core's task planner (:mod:`dstream_exactly_once.core._tasks`) packs a batch's small file
ranges into tasks of about ``tasks.target.size`` bytes (aiming at ``tasks.target.count`` tasks,
default ``sc.defaultParallelism``), splits ranges larger than ``tasks.split.size`` at line
boundaries (never a compressed file), and packs node-local ranges only with ranges of the same
host. See ``docs/performance.md``, "The task planner".
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple, Union

from pyspark.streaming import StreamingContext

from ...core._loss_totals import DataLossTotals
from ...core._ranges import SourceRange
from ...core._retirement import RetiredPartitions
from ...core._retry import RetryPolicy, check_retry_policy
from ...core._source import RangeReader
from ...core._tasks import TASK_OPTIONS, TaskOptions, plan_tasks
from ...engine._committer import BatchCommitter, check_retain_batches
from ...errors import ConfigurationError
from ...stores._base import TransactionalStore
from ...streaming._backpressure import catch_up_from_conf
from ...streaming._connect_guard import INSTEAD_FILES, refuse_spark_connect
from ...streaming._data_loss import LossReporter, loss_accumulator, lost_in, new_loss_accumulator
from ...streaming._dstream import RangeDStream
from ...streaming._exactly_once import ExactlyOnceDStream
from ...streaming._lifecycle import close_on_stop
from ...streaming._pinned import spark_host_runner
from ...streaming._range_rdd import RangeRDD, make_range_rdd
from .. import FilePlanner, FileRange, FileSourceOptions
from .._deployment import (
    DEPLOYMENT_OPTIONS,
    HOSTS,
    SHARED_FILESYSTEM,
    check_master,
    take_option,
    take_shared_filesystem,
)
from .._hosts import HostCheckedReader, HostFilePlanner, parse_hosts
from .._options import CONF_PREFIX
from .._reader import FileRangeReader

__all__ = ["FILE_SPLIT_FLOOR", "FileDStream", "FileRDD", "FileUtils"]

#: The smallest default split size of a file range (8 MiB): below it a task costs more than its read.
FILE_SPLIT_FLOOR = 8 << 20

Planner = Union[FilePlanner, HostFilePlanner]


class FileRDD(RangeRDD):
    """One batch of a file stream: ``offsetRanges()`` lists its
    :class:`~dstream_exactly_once.files.FileRange` s (``path``, ``fromOffset``, ``untilOffset``) and
    partition ``i`` reads the ranges and pieces of ``tasks[i]`` in order.

    Records are lines (``str``; ``bytes`` with ``line.decoding=bytes``), optionally with the file
    name and/or byte offset (``include.file.name``, ``include.byte.offset``). Unit of parallelism:
    one task per planned task (packed small ranges, or one piece of a large range; see
    ``tasks.target.count``, ``tasks.target.size``, ``tasks.split.size``). Delivery: a deterministic
    read of exactly these bytes — a task that cannot find them follows ``fail.on.data.loss``: it
    fails with a ``DataLossError`` naming the range, or reads nothing and reports the lost bytes; it
    never reads another file.
    """


class FileDStream(RangeDStream):
    """A direct DStream over growing files; each batch is a :class:`FileRDD` whose ``offsetRanges()``
    lists the batch's file ranges.

    Unit of parallelism: one Spark task per planned task per batch (small ranges packed, large ones
    split; see :mod:`dstream_exactly_once.core._tasks`). Delivery: at-least-once for outputs across
    driver restarts (positions are not stored); see :meth:`FileUtils.createExactlyOnceFileStream`.
    Each batch is planned when Spark generates it, so Spark's Streaming tab shows its bytes and byte
    ranges (:mod:`dstream_exactly_once.streaming._input_info`). The identity of a file gone after
    being read to its end (or whose unread bytes were reported lost) is forgotten a few batches later
    (:class:`~dstream_exactly_once.core._retirement.RetiredPartitions`): a rotating log's tracked
    identities stay bounded by the files present.
    """

    def __init__(self, ssc: StreamingContext, planner: Planner, tasks: Optional[TaskOptions] = None) -> None:
        self.planner = planner
        sc = ssc.sparkContext
        self._losses = new_loss_accumulator(sc)
        reader = _reporting_reader(planner.reader(), LossReporter(self._losses))
        shape = tasks if tasks is not None else TaskOptions()
        #: forgets the identities of files gone and fully read (or reported lost): state stays bounded
        self.retirement = RetiredPartitions(planner)
        retirement = self.retirement

        def compute(time: datetime) -> FileRDD:
            ranges = planner.plan(time)
            retirement.after_plan()
            return _file_rdd(sc, ranges, reader, shape)

        super().__init__(ssc, compute, plan_on_generate=True)

    def data_loss(self) -> DataLossTotals:
        """Bytes this stream skipped as lost since this driver started (``fail.on.data.loss=false``):
        ``planned``, skipped while planning (a rotated file left the pattern unread, a file truncated
        below its position); ``read``, found gone while reading its batches (counted after each
        batch's action, once per range)."""
        return DataLossTotals("bytes", self.planner.data_loss_skips(), lost_in(self._losses, "bytes", _any))


def _any(_key: str) -> bool:
    return True


class FileUtils:
    """Factory methods for append-only file streams (ss-aof); the file counterpart of ``KafkaUtils``."""

    @staticmethod
    def createDirectFileStream(  # noqa: N802 - named like KafkaUtils.createDirectStream
        ssc: StreamingContext,
        path: str,
        options: Optional[Mapping[str, Any]] = None,
    ) -> FileDStream:
        """A direct stream of the lines appended to the files ``path`` names.

        ``path`` is an absolute glob (``/var/log/app/service.log*``) or, with
        ``path.syntax=regex``, ``/literal/dir/<regex over file names>``. ``options`` (see
        ``docs/files.md``) override Spark conf ``spark.aof.<name>``; ``starting.offsets`` decides
        where files present at the start begin (``earliest`` by default). Each batch reads, per
        file, the complete lines written since the previous batch (at most ``bytes.max`` bytes);
        rotation by rename or copytruncate neither loses nor doubles lines within one run.

        Unit of parallelism: one Spark task per planned task per batch (small ranges packed, large
        ones split at line boundaries; options ``tasks.*``). Delivery: at-least-once across driver
        restarts (this stream stores no positions; a new driver starts again per
        ``starting.offsets``); use :meth:`createExactlyOnceFileStream` for exactly-once.
        """
        refuse_spark_connect(ssc, "FileUtils.createDirectFileStream(ssc=...)", INSTEAD_FILES)
        tasks, options = _task_options(ssc, options)
        planner = _planner(ssc, path, options)
        planner.start({})  # checks the pattern against the filesystem; nothing is stored
        close_on_stop(ssc, planner.close)
        return FileDStream(ssc, planner, tasks)

    @staticmethod
    def createExactlyOnceFileStream(  # noqa: N802 - named like KafkaUtils.createExactlyOnceStream
        ssc: StreamingContext,
        path: str,
        options: Optional[Mapping[str, Any]] = None,
        *,
        store: Union[str, TransactionalStore],
        app_id: Optional[str] = None,
        retain_batches: int = 100,
        store_retry: Optional[RetryPolicy] = None,
    ) -> ExactlyOnceDStream:
        """A file stream whose outputs commit results and byte positions in one store transaction.

        ``path`` and ``options`` as in :meth:`createDirectFileStream`. Positions committed in
        ``store`` (a URL ``sqlite:///…``, ``postgresql://…``, ``redis://…`` with ``app_id``, or an
        opened :class:`TransactionalStore`) always win over ``starting.offsets``; each position is
        stored with the file's identity (content fingerprint, tail hash, device/inode), so a
        restarted driver finds a renamed or copytruncated file again. Write results with
        ``commit_each_batch``, ``commit_each_partition``, ``foreach_batch`` or
        ``write_each_partition``. ``retain_batches``: committed batches kept in the offset and
        commit logs. ``store_retry``: how long every store operation is retried while the store is
        unreachable, as in ``KafkaUtils.createExactlyOnceStream`` (a
        :class:`~dstream_exactly_once.RetryPolicy`, default about 60 s).

        Everything — options, path, master/deployment, store URL and schema, stored positions — is
        checked before the store is written; the epoch is taken when the StreamingContext starts, after
        the output call's arguments were checked too.

        Unit of parallelism: one Spark task per planned task per batch (options ``tasks.*``). Small
        ranges are packed; large ones are split only for ``commit_each_batch`` and ``foreach_batch``
        (per-task commits — ``commit_each_partition`` — commit whole ranges, so their tasks never
        hold a piece; ``write_each_partition`` runs one task per range, its labels name partitions).
        Delivery guarantee:
        exactly-once for everything written through the store's transaction: every complete line
        counted once across SIGKILLs, replays, zombie drivers and rotation by rename or
        copytruncate; lines the planner reports lost (a rotated file that left the pattern unread)
        are counted (``stream.data_loss()``, each progress record's ``dataLossTotals`` and
        ``sources[0].metrics``) and logged, never silently dropped.
        """
        refuse_spark_connect(ssc, "FileUtils.createExactlyOnceFileStream(ssc=...)", INSTEAD_FILES)
        check_retain_batches(retain_batches)
        retry = check_retry_policy(store_retry)
        catch_up = catch_up_from_conf(ssc)
        tasks, options = _task_options(ssc, options)
        planner = _planner(ssc, path, options)
        committer = BatchCommitter(store, planner, app_id=app_id, retain_batches=retain_batches, retry=retry,
                                   start=False, close_source=planner.close, catch_up=catch_up)
        sc = ssc.sparkContext
        reader = _reporting_reader(planner.reader(), LossReporter(loss_accumulator(sc)))

        def make_rdd(ranges: Sequence[SourceRange], shape: Optional[TaskOptions] = None) -> FileRDD:
            return _file_rdd(sc, ranges, reader, shape if shape is not None else tasks)

        return ExactlyOnceDStream(ssc, committer, make_rdd, tasks=tasks)


def _reporting_reader(reader: RangeReader, reporter: LossReporter) -> RangeReader:
    """``reader`` reporting lost bytes to ``reporter`` (recorded beside the commits under
    ``fail.on.data.loss=false``)."""
    if isinstance(reader, HostCheckedReader):
        return HostCheckedReader(reader.inner.reporting_to(reporter))
    if isinstance(reader, FileRangeReader):
        return reader.reporting_to(reporter)
    return reader


def _host_of(r: SourceRange) -> Optional[str]:
    return r.host if isinstance(r, FileRange) else None


def _file_rdd(sc: Any, ranges: Sequence[SourceRange], reader: RangeReader, shape: TaskOptions) -> FileRDD:
    """The batch's RDD, one partition per planned task; tasks of node-local files (``host`` set)
    prefer their host."""
    if not shape.pack and not shape.split:  # one partition per range, empty ones too (partition i: range i)
        return _per_range_rdd(sc, ranges, reader)
    tasks = plan_tasks(ranges, shape, parallelism=sc.defaultParallelism, can_split=reader.can_split,
                       host_of=_host_of, split_floor=FILE_SPLIT_FLOOR)
    hosts = [_host_of(t[0].range) for t in tasks]
    if tasks and all(h is not None for h in hosts):
        return make_range_rdd(sc, ranges, reader, FileRDD, locations=[[h] for h in hosts if h is not None],
                              tasks=tasks)
    return make_range_rdd(sc, ranges, reader, FileRDD, tasks=tasks)


def _per_range_rdd(sc: Any, ranges: Sequence[SourceRange], reader: RangeReader) -> FileRDD:
    hosts = [_host_of(r) for r in ranges]
    if ranges and all(h is not None for h in hosts):
        return make_range_rdd(sc, ranges, reader, FileRDD, locations=[[h] for h in hosts if h is not None])
    return make_range_rdd(sc, ranges, reader, FileRDD)


def _task_options(ssc: object, options: Optional[Mapping[str, Any]]) -> Tuple[TaskOptions, Dict[str, Any]]:
    """The task planner's options (``tasks.*`` over Spark conf ``spark.aof.tasks.*``) and the remaining
    source options."""
    if not isinstance(ssc, StreamingContext):
        raise ConfigurationError(f"ssc must be a StreamingContext, got {type(ssc).__name__}")
    if options is not None and not isinstance(options, Mapping):
        raise ConfigurationError(f"options must be a mapping of option names to values, got {options!r}")
    rest = dict(options or {})
    conf = dict(ssc.sparkContext.getConf().getAll())
    found = TaskOptions.from_mapping({k: conf[CONF_PREFIX + k] for k in TASK_OPTIONS if CONF_PREFIX + k in conf},
                                     "Spark conf")
    given: Dict[str, Any] = {}
    for k in TASK_OPTIONS:
        for key in (k, CONF_PREFIX + k):
            if key in rest:
                given[k] = rest.pop(key)
    mine = TaskOptions.from_mapping(given)
    merged = TaskOptions(
        mine.target_count if mine.target_count is not None else found.target_count,
        mine.target_size if mine.target_size is not None else found.target_size,
        mine.split_size if mine.split_size is not None else found.split_size)
    return merged, rest


def _planner(ssc: object, path: str, options: Optional[Mapping[str, Any]]) -> Planner:
    """The stream's planner: one :class:`FilePlanner` (its pattern checked against the filesystem), or a
    :class:`HostFilePlanner` with option ``hosts`` (checked on each host when it starts)."""
    opts, hosts = _options(ssc, options)
    if hosts is None:
        planner = FilePlanner(path, opts)
        planner.pattern.check()  # a missing directory or a directory as the path: refused before the store opens
        return planner
    assert isinstance(ssc, StreamingContext)
    return HostFilePlanner(path, hosts, spark_host_runner(ssc.sparkContext), opts)


def _options(ssc: object, options: Optional[Mapping[str, Any]]) -> Tuple[FileSourceOptions, Optional[Tuple[str, ...]]]:
    """The stream's validated options (``options`` over ``spark.aof.*`` conf) and its ``hosts`` (``None``:
    one host or a shared filesystem), after the deployment check."""
    if not isinstance(ssc, StreamingContext):
        raise ConfigurationError(f"ssc must be a StreamingContext, got {type(ssc).__name__}")
    if options is not None and not isinstance(options, Mapping):
        raise ConfigurationError(f"options must be a mapping of option names to values, got {options!r}")
    sc = ssc.sparkContext
    conf: Dict[str, Any] = dict(sc.getConf().getAll())
    for k in TASK_OPTIONS:  # the task planner's (see _task_options), not the source's
        conf.pop(CONF_PREFIX + k, None)
    source_options = dict(options or {})
    shared = take_shared_filesystem(source_options, conf)
    found = take_option(source_options, conf, HOSTS)
    hosts = None if found is None else parse_hosts(*found)
    if hosts is not None and shared:
        raise ConfigurationError(f"options {SHARED_FILESYSTEM!r}=true and {HOSTS!r}={','.join(hosts)!r} "
                                 f"contradict each other: the files are either the same everywhere or "
                                 f"local to each host; set one of them")
    check_master(str(sc.master), shared or hosts is not None, node_local=True)
    return FileSourceOptions.from_mapping(source_options, conf, also=(*DEPLOYMENT_OPTIONS, *TASK_OPTIONS)), hosts

