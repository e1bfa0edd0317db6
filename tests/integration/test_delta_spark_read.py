"""Opt-in: a table the Delta sink wrote reads back identically with Spark's own Delta reader.

The sink needs no JVM package; reading with ``spark.read.format("delta")`` needs Delta's Spark
package matched to the installed Spark. Set ``DEO_DELTA_SPARK_PACKAGE`` to its Maven coordinate
(for example ``io.delta:delta-spark_2.13:<version>``) to run this test; it is skipped otherwise.
"""

from __future__ import annotations

import os

import deltalake
import pytest

from dstream_exactly_once.sinks.delta import DeltaSink
from dstream_exactly_once.stores import open_store

from ..unit.test_delta_sink import SCHEMA, batch, rows, run_batch

PACKAGE = os.environ.get("DEO_DELTA_SPARK_PACKAGE")


@pytest.mark.skipif(not PACKAGE, reason="set DEO_DELTA_SPARK_PACKAGE to Delta's Spark package (Maven coordinate) "
                                        "to read the sink's table with spark.read.format('delta')")
def test_spark_delta_reads_what_the_sink_wrote(tmp_path):
    from pyspark.sql import SparkSession

    uri = str(tmp_path / "table")
    sink = DeltaSink(uri, schema=SCHEMA)
    with open_store(f"sqlite:///{tmp_path}/state.db", "orders") as store:
        epoch = store.start_epoch()
        run_batch(sink, store, epoch, batch(0, 0, 10), rows(0, 10))
        run_batch(sink, store, epoch, batch(1, 10, 16), rows(10, 16))
    expected = sorted((r["key"], r["n"]) for r in deltalake.DeltaTable(uri).to_pyarrow_table().to_pylist())
    spark = (SparkSession.builder.master("local[1]").appName("deo-delta-spark-read")
             .config("spark.jars.packages", PACKAGE)
             .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
             .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
             .getOrCreate())
    try:
        got = sorted((r["key"], r["n"]) for r in spark.read.format("delta").load(uri).collect())
        history = spark.sql(f"DESCRIBE HISTORY delta.`{uri}`").select("version").collect()
    finally:
        spark.stop()
    assert got == expected and len(got) == 16
    assert sorted(r["version"] for r in history) == [0, 1]  # one table commit per batch
