"""Riding out a store blip: bounded, jittered exponential backoff around one store operation.

A store call that raises a *retriable* library error (``exc.retriable`` is true, e.g.
:class:`~dstream_exactly_once.errors.StoreUnavailableError` while a Redis or PostgreSQL server
restarts) is tried again after ``base_delay * 2**n`` seconds (capped at ``max_delay``, with "equal
jitter": a uniformly random half of it is dropped) until it succeeds, ``max_attempts`` calls were
made or ``max_seconds`` have passed since the first call; then the last error is raised unchanged.
Any other error (``FencedError``, ``OffsetConflictError``, a user's error) is raised at once.

Retrying is safe because every store write is idempotent for a lost reply:
a full-batch commit finds its batch in the commit log → ``REPLAYED``; a per-partition commit finds
its range's position at ``end`` → ``REPLAYED``; ``log_batch`` accepts an identical entry,
``mark_committed`` an existing one; ``purge_logs`` drops what is still there. ``start_epoch`` is
the exception that does not matter: a retry after a lost reply takes one more epoch, which fences
nobody but the driver's own lost attempt.

The policy is a small frozen value: it pickles into executor tasks, so per-partition commits retry
with the same budget as the driver.
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass
from typing import Callable, TypeVar

from .._checks import is_int, is_number
from ..errors import ConfigurationError

log = logging.getLogger(__name__)

__all__ = ["DEFAULT_RETRY", "NO_RETRY", "RetryPolicy", "check_retry_policy"]

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """How long a stream waits for a store that is down before it stops.

    ``max_attempts``: calls in all (1 = no retry); ``max_seconds``: time budget from the first call
    (no new attempt starts after it); ``base_delay``/``max_delay``: the backoff's first and largest
    pause in seconds. The default budget is 60 s.
    """

    max_attempts: int = 1000
    max_seconds: float = 60.0
    base_delay: float = 0.2
    max_delay: float = 5.0

    def __post_init__(self) -> None:
        if not is_int(self.max_attempts) or self.max_attempts < 1:
            raise ConfigurationError(f"RetryPolicy max_attempts must be an int >= 1, got {self.max_attempts!r}")
        for name in ("max_seconds", "base_delay", "max_delay"):
            value = getattr(self, name)
            if not is_number(value) or not value >= 0:
                raise ConfigurationError(f"RetryPolicy {name} must be a number of seconds >= 0, got {value!r}")

    def _budget(self) -> str:
        return "an unlimited" if self.max_seconds == float("inf") else f"{self.max_seconds:.0f} s"

    def delay(self, retry: int) -> float:
        """The pause before retry number ``retry`` (0-based), jittered."""
        full = min(self.max_delay, self.base_delay * (2 ** min(retry, 30)))
        return full / 2 + random.uniform(0, full / 2)  # noqa: S311 - jitter, not cryptography

    def call(self, fn: Callable[[], T], what: str, *, sleep: Callable[[float], None] = time.sleep,
             clock: Callable[[], float] = time.monotonic) -> T:
        """``fn()``, retried on retriable errors within this policy's budget; ``what`` names it in logs."""
        start = clock()
        attempt = 0
        while True:
            attempt += 1
            try:
                return fn()
            except Exception as exc:
                if not getattr(exc, "retriable", False):
                    raise
                elapsed = clock() - start
                remaining = self.max_seconds - elapsed
                if attempt >= self.max_attempts or remaining <= 0:
                    if attempt > 1:
                        log.error("%s still failing after %d attempts in %.1f s, giving up: %s",
                                  what, attempt, elapsed, exc)
                    raise
                pause = min(self.delay(attempt - 1), remaining)
                log.warning("%s failed (attempt %d of %d, %.1f s of %s budget used), retrying in %.2f s: %s",
                            what, attempt, self.max_attempts, elapsed, self._budget(), pause, exc)
                sleep(pause)


#: The default: ride out store outages of up to about a minute.
DEFAULT_RETRY = RetryPolicy()
#: No retries: the first retriable error stops the stream (the behaviour before retries existed).
NO_RETRY = RetryPolicy(max_attempts=1)


def check_retry_policy(value: object) -> RetryPolicy:
    """``value`` as a policy: ``None`` → :data:`DEFAULT_RETRY`, a :class:`RetryPolicy` as it is."""
    if value is None:
        return DEFAULT_RETRY
    if not isinstance(value, RetryPolicy):
        raise ConfigurationError(f"store_retry must be a RetryPolicy (e.g. RetryPolicy(max_seconds=120)) or None "
                                 f"for the default {DEFAULT_RETRY!r}, got {value!r}")
    return value
