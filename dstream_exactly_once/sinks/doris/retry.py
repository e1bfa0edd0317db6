"""Retries with exponential backoff for Doris requests.

An attempt returns its result, returns :class:`Retry` (worth trying again), or raises (for good).
After the last attempt :func:`with_retries` raises
:class:`~dstream_exactly_once.errors.SinkError` (retriable) with the last reason, chained to its
cause. Reasons are logged at WARNING; they never contain credentials (requests carry them in a
header the transport does not log).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Callable, Optional, TypeVar, Union

from ...errors import SinkError

__all__ = ["Final", "Retry", "with_retries"]

logger = logging.getLogger(__name__)

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


def backoff(retry: int, *, backoff_s: float, max_backoff_s: float) -> float:
    """Seconds to wait before retry number ``retry`` (1, 2, …): doubling, capped."""
    return min(max_backoff_s, backoff_s * (2 ** (retry - 1)))


def with_retries(what: str, attempt: Callable[[int], Union[T, Retry]], *, max_retries: int,
                 backoff_s: float, max_backoff_s: float) -> T:
    """Call ``attempt(1)``, ``attempt(2)``, … until it returns something other than :class:`Retry`.

    At most ``max_retries + 1`` attempts; ``what`` names the operation in logs and the error.
    """
    failure = Retry("no attempt made")
    for number in range(1, max_retries + 2):
        if number > 1:
            time.sleep(backoff(number - 1, backoff_s=backoff_s, max_backoff_s=max_backoff_s))
        outcome = attempt(number)
        if not isinstance(outcome, Retry):
            return outcome
        failure = outcome
        logger.warning("%s: attempt %d of %d failed: %s", what, number, max_retries + 1, failure.reason)
    raise SinkError(f"{what} failed after {max_retries + 1} attempts: {failure.reason}") from failure.cause
