"""How big a direct stream's batches get: backpressure (``spark.streaming.backpressure.enabled``, as
Spark's direct Kafka stream had it) and catch-up (``spark.streaming.exactlyOnce.catchUp``).

Catch-up, for exactly-once streams only (off by default): while a batch the driver planned is still
uncommitted, the batch Spark generates plans no new records, and the first batch generated after the
queue emptied plans everything up to the latest positions (within ``maxRatePerPartition`` and the
backpressure rate). Without it, a stream whose batches take longer than the interval queues one batch
per interval, each holding only that interval's records, and never drains the queue; with it, batches
grow to the time they take. The records a batch holds then depend on how long the batches before it
took, so a stream whose output depends on which batch time a record falls in (``window``) sees them
in later windows when it is behind.

Backpressure:

Spark's ``RateController`` listens for completed batches and feeds a ``PIDRateEstimator`` with each
batch's record count, processing delay and scheduling delay; the direct stream then reads at most
``rate × batch seconds`` records per batch, split over the partitions by their share of the lag and
capped by ``spark.streaming.kafka.maxRatePerPartition``. Here the same estimator is fed by a PySpark
``StreamingListener``; the record count of a batch is the sum of its planned offset ranges (the
driver knows it without asking the executors). Settings and defaults are Spark's:

- ``spark.streaming.backpressure.enabled`` (false), ``spark.streaming.backpressure.initialRate``
  (0: no limit before the first estimate, apart from ``maxRatePerPartition``);
- ``spark.streaming.backpressure.pid.proportional`` / ``.integral`` / ``.derived`` / ``.minRate``
  (1.0 / 0.2 / 0.0 / 100).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from typing import Any, Optional

from .._checks import is_int, is_number
from ..core._options import Option, table
from ..errors import ConfigurationError

log = logging.getLogger(__name__)

__all__ = ["CATCH_UP", "PIDRateEstimator", "RateController", "catch_up_from_conf", "rate_controller_from_conf"]


class PIDRateEstimator:
    """Spark's PID rate estimator: a new ingestion rate (records/s) after each completed batch.

    ``compute`` returns ``None`` on the first batch (it only records the processing rate) and
    whenever there is nothing to learn from (no records, no processing time, or a batch that
    completed no later than the previous one).
    """

    def __init__(self, batch_interval_ms: int, proportional: float = 1.0, integral: float = 0.2,
                 derivative: float = 0.0, min_rate: float = 100.0) -> None:
        if not is_int(batch_interval_ms) or batch_interval_ms <= 0:
            raise ConfigurationError(f"batch interval must be a positive int of ms, got {batch_interval_ms!r}")
        for name, value, low_ok in (("proportional", proportional, True), ("integral", integral, True),
                                    ("derived", derivative, True), ("minRate", min_rate, False)):
            if not is_number(value) or value < 0 or (not low_ok and value == 0):
                raise ConfigurationError(f"spark.streaming.backpressure.pid.{name} must be "
                                         f"{'>= 0' if low_ok else '> 0'}, got {value!r}")
        self.batch_interval_ms = batch_interval_ms
        self.proportional, self.integral, self.derivative = float(proportional), float(integral), float(derivative)
        self.min_rate = float(min_rate)
        self._first = True
        self._latest_time = -1
        self._latest_rate = -1.0
        self._latest_error = -1.0
        self._lock = threading.Lock()

    def compute(self, time_ms: int, num_elements: int, processing_delay_ms: int,
                scheduling_delay_ms: int) -> Optional[float]:
        with self._lock:
            if not (time_ms > self._latest_time and num_elements > 0 and processing_delay_ms > 0):
                return None
            delay_since_update = (time_ms - self._latest_time) / 1000.0
            processing_rate = num_elements / processing_delay_ms * 1000.0
            error = self._latest_rate - processing_rate
            # the records of the scheduling delay still wait: they are added to the error
            historical_error = scheduling_delay_ms * processing_rate / self.batch_interval_ms
            d_error = (error - self._latest_error) / delay_since_update
            new_rate = max(self._latest_rate - self.proportional * error - self.integral * historical_error
                           - self.derivative * d_error, self.min_rate)
            self._latest_time = time_ms
            if self._first:
                self._latest_rate, self._latest_error, self._first = processing_rate, 0.0, False
                return None
            self._latest_rate, self._latest_error = new_rate, error
            return new_rate


class RateController:
    """The latest backpressure rate of one stream, updated from completed batches.

    The stream records how many records each batch time was planned with
    (:meth:`planned`); :meth:`batch_completed` is called by the streaming listener.
    """

    def __init__(self, estimator: PIDRateEstimator, initial_rate: float = 0.0) -> None:
        self.estimator = estimator
        self.initial_rate = float(initial_rate)
        self.latest_rate = 0.0
        self.updates = 0
        self._planned: OrderedDict[int, int] = OrderedDict()
        self._lock = threading.Lock()

    def rate(self) -> Optional[float]:
        """Records per second for the next batch, or ``None`` for no backpressure limit yet."""
        rate = self.latest_rate if self.latest_rate > 0 else self.initial_rate
        return rate if rate > 0 else None

    def planned(self, batch_time_ms: int, records: int) -> None:
        with self._lock:
            self._planned[batch_time_ms] = records
            while len(self._planned) > 1024:
                self._planned.popitem(last=False)

    def batch_completed(self, batch_time_ms: int, processing_end_ms: int, processing_delay_ms: int,
                        scheduling_delay_ms: int) -> None:
        with self._lock:
            records = self._planned.pop(batch_time_ms, 0)
        new = self.estimator.compute(processing_end_ms, records, processing_delay_ms, scheduling_delay_ms)
        if new is not None:
            self.latest_rate = new
            self.updates += 1
            log.debug("backpressure: batch %d ms, %d records in %d ms -> %.1f records/s", batch_time_ms, records,
                      processing_delay_ms, new)

    def listener(self) -> Any:
        """A PySpark ``StreamingListener`` feeding this controller (register it on the context)."""
        from pyspark.streaming.listener import StreamingListener

        controller = self

        class _BackpressureListener(StreamingListener):  # type: ignore[misc]
            def onBatchCompleted(self, batchCompleted: Any) -> None:  # noqa: N802, N803 - PySpark API
                try:
                    # PySpark's JavaBatchInfo: times and delays as longs, -1 when not known
                    info = batchCompleted.batchInfo()
                    end, proc, sched = (int(info.processingEndTime()), int(info.processingDelay()),
                                        int(info.schedulingDelay()))
                    if end < 0 or proc < 0 or sched < 0:
                        return
                    controller.batch_completed(int(info.batchTime().milliseconds()), end, proc, sched)
                except Exception:  # noqa: BLE001 - a listener error must never stop the stream
                    log.warning("backpressure listener failed", exc_info=True)

        return _BackpressureListener()


_P = "spark.streaming.backpressure."
#: the backpressure settings, with Spark's keys and defaults
OPTIONS = table(
    Option(_P + "enabled", "bool", False, "read at a rate learnt from completed batches"),
    Option(_P + "rateEstimator", "enum", "pid", "the rate estimator (only Spark's PID estimator)", allowed=("pid",)),
    Option(_P + "initialRate", "float", 0.0, "records/s before the first estimate (0: no limit)", low=0),
    Option(_P + "pid.proportional", "float", 1.0, "the PID estimator's proportional gain", low=0),
    Option(_P + "pid.integral", "float", 0.2, "the PID estimator's integral gain", low=0),
    Option(_P + "pid.derived", "float", 0.0, "the PID estimator's derivative gain", low=0),
    Option(_P + "pid.minRate", "float", 100.0, "the lowest rate the estimator sets (records/s, > 0)", low=0),
)


def rate_controller_from_conf(conf: Any, batch_interval_ms: int) -> Optional[RateController]:
    """The stream's :class:`RateController` when ``spark.streaming.backpressure.enabled`` is true."""
    if not OPTIONS[_P + "enabled"].read(conf):
        return None  # the other settings are not read (as in Spark) while backpressure is off
    values = {key: option.read(conf) for key, option in OPTIONS.items()}
    estimator = PIDRateEstimator(batch_interval_ms, values[_P + "pid.proportional"], values[_P + "pid.integral"],
                                 values[_P + "pid.derived"], values[_P + "pid.minRate"])
    return RateController(estimator, values[_P + "initialRate"])


#: catch-up for exactly-once streams (see the module's docstring)
CATCH_UP = Option("spark.streaming.exactlyOnce.catchUp", "bool", False,
                  "exactly-once streams: while a batch is uncommitted, new batches plan nothing; the next one after "
                  "takes the backlog")


def catch_up_from_conf(ssc: Any) -> bool:
    """``spark.streaming.exactlyOnce.catchUp`` of ``ssc``'s Spark conf (a bad value raises, naming it);
    ``False`` for a value that is no StreamingContext (the factory's own check refuses it)."""
    sc = getattr(ssc, "sparkContext", None)
    return bool(CATCH_UP.read(sc.getConf())) if sc is not None else False
