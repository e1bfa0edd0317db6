"""The file source's Spark glue for the DStream API (with ``files/structured/``, the only part of
``files/`` that imports Spark): :mod:`._utils` is ``FileUtils`` (``createFileStream``,
``createExactlyOnceFileStream``, ``createRDD``) over the planner and reader of
:mod:`dstream_exactly_once.files`."""
