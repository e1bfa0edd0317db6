"""Structured Streaming on the library's sources (PySpark 4.0+, Python Data Source API).

:func:`register` makes the formats known to a Spark session; nothing Spark-specific is imported
before it is called::

    from dstream_exactly_once.structured import register
    register(spark)
    spark.readStream.format("aof").option("path", "/var/log/app/service.log*").load()

- ``aof`` (:mod:`.aof`): lines appended to growing files, rotation included.
"""

from __future__ import annotations

from typing import Any

__all__ = ["register"]


def register(spark: Any) -> None:
    """Register this package's data sources with the Spark session ``spark`` (format ``aof``).

    Raises :class:`~dstream_exactly_once.errors.ConfigurationError` on PySpark older than 4.0."""
    from .aof import register_aof

    register_aof(spark)
