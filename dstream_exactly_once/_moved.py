"""Old module paths of the package that still import, as the modules they became.

A Spark checkpoint (``ssc.checkpoint(dir)``) pickles the library's functions and stream recipes by
module path, and Spark pickles objects between processes the same way. When a module moves, a
checkpoint written by an earlier release would fail to load with an import error deep inside Spark's
recovery. Importing this module (the package root does, first) installs :class:`MovedModuleFinder`
on ``sys.meta_path``: an import of a path in :data:`MOVED` gets the module it moved to (the same
module object, so classes and functions are identical), quietly, so such a checkpoint recovers. Old
paths that users were documented to import are deprecation shims instead (they warn); this table
holds only the internal ones.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from types import ModuleType
from typing import Dict, Optional, Sequence

__all__ = ["MOVED", "MovedModuleFinder", "install"]

_PKG = "dstream_exactly_once"

#: old dotted module path -> the module it is now (both relative to the package)
_RELATIVE: Dict[str, str] = {
    "_child_driver": "testing._child_driver",
    "_cli_args": "cli._parser",
    "_cli_batches": "cli._batches",
    "_cli_chart": "cli._chart",
    "_cli_labels": "cli._labels",
    "_cli_offsets": "cli._offsets",
    "_cli_ops_args": "cli._operator_parsers",
    "_cli_reset": "cli._reset",
    "admin.export": "admin._export",
    "admin.retire": "admin._retire",
    "admin.skip": "admin._skip",
    "cli.arg_types": "_command_line",
    "cli.batches": "cli._batches",
    "cli.chart": "cli._chart",
    "cli.commands": "cli._commands",
    "cli.delta": "cli._delta",
    "cli.driver_check": "cli._driver_check",
    "cli.exit_codes": "cli._exit_codes",
    "cli.kafka_args": "cli._kafka_args",
    "cli.labels": "cli._labels",
    "cli.offsets": "cli._offsets",
    "cli.operator_parsers": "cli._operator_parsers",
    "cli.option_entries": "cli._option_entries",
    "cli.options_doc": "cli._options_doc",
    "cli.output": "cli._output",
    "cli.parser": "cli._parser",
    "cli.reset": "cli._reset",
    "cli.retire": "cli._retire",
    "cli.store_access": "cli._store_access",
    "core.boundary": "engine._boundary",
    "core.committer": "engine._committer",
    "core.driver_ref": "core._driver_ref",
    "core.fencing": "core._fencing",
    "core.heartbeat": "engine._heartbeat",
    "core.live_log": "core._live_log",
    "core.loss": "core._loss",
    "core.loss_totals": "core._loss_totals",
    "core.options": "core._options",
    "core.progress": "core._progress",
    "core.range_display": "core._range_display",
    "core.ranges": "core._ranges",
    "core.retirement": "core._retirement",
    "core.retry": "core._retry",
    "core.source": "core._source",
    "core.tasks": "core._tasks",
    "demo": "teaching._pipeline",
    "engine.boundary": "engine._boundary",
    "engine.committer": "engine._committer",
    "engine.heartbeat": "engine._heartbeat",
    "files.deployment": "files._deployment",
    "files.hosts": "files._hosts",
    "files.identity": "files._identity",
    "files.live": "files._live",
    "files.locate": "files._locate",
    "files.matching": "files._matching",
    "files.options": "files._options",
    "files.paths": "files._paths",
    "files.planner": "files._planner",
    "files.ranges": "files._ranges",
    "files.reader": "files._reader",
    "files.spark.utils": "files.spark._utils",
    "files.structured.aof_offsets": "files.structured._aof_offsets",
    "files.structured.aof_options": "files.structured._aof_options",
    "kafka.admin": "kafka._admin",
    "kafka.commit_queue": "kafka._commit_queue",
    "kafka.confluent_params": "kafka._confluent_params",
    "kafka.consumers": "kafka._consumers",
    "kafka.errors_map": "kafka._errors_map",
    "kafka.group_mirror": "kafka._group_mirror",
    "kafka.groups": "kafka._groups",
    "kafka.live_log": "kafka._live_log",
    "kafka.metadata": "kafka._metadata",
    "kafka.multi_reader": "kafka._multi_reader",
    "kafka.multi_reader_confluent": "kafka._multi_reader_confluent",
    "kafka.params": "kafka._params",
    "kafka.planner": "kafka._planner",
    "kafka.range_reader": "kafka._range_reader",
    "kafka.reader": "kafka._reader_kafka_python",
    "kafka.reader_choice": "kafka._reader_choice",
    "kafka.reader_confluent": "kafka._reader_confluent",
    "kafka.reader_kafka_python": "kafka._reader_kafka_python",
    "kafka.readers": "kafka._reader_choice",
    "kafka.records": "kafka._records",
    "kafka.sasl_probe": "kafka._sasl_probe",
    "kafka.sinks.transactional": "kafka.sinks._transactional",
    "kafka.source": "kafka._source",
    "kafka.spark.commit_async": "kafka.spark._commit_async",
    "kafka.spark.convert": "kafka.spark._convert",
    "kafka.spark.direct": "kafka.spark._direct",
    "kafka.spark.rdd": "kafka.spark._rdd",
    "kafka.spark.receiver_stream": "kafka.spark._receiver_stream",
    "kafka.spark.utils": "kafka.spark._utils",
    "kafka.spark_conf": "kafka._spark_conf",
    "kafka.spark_strategy_names": "kafka._spark_strategy_names",
    "kafka.stall": "kafka._stall",
    "kafka.strategies": "kafka._strategies",
    "kafka.strategies_010": "kafka._spark_strategy_names",
    "kafka.structured.marker": "kafka.structured._marker",
    "kafka.structured.sink": "kafka.structured._sink",
    "kafka.structured.source": "kafka.structured._source",
    "kafka.structured.source_offsets": "kafka.structured._source_offsets",
    "kafka.structured.source_options": "kafka.structured._source_options",
    "kafka.timestamps": "kafka._timestamps",
    "offsets": "kafka._offsets",
    "operators._live": "admin._live",
    "option_registry._cli": "cli._option_entries",
    "option_registry.docs": "cli._options_doc",
    "sinks.delta.files": "sinks.delta._files",
    "sinks.delta.log": "sinks.delta._log",
    "sinks.delta.merge": "sinks.delta._merge",
    "sinks.delta.schema": "sinks.delta._schema",
    "sinks.delta.sink": "sinks.delta._sink",
    "sinks.delta.table": "sinks.delta._table",
    "sinks.doris.client": "sinks.doris._client",
    "sinks.doris.protocol": "sinks.doris._protocol",
    "sinks.doris.retry": "sinks.doris._retry",
    "sinks.doris.settings": "sinks.doris._settings",
    "sinks.doris.sink": "sinks.doris._sink",
    "sinks.doris.transport": "sinks.doris._transport",
    "sinks.labels": "sinks._labels",
    "stores._redis_retire": "stores.redis._retire",
    "stores._redis_wait": "stores.redis._wait",
    "stores._sql_flat": "stores.sql._flat",
    "stores._sql_operators": "stores.sql._operators",
    "stores._sql_retire": "stores.sql._retire",
    "stores._sql_schema": "stores.sql._schema",
    "stores._sql_statements": "stores.sql._statements",
    "stores.app_id": "stores._app_id",
    "stores.base": "stores._base",
    "stores.batch": "stores._writes",
    "stores.interfaces": "stores._interfaces",
    "stores.postgres": "stores.sql._postgres",
    "stores.redis.cluster": "stores.redis._cluster",
    "stores.redis.store": "stores.redis._store",
    "stores.redis_cluster": "stores.redis._cluster",
    "stores.sql.postgres": "stores.sql._postgres",
    "stores.sql.sqlite": "stores.sql._sqlite",
    "stores.sql.store": "stores.sql._store",
    "stores.sqlite": "stores.sql._sqlite",
    "stores.url": "stores._url",
    "streaming.backpressure": "streaming._backpressure",
    "streaming.commit_async": "kafka.spark._commit_async",
    "streaming.connect_guard": "streaming._connect_guard",
    "streaming.data_loss": "streaming._data_loss",
    "streaming.direct": "kafka.spark._direct",
    "streaming.dstream": "streaming._dstream",
    "streaming.exactly_once": "streaming._exactly_once",
    "streaming.file_utils": "files.spark._utils",
    "streaming.input_info": "streaming._input_info",
    "streaming.kafka_utils": "kafka.spark._utils",
    "streaming.lifecycle": "streaming._lifecycle",
    "streaming.partition_ranges": "streaming._partition_ranges",
    "streaming.pinned": "streaming._pinned",
    "streaming.progress_hooks": "streaming._progress_hooks",
    "streaming.range_rdd": "streaming._range_rdd",
    "streaming.rdd": "kafka._range_reader",
    "streaming.receiver_stream": "kafka.spark._receiver_stream",
    "streaming.recovery": "streaming._recovery",
    "streaming.task_context": "streaming._task_context",
    "streaming.termination": "streaming._termination",
    "structured._spark_kafka_sink": "kafka.structured._spark_sink",
    "structured._spark_kafka_source": "kafka.structured._spark_source",
    "structured.aof_offsets": "files.structured._aof_offsets",
    "structured.aof_options": "files.structured._aof_options",
    "structured.doris_sink": "structured._doris_sink",
    "structured.kafka_marker": "kafka.structured._marker",
    "structured.kafka_sink": "kafka.structured._sink",
    "structured.kafka_source": "kafka.structured._source",
    "structured.kafka_source_offsets": "kafka.structured._source_offsets",
    "structured.kafka_source_options": "kafka.structured._source_options",
    "structured.sink_runs": "structured._sink_runs",
    "teaching.chart": "teaching._chart",
    "teaching.driver": "teaching._driver",
    "teaching.pipeline": "teaching._pipeline",
    "teaching.plain_store": "teaching._plain_store",
    "teaching.points": "teaching._points",
    "teaching.show": "teaching._show",
    "testing.child_driver": "testing._child_driver",
    "testing.doris_double": "testing._doris_double",
    "testing.fake_kafka": "testing._fake_kafka",
    "testing.kafka": "testing._kafka",
    "testing.logs": "testing._logs",
    "testing.postgres": "testing._postgres",
    "testing.redis": "testing._redis",
    "testing.redis_cluster": "testing._redis_cluster",
    "testing.spark": "testing._spark",
    "testing.spark_connect": "testing._spark_connect",
    "testing.spark_kafka": "testing._spark_kafka",
    "testing.yarn": "testing._yarn",
}

MOVED: Dict[str, str] = {f"{_PKG}.{old}": f"{_PKG}.{new}" for old, new in _RELATIVE.items()}


class _AliasLoader(importlib.abc.Loader):
    """Gives the module ``target`` for an old path. The import system sets the module's ``__spec__``
    to the old path's spec on the way; :meth:`exec_module` puts the module's own back."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.own_spec: Optional[importlib.machinery.ModuleSpec] = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(self.target)
        self.own_spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        """The target module ran when it was imported: only its own ``__spec__`` is restored."""
        module.__spec__ = self.own_spec


class MovedModuleFinder(importlib.abc.MetaPathFinder):
    """Finds the old paths of :data:`MOVED` (and nothing else)."""

    def find_spec(self, fullname: str, path: Optional[Sequence[str]] = None,
                  target: Optional[ModuleType] = None) -> Optional[importlib.machinery.ModuleSpec]:
        moved_to = MOVED.get(fullname)
        if moved_to is None:
            return None
        parent, _, leaf = fullname.rpartition(".")
        if leaf in vars(sys.modules.get(parent) or ModuleType(parent)):
            # the import system sets the module as the parent's attribute ``leaf``: never over a name
            # the parent package defines (a function its face exports under the old module's name)
            return None
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(moved_to))


def install() -> None:
    """Put one :class:`MovedModuleFinder` at the end of ``sys.meta_path`` (idempotent): the real
    finders go first, so a module that exists is always the one imported."""
    if not any(isinstance(f, MovedModuleFinder) for f in sys.meta_path):
        sys.meta_path.append(MovedModuleFinder())


install()
