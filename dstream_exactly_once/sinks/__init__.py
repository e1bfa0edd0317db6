"""Exactly-once sinks: deterministic labels, Doris Stream Load (two-phase commit), transactional Kafka.

Every sink states its unit of parallelism and its delivery guarantee in its docstring. The Delta
Lake sink is :mod:`dstream_exactly_once.sinks.delta` (the ``delta`` extra: ``deltalake``, ``pyarrow``),
imported only when used.
"""

from ..errors import LoadRejectedError
from ..kafka.sinks._transactional import KafkaTransactionalSink, KafkaWrite
from ._labels import MAX_LABEL_LENGTH, LabelGenerator, make_label
from .doris import DorisSink, DorisStreamLoadClient, LoadResult, LoadState, PartitionWrite, TxnOutcome

__all__ = [
    "MAX_LABEL_LENGTH",
    "DorisSink",
    "DorisStreamLoadClient",
    "KafkaTransactionalSink",
    "KafkaWrite",
    "LabelGenerator",
    "LoadRejectedError",
    "LoadResult",
    "LoadState",
    "PartitionWrite",
    "TxnOutcome",
    "make_label",
]
