"""The one error boundary around user code (Dagster's ``user_code_error_boundary``).

Every output pattern runs the user's function inside :func:`user_code`: an ``Exception`` raised
by user code becomes one :class:`~dstream_exactly_once.errors.OutputError` naming the batch, its
ranges and the command that skips a batch failing every time (``dstream-eo batches skip``), with
the user's exception as ``__cause__``; the library's own errors pass unchanged (they already say
what happened); ``SystemExit``, ``KeyboardInterrupt`` and other ``BaseException``\\ s are
never caught. Whatever escapes, the caller commits nothing for the batch.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator, Optional, Sequence

from ..core._ranges import SourceRange
from ..errors import DStreamExactlyOnceError, OutputError
from ..stores._base import PlannedBatch, Writes

__all__ = ["as_writes", "output_error", "user_code"]


def output_error(batch: PlannedBatch, exc: BaseException, ranges: Optional[Sequence[SourceRange]] = None,
                 what: str = "output") -> OutputError:
    """The :class:`OutputError` for ``exc`` raised while running ``what`` for ``batch``."""
    rs = list(ranges if ranges is not None else batch.ranges)
    shown = ", ".join(str(r) for r in rs[:8]) + (f" and {len(rs) - 8} more" if len(rs) > 8 else "")
    return OutputError(f"{what} of batch {batch.batch_id} failed, nothing was committed "
                       f"(ranges: {shown}): {type(exc).__name__}: {exc}; the next start replays the batch with these "
                       f"ranges; if it fails every time, skip it (its records are never output): dstream-eo batches "
                       f"skip --store URL --app ID --batch {batch.batch_id} --execute", batch=batch.batch_id,
                       offset_ranges=rs)


@contextmanager
def user_code(batch: PlannedBatch, ranges: Optional[Sequence[SourceRange]] = None,
              what: str = "output") -> Iterator[None]:
    """Run the ``with`` body as user code for ``batch`` (and ``ranges``, default all of the batch's)."""
    try:
        yield
    except DStreamExactlyOnceError:
        raise
    except Exception as exc:  # noqa: BLE001 - the boundary: user exceptions are wrapped once, named
        raise output_error(batch, exc, ranges, what) from exc


def as_writes(value: Any, what: str) -> Writes:
    """``value`` if it is a :class:`~dstream_exactly_once.stores.Writes`, an empty one for ``None``."""
    if value is None:
        return Writes()
    if not isinstance(value, Writes):
        raise OutputError(f"{what} must return a Writes (or None), got {type(value).__name__}")
    return value
