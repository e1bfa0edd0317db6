"""Spark's Structured Streaming Kafka source jars (``spark-sql-kafka-0-10``) at PySpark's version.

Resolved from Maven Central with the project's Maven helper (cached); pass the result as
``spark.jars``. The version is PySpark's own, or ``$DEO_SPARK_KAFKA_VERSION`` when set: a PySpark
build newer than the newest release on Maven Central (:data:`NEWEST_PUBLISHED`) uses that release.
"""

from __future__ import annotations

import os
from pathlib import Path

from ._maven import maven_classpath

__all__ = ["NEWEST_PUBLISHED", "spark_kafka_jars", "spark_kafka_version"]

#: The newest ``spark-sql-kafka-0-10_2.13`` release this project resolved from Maven Central.
NEWEST_PUBLISHED = "4.2.0"

POM = Path(__file__).parent / "jvm" / "spark-kafka-pom.xml"


def spark_kafka_jars() -> str:
    """Comma-separated paths of ``spark-sql-kafka-0-10_2.13`` and its dependencies (for ``spark.jars``)."""
    version = spark_kafka_version()
    return maven_classpath(POM, "spark-sql-kafka", {"spark.version": version}).replace(os.pathsep, ",")


def spark_kafka_version() -> str:
    """The ``spark-sql-kafka-0-10`` version to resolve (see the module docstring)."""
    override = os.environ.get("DEO_SPARK_KAFKA_VERSION")
    if override:
        return override
    import pyspark

    version = pyspark.__version__.split(".dev")[0]
    parsed = tuple(int(p) for p in version.split(".")[:3] if p.isdigit())
    newest = tuple(int(p) for p in NEWEST_PUBLISHED.split("."))
    return NEWEST_PUBLISHED if parsed > newest else version
