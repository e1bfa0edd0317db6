"""Retries for Doris requests, paced by the core :class:`~dstream_exactly_once.RetryPolicy`.

An attempt returns its result, returns :class:`Retry` (worth trying again), or raises (for good).
After the last attempt :func:`with_retries` raises
:class:`~dstream_exactly_once.errors.SinkError` (retriable) with the last reason, chained to its
cause. Reasons are logged at WARNING; they never contain credentials (requests carry them in a
header the transport does not log).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Callable, Optional, TypeVar, Union

from ...core._retry import RetryPolicy
from ...errors import SinkError

__all__ = ["Final", "Retry", "with_retries"]

T = TypeVar("T")


@dataclass(frozen=True)
class Retry:
    """An attempt that failed in a way worth retrying."""

    reason: str
    cause: Optional[BaseException] = None


@dataclass(frozen=True)
class Final:
    """An attempt that failed for good (retrying cannot help)."""

    reason: str


class _AttemptFailedError(SinkError):
    """One attempt's :class:`Retry`, raised so that the core retry policy tries again."""

    retriable = True

    def __init__(self, failure: Retry) -> None:
        super().__init__(failure.reason)
        self.failure = failure


def with_retries(what: str, attempt: Callable[[int], Union[T, Retry]], *, max_retries: int,
                 backoff_s: float, max_backoff_s: float) -> T:
    """Call ``attempt(1)``, ``attempt(2)``, … until it returns something other than :class:`Retry`.

    At most ``max_retries + 1`` attempts, paced by the core :class:`RetryPolicy` (exponential from
    ``backoff_s``, at most ``max_backoff_s``, jittered); ``what`` names the operation in logs and
    the error.
    """
    policy = RetryPolicy(max_attempts=max_retries + 1, max_seconds=math.inf, base_delay=backoff_s,
                         max_delay=max_backoff_s)
    numbers = itertools.count(1)

    def once() -> T:
        outcome = attempt(next(numbers))
        if isinstance(outcome, Retry):
            raise _AttemptFailedError(outcome)
        return outcome

    try:
        return policy.call(once, what)
    except _AttemptFailedError as exc:
        raise SinkError(f"{what} failed after {max_retries + 1} attempts: {exc.failure.reason}") \
            from exc.failure.cause
