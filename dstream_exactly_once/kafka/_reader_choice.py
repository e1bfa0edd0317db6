"""Which executor reader reads offset ranges: kafka-python (default) or confluent-kafka (librdkafka).

Chosen per application with the SparkConf key :data:`READER_KEY`, checked on the driver by
:func:`check_reader` (a bad name, a missing package or kafkaParams librdkafka cannot honour raise
:class:`ConfigurationError` before anything runs) and carried to the executors by name;
:func:`range_reader` resolves the name there. Both readers have one signature and one meaning
(:func:`dstream_exactly_once.kafka._reader_kafka_python.read_range`): the same records, the same
data-loss policy, hence the same delivery guarantee. :func:`ranges_reader` gives the reader's
many-range form (:mod:`._multi_reader`, :mod:`._multi_reader_confluent`), which reads a packed task.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

from ..errors import ConfigurationError
from ._params import KafkaConfig
from ._records import RecordBlock
from ._spark_conf import READER_KEY

__all__ = ["CONFLUENT_KAFKA", "DEFAULT_READER", "KAFKA_PYTHON", "READERS", "READER_KEY", "check_reader",
           "range_reader", "ranges_reader"]

KAFKA_PYTHON = "kafka-python"
CONFLUENT_KAFKA = "confluent-kafka"
READERS = (KAFKA_PYTHON, CONFLUENT_KAFKA)
DEFAULT_READER = KAFKA_PYTHON

#: ``read_range(config, r, *, poll_timeout_ms, fail_on_data_loss, metadata, attempt, on_data_loss)``
RangeReadFunction = Callable[..., Iterator[RecordBlock]]


def check_reader(name: Any, config: KafkaConfig) -> str:
    """Validate the reader ``name`` for ``config`` on the driver; returns the name.

    Raises :class:`ConfigurationError` naming :data:`READER_KEY`, the value and the allowed ones;
    for ``confluent-kafka`` also when the package is missing (with the ``pip install`` line) or
    librdkafka refuses a kafkaParams setting.
    """
    if not isinstance(name, str) or name.strip().lower() not in READERS:
        raise _unknown(name)
    name = name.strip().lower()
    if name == CONFLUENT_KAFKA:
        from ._confluent_params import check_confluent_config, require_confluent_kafka

        require_confluent_kafka(READER_KEY)
        check_confluent_config(config)
    return name


def range_reader(name: str) -> RangeReadFunction:
    """The ``read_range`` function of reader ``name`` (on an executor; imports it there)."""
    if name == CONFLUENT_KAFKA:
        from ._reader_confluent import read_range as confluent_read

        return confluent_read
    if name == KAFKA_PYTHON:
        from ._reader_kafka_python import read_range

        return read_range
    raise _unknown(name)


def ranges_reader(name: str) -> RangeReadFunction:
    """The ``read_ranges`` function of reader ``name`` (many ranges with one consumer; on an executor)."""
    if name == CONFLUENT_KAFKA:
        from ._multi_reader_confluent import read_ranges as confluent_read

        return confluent_read
    if name == KAFKA_PYTHON:
        from ._multi_reader import read_ranges

        return read_ranges
    raise _unknown(name)


def _unknown(name: Any) -> ConfigurationError:
    return ConfigurationError(f"{READER_KEY} must be one of {', '.join(repr(n) for n in READERS)}, got {name!r}")
