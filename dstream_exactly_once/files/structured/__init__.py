"""The file source's Structured Streaming form (format ``aof``, PySpark 4.0+): :mod:`.aof` (the Data
Source, registered by :func:`dstream_exactly_once.structured.register`), its options
(:mod:`.aof_options`) and offset documents (:mod:`.aof_offsets`). Importing this package imports no Spark."""
