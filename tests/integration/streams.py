"""Helpers to run a StreamingContext in a test until a condition holds."""

from __future__ import annotations

from typing import Callable

from pyspark.streaming import StreamingContext

from ..helpers import eventually


def run_until(ssc: StreamingContext, done: Callable[[], bool], timeout: float = 90.0) -> None:
    """Start ``ssc``, wait until ``done()`` (or fail after ``timeout``), then stop it (keeping sc)."""
    ssc.start()
    try:
        eventually(done, "the stream condition", timeout)
    finally:
        ssc.stop(stopSparkContext=False, stopGraceFully=False)
