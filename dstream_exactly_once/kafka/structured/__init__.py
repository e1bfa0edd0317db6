"""The Kafka source's and sink's Structured Streaming forms (format ``deo-kafka``, PySpark 4.0+).

:mod:`._source` plans and reads a query's micro-batches over the planner and readers of
:mod:`dstream_exactly_once.kafka`, with its options in :mod:`._source_options` and its offsets in
:mod:`._source_offsets`; :mod:`._sink` writes micro-batches transactionally (markers in :mod:`._marker`).
The Python Data Source classes Spark sees are ``_spark_source`` and ``_spark_sink``; they are
registered by :func:`dstream_exactly_once.structured.register`. Importing this package imports no Spark.
"""
