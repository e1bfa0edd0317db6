"""Helpers to run a StreamingContext in a test until a condition holds."""

from __future__ import annotations

import time
from typing import Callable

from pyspark.streaming import StreamingContext


def run_until(ssc: StreamingContext, done: Callable[[], bool], timeout: float = 90.0) -> None:
    """Start ``ssc``, wait until ``done()`` (or fail after ``timeout``), then stop it (keeping sc)."""
    ssc.start()
    deadline = time.monotonic() + timeout
    try:
        while not done():
            if time.monotonic() > deadline:
                raise AssertionError(f"stream condition not reached within {timeout}s")
            time.sleep(0.2)
    finally:
        ssc.stop(stopSparkContext=False, stopGraceFully=False)
