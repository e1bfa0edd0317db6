"""Recovering direct streams from a Spark checkpoint (``StreamingContext.getOrCreate``).

Spark writes every Python DStream function into the checkpoint with cloudpickle, once per
checkpoint, on the JobGenerator's thread, right after it generated a batch. A recoverable stream
pickles as a *recipe*: its settings and its driver-side plan state (the ranges of the batches it
remembers by batch time and the next offsets to plan from), never a live client. In the process
that recovers the context, each recipe is turned back into one stream object (several pickled
functions refer to the same stream; :func:`recovered` builds it once per token) whose clients open
lazily, at the first batch.

A stream that cannot be recovered pickles as a refusal: unpickling it on the driver raises
:class:`~dstream_exactly_once.errors.ConfigurationError` with the reason and what to do instead,
so ``getOrCreate`` fails before anything runs or is written.
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime
from typing import Any, Callable, Dict

from ..core._driver_ref import _resolve
from ..errors import ConfigurationError

log = logging.getLogger(__name__)

__all__ = ["batch_ms", "forget", "recovered", "refuse_recovery", "time_of_ms"]

_RECOVERED: Dict[str, Any] = {}
_LOCK = threading.Lock()
_REPORTED: set = set()


def batch_ms(time: datetime) -> int:
    """A batch time as Spark's ``Time.milliseconds``."""
    return int(round(time.timestamp() * 1000))


def time_of_ms(ms: int) -> datetime:
    """The ``datetime`` PySpark hands to DStream functions for the batch at ``ms``."""
    return datetime.fromtimestamp(ms / 1000.0)


def recovered(token: str, build: Callable[[], Any]) -> Any:
    """The object recovered for ``token`` in this process, built by ``build()`` the first time."""
    with _LOCK:
        obj = _RECOVERED.get(token)
        if obj is None:
            obj = build()
            _RECOVERED[token] = obj
        return obj


def forget(token: str) -> None:
    """Drop the recovered object of ``token`` (its context stopped; a later recovery rebuilds it)."""
    with _LOCK:
        _RECOVERED.pop(token, None)


def refuse_recovery(token: str, kind: str, reason: str) -> Any:
    """Unpickling target of a stream that cannot be recovered from a Spark checkpoint.

    On the driver (where ``getOrCreate`` reads the checkpoint) it raises; in any other process (an
    executor that was handed the stream inside a closure) it returns the driver-only stub, which
    raises only when used.
    """
    from pyspark import SparkContext

    if SparkContext._gateway is None:
        return _resolve(token, kind)
    message = f"StreamingContext.getOrCreate cannot recover this {kind} from a Spark checkpoint: {reason}"
    with _LOCK:
        first = message not in _REPORTED
        _REPORTED.add(message)
    if first:  # Spark wraps this error in its own checkpoint-reading error; say it once plainly too
        log.error("%s", message)
    raise ConfigurationError(message)
