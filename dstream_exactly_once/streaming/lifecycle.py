"""Driver resources released when the StreamingContext stops.

PySpark has no listener for a stopping ``StreamingContext``, so the streams this library creates
register their driver-side resources (the Kafka admin client, store connections) here: the
context's ``stop`` — on that one instance only, nothing global is patched — runs Spark's own stop
and then closes them, newest first. Closing is idempotent and never raises; correctness never
depends on it (nothing is committed by closing).
"""

from __future__ import annotations

import logging
from typing import Any, Callable, List

from pyspark.streaming import StreamingContext

log = logging.getLogger(__name__)

__all__ = ["close_on_stop"]

_ATTR = "_deo_close_on_stop"


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
