"""The engine that drives a batch over a store: the committer (batch log, replay, epochs), the one error
boundary around user code, and the driver's heartbeat.

It sits above the stores and the source contract (``core/``) and below the Spark glue (``streaming/``,
``structured/``), the operators and the CLI. Nothing in this package imports a source or Spark.
"""
