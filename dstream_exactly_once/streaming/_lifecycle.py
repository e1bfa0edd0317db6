"""Driver resources released when the StreamingContext stops, and work deferred until it starts.

PySpark has no listener for a stopping ``StreamingContext``, so the streams this library creates
register their driver-side resources (the Kafka admin client, store connections) here: the
context's ``stop`` — on that one instance only, nothing global is patched — runs Spark's own stop
and then closes them, newest first. Closing is idempotent and never raises; correctness never
depends on it (nothing is committed by closing).

The same way, :func:`run_on_start` runs hooks when ``ssc.start()`` is called, before Spark starts
the streaming jobs: an exactly-once stream takes its epoch there, once every argument of the stream
and of its output calls was checked. A hook that raises stops the start (Spark's start is not
called) and its error reaches the ``ssc.start()`` caller.
"""

from __future__ import annotations

import logging
import signal
import threading
from typing import Any, Callable, List, Sequence

from pyspark.streaming import StreamingContext

log = logging.getLogger(__name__)

__all__ = ["close_on_stop", "run_on_start", "stop_gracefully_on_signals"]

_ATTR = "_deo_close_on_stop"
_START_ATTR = "_deo_run_on_start"


def run_on_start(ssc: StreamingContext, hook: Callable[[], Any]) -> None:
    """Call ``hook()`` when ``ssc.start()`` is called, before Spark's own start (hooks in the order
    they were added; each runs once)."""
    hooks: List[Callable[[], Any]] = ssc.__dict__.get(_START_ATTR) or []
    if _START_ATTR not in ssc.__dict__:
        spark_start = ssc.start

        def start() -> None:
            while hooks:
                hooks[0]()
                hooks.pop(0)
            spark_start()

        ssc.start = start  # type: ignore[method-assign]
        setattr(ssc, _START_ATTR, hooks)
    hooks.append(hook)


def close_on_stop(ssc: StreamingContext, close: Callable[[], Any]) -> None:
    """Call ``close()`` after ``ssc.stop(...)`` has stopped the streaming jobs."""
    hooks: List[Callable[[], Any]] = ssc.__dict__.get(_ATTR) or []
    if _ATTR not in ssc.__dict__:
        spark_stop = ssc.stop

        def stop(stopSparkContext: bool = True, stopGraceFully: bool = False) -> None:  # noqa: N803 - Spark's names
            try:
                spark_stop(stopSparkContext, stopGraceFully)
            finally:
                while hooks:
                    hook = hooks.pop()
                    try:
                        hook()
                    except Exception as exc:  # noqa: BLE001 - stopping goes on; nothing depends on closing
                        log.warning("closing %r after the StreamingContext stopped failed: %r", hook, exc)

        ssc.stop = stop  # type: ignore[method-assign]
        setattr(ssc, _ATTR, hooks)
    hooks.append(close)


def stop_gracefully_on_signals(ssc: StreamingContext,
                               signals: Sequence[int] = (signal.SIGTERM, signal.SIGINT)) -> None:
    """Make SIGTERM (and Ctrl-C) stop ``ssc`` gracefully: no new batch starts, the batches already
    generated finish and commit, then ``ssc.awaitTermination()`` returns in the main thread.

    Call it from the main thread before ``ssc.awaitTermination()``. A second signal while stopping
    is ignored (send SIGKILL to give up — still safe: uncommitted batches are replayed). Spark's
    own ``spark.streaming.stopGracefullyOnShutdown`` does the same when the JVM receives the signal.
    """
    stopping = threading.Event()

    def handler(signum: int, _frame: Any) -> None:
        if stopping.is_set():
            return
        stopping.set()
        log.warning("signal %d: stopping the streaming context gracefully (the in-flight batch commits)", signum)
        # not a daemon: the interpreter waits for it, so the stop hooks (closing the source and the
        # store, the final heartbeat) run even when the main thread returns from awaitTermination first
        threading.Thread(target=ssc.stop, kwargs={"stopSparkContext": True, "stopGraceFully": True},
                         name="deo-graceful-stop", daemon=False).start()

    for s in signals:
        signal.signal(s, handler)
