"""Packaging entry point for dstream-exactly-once (tool configuration lives in pyproject.toml)."""

import re
from pathlib import Path

from setuptools import find_packages, setup

HERE = Path(__file__).parent
VERSION = re.search(r'__version__ = "([^"]+)"', (HERE / "dstream_exactly_once" / "_version.py").read_text()).group(1)

setup(
    name="dstream-exactly-once",
    version=VERSION,
    description="WAL-free direct Kafka DStreams for PySpark 3.5/4.x with exactly-once output",
    long_description=(HERE / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.11",  # the version CI tests; older ones are untested
    packages=find_packages(include=["dstream_exactly_once", "dstream_exactly_once.*"]),
    package_data={"dstream_exactly_once": ["py.typed", "testing/jvm/pom.xml", "testing/jvm/yarn-pom.xml",
                                           "testing/jvm/spark-kafka-pom.xml", "stores/redis/lua/*.lua"]},
    # crc32c: kafka-python's C implementation of the record-batch checksum; without it every
    # fetched batch is checksummed in pure Python (measured: 28k -> 81k records/s per consumer).
    # kafka-python < 3.1: the driver's offset look-ups send prebuilt ListOffsets/Metadata requests
    # through the admin client's connection manager (kafka/_metadata.py), an internal API.
    install_requires=["kafka-python>=3.0,<3.1", "crc32c>=2.3"],
    extras_require={
        "spark": ["pyspark>=3.5"],
        "redis": ["redis>=5"],
        "postgres": ["psycopg[binary]>=3.1"],
        # dstream-eo chart and the teaching demo's PNG; without it only the chart is skipped
        "chart": ["matplotlib>=3.5"],
        "charts": ["matplotlib>=3.5"],  # an alias of "chart", kept so existing installs keep working
        # the optional librdkafka executor reader (spark.streaming.kafka.reader=confluent-kafka)
        "confluent": ["confluent-kafka>=2.3"],
        # the Structured Streaming sinks (PySpark's Python Data Source writers move rows through Arrow)
        "structured": ["pyspark>=4.0", "pyarrow>=11"],
        # the exactly-once Delta Lake sink (delta-rs: no JVM); executors write Parquet with pyarrow
        "delta": ["deltalake>=1.0", "pyarrow>=11"],
        # a Spark Connect client (SparkSession.builder.remote), and the Python of a Spark Connect
        # server that runs this package's Structured Streaming sources, sinks and foreachBatch
        # functions: PySpark's own "connect" extra (grpcio, grpcio-status, googleapis-common-protos,
        # pandas, pyarrow, zstandard); PySpark 4.x warns that pandas 3 is not fully supported yet
        "connect": ["pyspark[connect]>=4.0", "pandas>=2.2,<3"],
        # dstream_exactly_once.testing's helpers and this project's own test suite
        "test": ["pytest>=7", "pyspark>=3.5", "redis>=5", "psycopg[binary]>=3.1", "matplotlib>=3.5",
                 "confluent-kafka>=2.3", "pyarrow>=11", "deltalake>=1.0", "pyspark[connect]>=4.0", "pandas>=2.2,<3"],
        # working on this project: the test suite plus the linters and the API reference build
        # (`make docs`) that `make test` runs
        "dev": ["pytest>=7", "pyspark>=3.5", "redis>=5", "psycopg[binary]>=3.1", "matplotlib>=3.5",
                "confluent-kafka>=2.3", "pyarrow>=11", "deltalake>=1.0", "pyspark[connect]>=4.0", "pandas>=2.2,<3",
                "ruff", "mypy", "sphinx>=7.2,<8"],
    },
    entry_points={"console_scripts": ["dstream-eo=dstream_exactly_once.cli:main"],
                  # the pytest plugin (deo_* fixtures: Kafka, Redis, Redis Cluster, PostgreSQL, Spark)
                  "pytest11": ["dstream_exactly_once=dstream_exactly_once.testing.pytest_plugin"]},
    license_files=["LICENSE", "NOTICE"],
    classifiers=[
        "Development Status :: 4 - Beta",
        "License :: OSI Approved :: Apache Software License",
        "Operating System :: POSIX :: Linux",
        "Programming Language :: Python :: 3",
        "Programming Language :: Python :: 3.11",
        "Topic :: System :: Distributed Computing",
        "Typing :: Typed",
    ],
)
