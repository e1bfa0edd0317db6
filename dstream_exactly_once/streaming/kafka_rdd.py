"""Deprecated path of ``KafkaRDD``: import it from the package root (``from dstream_exactly_once import KafkaRDD``).

This module still imports, with a :class:`DeprecationWarning`; it will be removed in a later release.
"""

from __future__ import annotations

import warnings

from ..kafka.spark._rdd import KafkaRDD

__all__ = ["KafkaRDD"]

warnings.warn("dstream_exactly_once.streaming.kafka_rdd is deprecated: use from dstream_exactly_once import KafkaRDD",
              DeprecationWarning, stacklevel=2)
