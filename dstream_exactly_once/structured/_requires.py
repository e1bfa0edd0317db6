"""The one check every Spark-facing entry of :mod:`dstream_exactly_once.structured` makes first: the
Python Data Source API (``pyspark.sql.datasource``) exists only in PySpark 4.0 and newer."""

from __future__ import annotations

__all__ = ["require_data_source_api"]


def require_data_source_api(what: str) -> None:
    """Raise :class:`~dstream_exactly_once.errors.ConfigurationError` saying that ``what`` needs PySpark
    4.0 or newer, unless ``pyspark.sql.datasource`` imports (a missing pyspark: its own ImportError)."""
    try:
        import pyspark.sql.datasource  # noqa: F401 - only whether it imports
    except ImportError as exc:
        if (exc.name or "").split(".")[0] == "pyspark" and exc.name != "pyspark.sql.datasource":
            raise  # pyspark itself is missing: the install hint of dstream_exactly_once's Spark names
        import pyspark

        from ..errors import ConfigurationError

        raise ConfigurationError(
            f"{what} needs PySpark 4.0 or newer (the Python Data Source API, pyspark.sql.datasource); installed "
            f"PySpark is {pyspark.__version__}. On older PySpark read with KafkaUtils or FileUtils (DStreams) and "
            f"write with the DStream output patterns and sinks") from None
