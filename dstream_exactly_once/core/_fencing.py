"""The epoch rule every store applies before it writes: only the application's current epoch may write.

A driver takes a new epoch when it starts (``start_epoch()``); a driver holding an older epoch is
fenced off. The rule is stated here, below the stores and the engine, so that each store backend
and the batch committer check it the same way.
"""

from __future__ import annotations

from ..errors import FencedError

__all__ = ["check_epoch"]


def check_epoch(app_id: str, stored: int, epoch: int) -> None:
    """Raise :class:`FencedError` unless ``epoch`` is the application's current epoch."""
    if stored > epoch:
        raise FencedError(f"app {app_id!r}: epoch {epoch} is fenced, a newer driver took epoch {stored}; "
                          f"this driver must stop")
    if stored != epoch:
        raise FencedError(f"app {app_id!r}: epoch {epoch} was never taken (current epoch {stored}); "
                          f"take one with start_epoch()")
