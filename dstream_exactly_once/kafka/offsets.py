"""Deprecated path: this module moved to a private one; import OffsetRange, TopicAndPartition, Broker,
KafkaMessageAndMetadata, HasOffsetRanges and utf8_decoder from dstream_exactly_once.

It still imports, re-exporting Broker, HasOffsetRanges, KafkaMessageAndMetadata, OffsetRange,
TopicAndPartition, to_bytes, utf8_decoder, with a :class:`DeprecationWarning`; it will be removed in a later
release.
"""

from __future__ import annotations

import warnings

from ._offsets import (  # noqa: F401 - re-exported
    Broker,
    HasOffsetRanges,
    KafkaMessageAndMetadata,
    OffsetRange,
    TopicAndPartition,
    to_bytes,
    utf8_decoder,
)

__all__ = [
    "Broker",
    "HasOffsetRanges",
    "KafkaMessageAndMetadata",
    "OffsetRange",
    "TopicAndPartition",
    "to_bytes",
    "utf8_decoder",
]

warnings.warn("dstream_exactly_once.kafka.offsets is deprecated: import OffsetRange, TopicAndPartition, "
              "Broker, KafkaMessageAndMetadata, HasOffsetRanges and utf8_decoder from dstream_exactly_once",
              DeprecationWarning, stacklevel=2)
