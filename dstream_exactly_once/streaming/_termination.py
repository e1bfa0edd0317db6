"""Typed errors from a stopped stream: :func:`await_termination`.

Spark reports an output operation's failure from ``ssc.awaitTermination()`` as a
``Py4JJavaError`` whose text contains the Python traceback, so a supervisor cannot tell "fenced —
do not restart" from "store down — restart" without parsing text. Each exactly-once stream's
committer records the library error it stopped with (``committer.failed``); this helper waits like
Spark's ``awaitTermination`` and re-raises that error, typed, with Spark's error as its context.

Supervisor pattern (``docs/guarantees.md``)::

    try:
        await_termination(ssc)
    except FencedError:
        ...  # a newer driver owns the app: stop, do not restart
    except DStreamExactlyOnceError as exc:
        ...  # exc.retriable (StoreUnavailableError, ...): restart the driver; else fix and restart
"""

from __future__ import annotations

from typing import List, Optional

from pyspark.streaming import StreamingContext

from .._checks import is_number
from ..engine._committer import BatchCommitter
from ..errors import ConfigurationError
from ._connect_guard import INSTEAD_TERMINATION, refuse_spark_connect

__all__ = ["await_termination", "register_committer"]

_ATTR = "_deo_committers"


def register_committer(ssc: StreamingContext, committer: BatchCommitter) -> None:
    """Remember ``committer`` as one of ``ssc``'s exactly-once streams (for :func:`await_termination`)."""
    committers: List[BatchCommitter] = ssc.__dict__.setdefault(_ATTR, [])
    committers.append(committer)


def _failure(ssc: StreamingContext) -> Optional[BaseException]:
    for committer in ssc.__dict__.get(_ATTR, []):
        if committer.failed is not None:
            return committer.failed
    return None


def await_termination(ssc: StreamingContext, timeout: Optional[float] = None) -> bool:
    """Wait until ``ssc`` stops (or ``timeout`` seconds pass); returns whether it stopped.

    Also available as ``stream.await_termination(timeout)`` on an exactly-once stream.

    If one of ``ssc``'s exactly-once streams failed, its library error (e.g.
    :class:`~dstream_exactly_once.errors.FencedError`,
    :class:`~dstream_exactly_once.errors.StoreUnavailableError`,
    :class:`~dstream_exactly_once.errors.OutputError`) is raised instead of Spark's
    ``Py4JJavaError``; other failures are raised as Spark reports them.
    """
    refuse_spark_connect(ssc, "await_termination(ssc=...)", INSTEAD_TERMINATION)
    if not isinstance(ssc, StreamingContext):
        raise ConfigurationError(f"await_termination needs a StreamingContext, got {ssc!r}")
    if timeout is not None and (not is_number(timeout) or timeout < 0):
        raise ConfigurationError(f"timeout must be a number of seconds >= 0 or None, got {timeout!r}")
    try:
        if timeout is None:
            ssc.awaitTermination()
            stopped = True
        else:
            # Spark's stub says None; it returns the JVM's "stopped" boolean
            stopped = bool(ssc._jssc.awaitTerminationOrTimeout(int(timeout * 1000)))
    except Exception:
        failed = _failure(ssc)
        if failed is None:
            raise
        raise failed  # noqa: B904 - Spark's error stays attached as __context__
    failed = _failure(ssc)
    if failed is not None:  # failed, and Spark has not reported it (yet): the stream commits nothing more
        raise failed
    return stopped
