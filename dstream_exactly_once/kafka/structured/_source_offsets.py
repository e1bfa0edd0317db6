"""The ``deo-kafka`` source's offsets: Spark's Kafka offset JSON, plus where new ranges start.

Spark keeps one offset per micro-batch in the query's checkpoint (``offsets/<batch id>``). For the
``deo-kafka`` source it has the shape of Spark's Kafka source's offset, ``{"topic": {"0": 23}}``:
per topic partition the next offset to read after the batch. A batch's range of a partition starts
at the previous offset's value; where it does not — a partition discovered during the batch's
planning (it starts at its earliest offset), a log reset under ``failOnDataLoss=false``, or any
partition of a new query's first batch (its start offset is resolved again when a restarted run
replays it) — the batch's offset also holds ``"@from": {"topic": {"2": 0}}`` (``@`` is not a legal character of a
topic name). So the ranges of a batch are a pure function of its start and end offsets
(:func:`ranges_between`): a replayed batch reads exactly the offsets the first attempt read.

Nothing here imports Spark.
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Mapping, Optional, Sequence

from ...errors import ConfigurationError
from .._offsets import OffsetRange, TopicAndPartition

__all__ = ["FROM_KEY", "doc_of", "offsets_of", "prorate", "ranges_between", "starts_of"]

#: the key of the batch's range starts that differ from its start offset
FROM_KEY = "@from"


def _nested(offsets: Mapping[TopicAndPartition, int]) -> Dict[str, Dict[str, int]]:
    out: Dict[str, Dict[str, int]] = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return out


def doc_of(offsets: Mapping[TopicAndPartition, int],
           starts: Optional[Mapping[TopicAndPartition, int]] = None) -> Dict[str, Any]:
    """The offset document of next offsets ``offsets`` whose batch ranges began at ``starts`` where
    they did not begin at the previous offset's values."""
    doc: Dict[str, Any] = dict(_nested(offsets))
    if starts:
        doc[FROM_KEY] = _nested(starts)
    return doc


def _flat(doc: Any, what: str) -> Dict[TopicAndPartition, int]:
    if not isinstance(doc, dict):
        raise ConfigurationError(f"{what} {doc!r} is not a deo-kafka offset document ({{\"topic\": {{\"0\": 23}}}}); "
                                 f"was the checkpoint written by another source?")
    out: Dict[TopicAndPartition, int] = {}
    for topic, parts in doc.items():
        if topic == FROM_KEY:
            continue
        if not isinstance(parts, dict):
            raise ConfigurationError(f"{what} {doc!r}: topic {topic!r} must map partitions to offsets; was the "
                                     f"checkpoint written by another source?")
        for p, off in parts.items():
            if not str(p).isdigit() or not isinstance(off, int) or isinstance(off, bool) or off < 0:
                raise ConfigurationError(f"{what} {doc!r}: {topic!r} partition {p!r} offset {off!r} is malformed")
            out[TopicAndPartition(topic, int(p))] = off
    return out


def offsets_of(doc: Any) -> Dict[TopicAndPartition, int]:
    """``{TopicAndPartition: next offset}`` of an offset document."""
    return _flat(doc, "offset")


def starts_of(doc: Any) -> Dict[TopicAndPartition, int]:
    """The range starts an offset document records under :data:`FROM_KEY`."""
    if not isinstance(doc, dict):
        return _flat(doc, "offset")
    return _flat(doc.get(FROM_KEY) or {}, "offset '@from'")


def ranges_between(start: Any, end: Any) -> List[OffsetRange]:
    """The ranges of the batch from offset ``start`` to ``end``, in topic/partition order, empty ones
    left out. A partition of ``end`` without a start (neither in ``start`` nor in ``end``'s
    :data:`FROM_KEY`) is refused: the documents do not belong together."""
    before, after, starts = offsets_of(start), offsets_of(end), starts_of(end)
    out: List[OffsetRange] = []
    for tp in sorted(after):
        begin = starts.get(tp, before.get(tp))
        if begin is None:
            raise ConfigurationError(f"offset {end!r} holds {tp} without a start in the previous offset {start!r}: "
                                     f"the checkpoint's offsets do not belong together")
        if after[tp] < begin:
            raise ConfigurationError(f"offset {end!r}: {tp} ends at {after[tp]} before its start {begin}")
        if after[tp] > begin:
            out.append(OffsetRange(tp.topic, tp.partition, begin, after[tp]))
    return out


def prorate(ranges: Sequence[OffsetRange], max_offsets: int) -> List[OffsetRange]:
    """``ranges`` cut to ``max_offsets`` offsets in all, as Spark's Kafka source splits
    ``maxOffsetsPerTrigger``: each partition gets its share of the lag (rounded down; a share below 1
    rounded up, so no partition starves)."""
    total = sum(r.count() for r in ranges)
    if total <= max_offsets:
        return list(ranges)
    out = []
    for r in ranges:
        share = max_offsets * (r.count() / total)
        take = math.ceil(share) if share < 1 else math.floor(share)
        out.append(r if r.fromOffset + take >= r.untilOffset else
                   OffsetRange(r.topic, r.partition, r.fromOffset, r.fromOffset + take))
    return out
