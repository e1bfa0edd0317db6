"""Growing log files for tests, demos and benchmarks of the file source."""

from __future__ import annotations

import os

__all__ = ["logrotate"]


def logrotate(directory: str, keep: int, name: str = "service.log") -> None:
    """Rotate ``directory/name`` as logrotate does, keeping ``keep`` rotated files: the oldest
    (``name.<keep>``) is deleted, the others move up one, ``name`` becomes ``name.1`` and a new empty
    ``name`` is created."""
    log = os.path.join(directory, name)
    if os.path.exists(f"{log}.{keep}"):
        os.remove(f"{log}.{keep}")
    for i in range(keep - 1, 0, -1):
        if os.path.exists(f"{log}.{i}"):
            os.rename(f"{log}.{i}", f"{log}.{i + 1}")
    os.rename(log, f"{log}.1")
    open(log, "w").close()
