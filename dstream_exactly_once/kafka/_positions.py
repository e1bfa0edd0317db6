"""Seeks and position reads on a kafka-python consumer assigned to many partitions, in O(1) each.

kafka-python 3.0's ``KafkaConsumer.seek`` builds the set of every assigned partition on each call
(to check the one it is given), and ``KafkaConsumer.position`` walks every assigned partition to
mark leader-epoch validations on each call. A packed task assigned to P partitions seeks each one
and reads the position of each partition still short of its range's end after every poll, so both
cost O(P²) per task: at 500 partitions per task that was most of a reader's CPU.

The readers seek to offsets they chose and read a position only to learn that the fetcher moved
past offsets that hold no record (transaction markers, aborted or compacted records), so both go
straight to the consumer's subscription state, as ``KafkaConsumer`` does after its checks (the
poll itself still runs the leader-epoch validation once per poll). On a client without that state
they fall back to the public methods.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

__all__ = ["position", "seek_many"]


def _assignment(consumer: Any) -> Optional[Mapping[Any, Any]]:
    subscription = getattr(consumer, "_subscription", None)
    assignment = getattr(subscription, "assignment", None)
    return assignment if isinstance(assignment, Mapping) else None


def seek_many(consumer: Any, offsets: Mapping[Any, int]) -> None:
    """Seek each partition of ``offsets`` (all assigned to ``consumer``) to its offset."""
    assignment = _assignment(consumer)
    if assignment is None:
        for tp, offset in offsets.items():
            consumer.seek(tp, offset)
        return
    for tp, offset in offsets.items():
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise ValueError(f"cannot seek {tp} to {offset!r}: an offset is an int >= 0")
        state = assignment.get(tp)
        if state is None:
            raise ValueError(f"cannot seek {tp}: the consumer is not assigned to it")
        state.seek(offset)
    if hasattr(consumer, "_iterator"):
        consumer._iterator = None  # as KafkaConsumer.seek does: an iterator's fetched records are stale


def position(consumer: Any, tp: Any) -> Optional[int]:
    """The offset ``consumer`` reads next of ``tp`` (``None`` when it has none)."""
    assignment = _assignment(consumer)
    if assignment is None:
        return consumer.position(tp)  # type: ignore[no-any-return]
    state = assignment.get(tp)
    if state is None:
        return consumer.position(tp)  # type: ignore[no-any-return]  # raises as the client does
    current = state.position
    return None if current is None else int(current.offset)
