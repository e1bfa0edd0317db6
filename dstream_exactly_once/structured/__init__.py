"""Structured Streaming on the library's sources and stores (PySpark 4.0+, Python Data Source API).

:func:`register` makes the formats known to a Spark session; nothing Spark-specific is imported
before it is called. Every public name of this package needs PySpark 4.0 or newer and says so
(:class:`~dstream_exactly_once.errors.ConfigurationError`) on an older one::

    from dstream_exactly_once.structured import register
    register(spark)
    spark.readStream.format("aof").option("path", "/var/log/app/service.log*").load()
    df.writeStream.format("deo-store").options(**store_sink_options(url, app_id)).start()

- ``aof`` (:func:`register_aof`): lines appended to growing files, rotation included.
- ``deo-kafka`` as a source: Kafka records, Spark's Kafka source's schema and options, read by the
  library's Kafka readers (no JVM connector), ranges packed into few tasks.
- ``deo-store`` (:func:`store_sink_options`): exactly-once micro-batches into a transactional store.
- ``deo-doris`` (:func:`doris_sink_options`): exactly-once micro-batches into Doris (Stream Load, two-phase).
- ``deo-kafka`` (:func:`kafka_sink_options`): micro-batches into a Kafka topic, one
  transaction per partition (exactly-once for ``read_committed`` consumers when replays are partitioned
  alike).
- ``deo-delta`` (:func:`delta_sink_options`): exactly-once micro-batches into a Delta Lake table, one Delta
  commit per batch (needs the ``delta`` extra).

Spark Connect: :func:`register` works on a Connect session (``SparkSession.builder.remote(...)``) as on a
classic one; the classes are pickled to the server, whose Python workers run them, so this package and
PySpark's ``connect`` extra must be installed in the server's Python (``pip install
'dstream-exactly-once[connect]'``). The DStream API (``KafkaUtils``, ``FileUtils``) needs a SparkContext,
which a Connect session does not have.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DeltaSinkOptions", "DorisSinkOptions", "KafkaSinkOptions", "StoreSinkOptions", "delta_sink_options",
           "doris_sink_options", "kafka_sink_options", "register", "register_aof", "register_sinks",
           "store_sink_options"]


def register(spark: Any) -> None:
    """Register this package's data sources and sinks with the Spark session ``spark`` (formats
    ``aof``, ``deo-store``, ``deo-doris``, ``deo-kafka`` (both a source and a sink) and, with ``deltalake``
    installed, ``deo-delta``); :func:`register_aof` registers the ``aof`` source alone, :func:`register_sinks` the
    sinks (and ``deo-kafka``'s source). Idempotent.
    ``spark`` may be a classic or a Spark Connect session (the classes are then pickled to the server,
    whose Python workers run them and must import this package).

    Raises :class:`~dstream_exactly_once.errors.ConfigurationError` on PySpark older than 4.0."""
    from ._requires import require_data_source_api

    require_data_source_api("register() (Structured Streaming)")
    from ..files.structured._aof import register_aof
    from ._sinks import register_sinks

    register_aof(spark)
    register_sinks(spark)


# ---- sinks (lazy: importing this package needs no Spark)
_SINK_EXPORTS = {
    "register_aof": "..files.structured._aof",
    "register_sinks": "._sinks",
    "store_sink_options": "._store_sink",
    "StoreSinkOptions": "._store_sink",
    "doris_sink_options": "._doris_sink",
    "DorisSinkOptions": "._doris_sink",
    "kafka_sink_options": "..kafka.structured._sink",
    "KafkaSinkOptions": "..kafka.structured._sink",
    "delta_sink_options": "._delta_sink",
    "DeltaSinkOptions": "._delta_sink",
}


def __getattr__(name: str) -> Any:
    module = _SINK_EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    from ._requires import require_data_source_api

    require_data_source_api(f"dstream_exactly_once.structured.{name} (Structured Streaming)")
    return getattr(importlib.import_module(module, __name__), name)
