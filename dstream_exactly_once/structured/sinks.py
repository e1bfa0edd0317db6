"""Registering the exactly-once Structured Streaming sinks with a SparkSession."""

from __future__ import annotations

from typing import Any

__all__ = ["register_sinks"]


def register_sinks(spark: Any) -> None:
    """Register the sinks of this package with ``spark`` (``spark.dataSource.register``), so that
    ``writeStream.format("deo-store")`` finds them. Idempotent."""
    from ._spark_store_sink import StoreSinkDataSource

    spark.dataSource.register(StoreSinkDataSource)
