"""What a read that got nothing for a while finds on the broker: a client that does not return
records the broker holds, offsets beyond the log end, or no broker at all (no Spark here).

A range is planned from the broker's end offsets, so its records were on the broker when the batch
was planned. When a reader's poll loop sees no progress on some partitions for
:data:`STALL_CHECK_S` seconds, it asks the broker afresh (a ListOffsets round trip with a new
client, at the reader's isolation level) where each waiting partition's log starts and ends, and
:func:`classify` sorts the partitions:

- **present** (``start <= position < end``): the records are there, the client did not return
  them. That is a defect of the client's fetch state, not an outage: the reader reads those
  partitions again with a fresh consumer that uses no incremental fetch session and fetches whole
  record batches (:data:`RECOVERIES` times at most), and says so in a WARN line;
- **below the start** (``position < start``): deleted by retention before they were read: the
  data-loss policy (``failOnDataLoss``);
- **beyond the end** (``position >= end``): the log now ends before the range does, so the topic
  was truncated or deleted and created again after the batch was planned: the data-loss policy too,
  never a wait until the poll timeout;
- **unreachable** (the round trip itself failed): an outage; the reader keeps polling until its
  poll timeout and then raises the retriable :class:`~dstream_exactly_once.errors.KafkaUnavailableError`.

The readers (:mod:`._multi_reader`, :mod:`._multi_reader_confluent`, :mod:`._reader_kafka_python`)
share this module so the three verdicts mean the same for kafka-python and confluent-kafka.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Generic, List, Mapping, Optional, Tuple, TypeVar

from ..errors import DataLossError, KafkaReadStalledError
from ._offsets import OffsetRange
from ._spark_conf import READER_KEY

log = logging.getLogger(__name__)

__all__ = ["PROBE_TIMEOUT_S", "RECOVERIES", "STALL_CHECK_S", "BoundedProbe", "Probe", "Verdict", "Watch",
           "beyond_end_error", "classify", "log_recovery", "read_stalled_error", "stall_check_after"]

#: seconds without progress before a reader asks the broker what it holds (at most a quarter of the
#: poll timeout, so even a short poll timeout leaves room for a recovery)
STALL_CHECK_S = 5.0
#: how many times a read replaces its consumer for partitions whose records the broker holds
RECOVERIES = 2

K = TypeVar("K")

#: ``probe(keys)``: ``({key: log start}, {key: log end})`` of the partitions ``keys``, asked of the
#: broker afresh; raises when the broker cannot be asked
Probe = Callable[[List[K]], Tuple[Mapping[K, int], Mapping[K, int]]]


def stall_check_after(poll_timeout_ms: int) -> float:
    """Seconds without progress before the first look at the broker, for a read with this poll timeout."""
    return min(STALL_CHECK_S, poll_timeout_ms / 4000)


@dataclass
class Verdict(Generic[K]):
    """What the broker holds for each partition a read waits on (keys are the reader's partition keys)."""

    #: records in ``[position, end)`` are on the broker: ``{key: (log start, log end)}``
    present: Dict[K, Tuple[int, int]] = field(default_factory=dict)
    #: the log starts after the position (deleted by retention): ``{key: log start}``
    below_start: Dict[K, int] = field(default_factory=dict)
    #: the log ends at or before the position (truncated or recreated): ``{key: log end}``
    beyond_end: Dict[K, int] = field(default_factory=dict)
    #: the broker could not be asked (the error's text), else ``None``
    unreachable: Optional[str] = None


class Watch:
    """The progress clock of one read: when to look at the broker, when the poll timeout is spent.

    ``progressed()`` after every poll that moved a position; ``due()`` says a look at the broker is
    due (:func:`stall_check_after` seconds without progress, again that long after each look);
    ``expired()`` says the read has waited ``poll_timeout_ms`` since its last progress. ``recoveries``
    counts the consumers the read replaced; ``last`` is the verdict of the last look.
    """

    def __init__(self, poll_timeout_ms: int) -> None:
        self.poll_timeout_ms = poll_timeout_ms
        self.check_s = stall_check_after(poll_timeout_ms)
        self.recoveries = 0
        self.last: Optional[Verdict] = None  # type: ignore[type-arg]
        self.probe: Optional[BoundedProbe] = None  # type: ignore[type-arg]  # the reader's, made at its first look
        self.progressed()

    def progressed(self) -> None:
        """A position moved: the clock starts again and the last verdict no longer holds."""
        self.since = time.monotonic()
        self.next_look = self.since + self.check_s
        self.last = None

    def bounded(self, probe: Probe[K]) -> BoundedProbe[K]:
        """This read's :class:`BoundedProbe` around ``probe`` (one per read: a blocked look is not repeated)."""
        if self.probe is None:
            self.probe = BoundedProbe(probe)
        return self.probe

    def due(self) -> bool:
        """Whether the read should ask the broker now (and, if so, when it may ask again)."""
        now = time.monotonic()
        if now < self.next_look:
            return False
        self.next_look = now + self.check_s
        return True

    def may_recover(self) -> bool:
        """Whether the read may replace its consumer once more (counts the replacement)."""
        if self.recoveries >= RECOVERIES:
            return False
        self.recoveries += 1
        return True

    def waited_ms(self) -> int:
        """Milliseconds since the last progress."""
        return int((time.monotonic() - self.since) * 1000)

    def expired(self) -> bool:
        """Whether the read has waited its whole poll timeout since its last progress."""
        return self.waited_ms() > self.poll_timeout_ms


#: seconds a look at the broker may take before the broker counts as unreachable
PROBE_TIMEOUT_S = 10.0


class BoundedProbe(Generic[K]):
    """``probe`` run in a daemon thread, given :data:`PROBE_TIMEOUT_S` seconds: a client call that does
    not honour its own timeout (librdkafka's watermark query can block while no broker answers) never
    blocks the read. While an earlier look is still blocked, a new one is not started and counts as
    unreachable. ``probe`` must use its own client (it may be left behind, blocked)."""

    def __init__(self, probe: Probe[K], timeout_s: float = PROBE_TIMEOUT_S) -> None:
        self.probe = probe
        self.timeout_s = timeout_s
        self.running: Optional[threading.Thread] = None

    def __call__(self, keys: List[K]) -> Tuple[Mapping[K, int], Mapping[K, int]]:
        if self.running is not None and self.running.is_alive():
            raise TimeoutError("an earlier look at the broker is still waiting for an answer")
        out: Dict[str, Any] = {}

        def run() -> None:
            try:
                out["value"] = self.probe(keys)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
                out["error"] = exc

        self.running = threading.Thread(target=run, name="dstream-eo-kafka-probe", daemon=True)
        self.running.start()
        self.running.join(self.timeout_s)
        if "error" in out:
            raise out["error"]
        if "value" not in out:
            raise TimeoutError(f"the broker did not answer within {self.timeout_s:.0f} s")
        return out["value"]  # type: ignore[no-any-return]


def classify(probe: Probe[K], waiting: Mapping[K, int]) -> Verdict[K]:
    """Ask ``probe`` where the logs of ``waiting`` (``{key: position}``) start and end and sort the keys."""
    verdict: Verdict[K] = Verdict()
    keys = list(waiting)
    try:
        starts, ends = probe(keys)
    except Exception as exc:  # noqa: BLE001 - any failure to ask the broker is the outage verdict
        verdict.unreachable = f"{type(exc).__name__}: {exc}"
        return verdict
    for k in keys:
        start, end, pos = int(starts[k]), int(ends[k]), waiting[k]
        if pos < start:
            verdict.below_start[k] = start
        elif pos >= end:
            verdict.beyond_end[k] = end
        else:
            verdict.present[k] = (start, end)
    return verdict


def beyond_end_error(r: OffsetRange, pos: int, end: int) -> DataLossError:
    """The data-loss error of a range whose log now ends at ``end``, at or before the read position."""
    return DataLossError(
        f"offsets [{pos}, {r.untilOffset}) of {r.topic}-{r.partition} are beyond the log end {end} (range {r}): "
        "the topic was truncated, or deleted and created again, after the batch was planned; "
        "set failOnDataLoss=False to skip them")


def read_stalled_error(where: Mapping[OffsetRange, Tuple[int, Tuple[int, int]]], waited_ms: int,
                       reader: str) -> KafkaReadStalledError:
    """The error of a read whose client returned nothing of records the broker holds, even after
    fresh consumers: ``where`` maps each range to ``(position, (log start, log end))``."""
    parts = ", ".join(f"{r} at offset {pos} (log start {start}, end {end})" for r, (pos, (start, end)) in where.items())
    return KafkaReadStalledError(
        f"the broker holds the records of {parts}, but the {reader} client returned none of them in {waited_ms} ms, "
        f"also with {RECOVERIES} fresh consumers without a fetch session; the broker answers, so this is not an "
        f"outage: read the batch again (a replay), or choose the other reader with the SparkConf key {READER_KEY}")


def log_recovery(reader: str, verdict: Verdict[K], describe: Mapping[K, str], attempt: int) -> None:
    """The WARN line of a read that replaces its consumer for partitions whose records the broker holds."""
    log.warning("the %s client returned no record for %s although the broker holds them; reading them with a fresh "
                "consumer without a fetch session (recovery %d of %d)", reader,
                ", ".join(f"{describe[k]} (log start {s}, end {e})" for k, (s, e) in verdict.present.items()),
                attempt, RECOVERIES)
