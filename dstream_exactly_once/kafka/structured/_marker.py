"""The ``deo-kafka`` sink's marker: what one Spark partition of one micro-batch put into Kafka.

The marker is a consumer-group offset committed inside the partition's Kafka transaction, so it
becomes visible exactly when the partition's records do. Its offset is the *next* micro-batch id
of that partition (``batch_id + 1``: as everywhere in this library, a stored position is the next
one to do) and its metadata holds a digest of the records the transaction produced::

    deo-kafka batch=7 records=20 digest=5f0c…(32 hex digits)

The digest is order-independent (a sum of per-record hashes modulo 2**128), so a replay whose
partition holds the same records in another order matches; a replay whose partition holds other
records does not (see :func:`check_replay`).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from enum import Enum
from typing import Optional, Sequence, Tuple

from ...errors import OffsetConflictError

__all__ = ["Decision", "Marker", "RecordDigest", "check_replay", "decide"]

_MODULUS = 1 << 128
_TEXT = re.compile(r"^deo-kafka batch=(\d+) records=(\d+) digest=([0-9a-f]{32})$")

Header = Tuple[str, bytes]


class RecordDigest:
    """Running count and order-independent digest of the records of one task."""

    def __init__(self) -> None:
        self.records = 0
        self._sum = 0

    def add(self, topic: str, partition: Optional[int], key: Optional[bytes], value: Optional[bytes],
            headers: Sequence[Header] = ()) -> None:
        """Count one record (every field that reaches Kafka takes part, lengths included)."""
        h = hashlib.sha256()
        for part in (topic.encode("utf-8"), b"" if partition is None else str(partition).encode(), key, value):
            if part is None:
                h.update(b"\xff")
            else:
                h.update(len(part).to_bytes(4, "big") + part)
        for name, data in headers:
            raw = name.encode("utf-8")
            h.update(b"h" + len(raw).to_bytes(4, "big") + raw + len(data).to_bytes(4, "big") + data)
        self._sum = (self._sum + int.from_bytes(h.digest()[:16], "big")) % _MODULUS
        self.records += 1

    def hexdigest(self) -> str:
        return f"{self._sum:032x}"


@dataclass(frozen=True)
class Marker:
    """A partition's marker: ``next_batch`` (the committed batch id + 1), its record count and digest."""

    next_batch: int
    records: int
    digest: str

    @classmethod
    def of(cls, batch_id: int, digest: RecordDigest) -> Marker:
        return cls(batch_id + 1, digest.records, digest.hexdigest())

    def metadata(self) -> str:
        """The text stored as the group offset's metadata (well under Kafka's 4096-byte limit)."""
        return f"deo-kafka batch={self.next_batch - 1} records={self.records} digest={self.digest}"

    @classmethod
    def parse(cls, offset: Optional[int], metadata: Optional[str]) -> Optional[Marker]:
        """The marker of a group offset (``None``: no offset yet). An offset whose metadata is not a
        marker raises :class:`OffsetConflictError` (the group is used by something else)."""
        if offset is None or offset < 0:
            return None
        found = _TEXT.match(metadata or "")
        if found is None or int(found.group(1)) + 1 != offset:
            raise OffsetConflictError(f"the deo-kafka marker group holds offset {offset} with metadata "
                                      f"{(metadata or '')[:120]!r}, which is not a deo-kafka marker; another "
                                      f"client commits offsets in this group: give the sink another 'app' or "
                                      f"'prefix'")
        return cls(offset, int(found.group(2)), found.group(3))


class Decision(Enum):
    """What a task does for its partition of a micro-batch."""

    PRODUCE = "produce"  # no output of this batch in Kafka yet
    DONE = "done"  # the batch's output of this partition is in Kafka: produce nothing


def decide(marker: Optional[Marker], batch_id: int, where: str) -> Decision:
    """``PRODUCE`` when the marker is absent or behind ``batch_id``, ``DONE`` when it records
    ``batch_id``; a marker ahead of it (a later batch was produced) raises
    :class:`OffsetConflictError` naming both (``where`` names the group and partition)."""
    if marker is None or marker.next_batch <= batch_id:
        return Decision.PRODUCE
    if marker.next_batch == batch_id + 1:
        return Decision.DONE
    raise OffsetConflictError(
        f"{where}: Kafka already holds the output of batch {marker.next_batch - 1}, after batch {batch_id} that "
        f"Spark is writing (a new or older checkpoint on an application that wrote before?); nothing was "
        f"produced. Start the query with a new 'app', or from the checkpoint that wrote batch "
        f"{marker.next_batch - 1}")


def check_replay(marker: Marker, replay: RecordDigest, where: str) -> Optional[str]:
    """``None`` when the replayed partition holds the records the marker recorded; otherwise the
    mismatch, described (the caller raises it or, when told to keep Kafka's output, logs it)."""
    if marker.records == replay.records and marker.digest == replay.hexdigest():
        return None
    return (f"{where}: batch {marker.next_batch - 1} is replayed with other records in this Spark partition "
            f"({replay.records} records, digest {replay.hexdigest()}) than the attempt whose output Kafka holds "
            f"({marker.records} records, digest {marker.digest}); the query's partitioning is not deterministic, "
            f"so writing the replay could double or lose records")
