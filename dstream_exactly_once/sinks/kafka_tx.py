"""Deprecated path of the transactional Kafka sink: import it from :mod:`dstream_exactly_once.sinks`
(``from dstream_exactly_once.sinks import KafkaTransactionalSink``).

This module still imports, with a :class:`DeprecationWarning`; it will be removed in a later release.
"""

from __future__ import annotations

import warnings

from ..kafka.sinks._transactional import KafkaTransactionalSink, KafkaWrite

__all__ = ["KafkaTransactionalSink", "KafkaWrite"]

warnings.warn("dstream_exactly_once.sinks.kafka_tx is deprecated: use from dstream_exactly_once.sinks import "
              "KafkaTransactionalSink", DeprecationWarning, stacklevel=2)
