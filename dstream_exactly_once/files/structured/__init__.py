"""The file source's Structured Streaming form (format ``aof``, PySpark 4.0+): :mod:`._aof` (the Data
Source, registered by :func:`dstream_exactly_once.structured.register`), its options
(:mod:`._aof_options`) and offset documents (:mod:`._aof_offsets`). Importing this package imports no Spark."""
