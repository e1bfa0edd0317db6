"""Starting offsets from a timestamp: Kafka's ListOffsets by timestamp, asked once on the driver.

For each partition the first offset whose record timestamp is >= the given time (ms since the
epoch). A partition with no such record starts at its log end (Structured Streaming's
``startingOffsetsByTimestampStrategy=latest``): only records written later are read.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping

from .._checks import is_int
from ..errors import ConfigurationError, DStreamExactlyOnceError
from ._admin import open_admin
from ._errors_map import translate_kafka_error
from ._offsets import TopicAndPartition
from ._params import KafkaConfig

__all__ = ["check_timestamp", "offsets_for_timestamps"]


def check_timestamp(value: Any, where: str) -> int:
    """A timestamp in ms since the epoch: an int >= 0."""
    if not is_int(value) or value < 0:
        raise ConfigurationError(f"{where} must be an int of milliseconds since the epoch (>= 0), got {value!r}")
    return int(value)


def offsets_for_timestamps(config: KafkaConfig,
                           timestamps: Mapping[TopicAndPartition, int]) -> Dict[TopicAndPartition, int]:
    """``{tp: first offset with timestamp >= timestamps[tp]}`` (the log end where there is none).

    Raises :class:`ConfigurationError` when the broker cannot look offsets up by timestamp
    (ListOffsets v1 needs Kafka 0.10.1 or later), and the translated kafka-python error otherwise.
    """
    if not timestamps:
        return {}
    import kafka.errors as ke
    from kafka import TopicPartition
    from kafka.admin import OffsetSpec

    specs = {TopicPartition(tp.topic, tp.partition): check_timestamp(ts, f"the timestamp for {tp}")
             for tp, ts in timestamps.items()}
    admin = open_admin(config, "dstream-exactly-once-timestamps")
    what = "looking up offsets by timestamp"
    try:
        found = admin.list_partition_offsets(specs)
        missing = [tp for tp, answer in found.items() if answer.offset is None or answer.offset < 0]
        ends = admin.list_partition_offsets({tp: OffsetSpec.LATEST for tp in missing}) if missing else {}
    except DStreamExactlyOnceError:
        raise
    except (ke.UnsupportedVersionError, ke.UnsupportedForMessageFormatError) as exc:
        raise ConfigurationError(
            f"the brokers at {config.bootstrap} cannot look offsets up by timestamp ({type(exc).__name__}): "
            "starting from a timestamp needs Kafka 0.10.1 or later with message format v1+; "
            "give explicit offsets instead") from exc
    except Exception as exc:  # noqa: BLE001 - translated at this boundary
        raise translate_kafka_error(exc, config.bootstrap, what, config) from exc
    finally:
        try:
            admin.close()
        except Exception:  # noqa: BLE001, S110 - closing is best effort
            pass
    out: Dict[TopicAndPartition, int] = {}
    for tp, answer in found.items():
        offset = ends[tp].offset if tp in ends else answer.offset
        out[TopicAndPartition(tp.topic, tp.partition)] = int(offset)
    return out
