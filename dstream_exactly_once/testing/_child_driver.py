"""Run a driver that a parent process supervises (the demo pipelines): start the context, wait
until the work is done, and report the outcome to the parent in one stdout line.

``DONE`` then an immediate exit (the context's stop is slow and not needed: the stores are
complete), ``STREAM STOPPED`` (status 2) if the context stopped first, ``FAILED: …`` (status 3)
if the stream failed. SIGTERM stops the context gracefully: the in-flight batch commits.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable

__all__ = ["run_until_done"]


def run_until_done(ssc: Any, done: Callable[[], bool]) -> int:
    """Start ``ssc`` and poll ``done()``; returns 2 or 3 as above, or exits the process with 0."""
    from ..streaming._lifecycle import stop_gracefully_on_signals

    stop_gracefully_on_signals(ssc)
    ssc.start()
    try:
        while not done():
            if ssc.awaitTerminationOrTimeout(0.2):
                print("STREAM STOPPED", flush=True)
                return 2
    except Exception as exc:  # noqa: BLE001 - reported to the parent process in one line
        print(f"FAILED: {type(exc).__name__}: {str(exc)[:2000]}", flush=True)
        return 3
    print("DONE", flush=True)
    sys.stdout.flush()
    os._exit(0)
