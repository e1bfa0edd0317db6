"""Registering the exactly-once Structured Streaming sinks with a SparkSession."""

from __future__ import annotations

from typing import Any

__all__ = ["register_sinks"]


def register_sinks(spark: Any) -> None:
    """Register the sinks of this package with ``spark`` (``spark.dataSource.register``), so that
    ``writeStream.format("deo-store")``, ``"deo-doris"``, ``"deo-kafka"`` and ``"deo-delta"`` find them
(``deo-delta`` when ``deltalake`` is installed). Idempotent.
    :func:`~dstream_exactly_once.structured.register` registers these and the ``aof`` source; call
    this one for a query that reads from another source (``deo-kafka`` is both a sink and a source:
    registering it registers both).

    Raises :class:`~dstream_exactly_once.errors.ConfigurationError` on PySpark older than 4.0."""
    from ._requires import require_data_source_api

    require_data_source_api("register_sinks() (the Structured Streaming sinks)")
    from ..kafka.structured._spark_source import kafka_data_source
    from ._spark_doris_sink import DorisSinkDataSource
    from ._spark_store_sink import StoreSinkDataSource

    spark.dataSource.register(StoreSinkDataSource)
    spark.dataSource.register(DorisSinkDataSource)
    spark.dataSource.register(kafka_data_source(spark))  # the deo-kafka sink, and the source of that name
    try:
        import deltalake  # noqa: F401
    except ImportError:  # the delta extra is optional; the other sinks work without it
        return
    from ._spark_delta_sink import DeltaSinkDataSource

    spark.dataSource.register(DeltaSinkDataSource)
