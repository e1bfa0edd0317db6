"""What the SIGKILL tests' child drivers share: waiting until the store holds every number once.

A child driver sums and counts numbers into the ``numbers`` namespace of its app; the parent reads
its stdout: ``DONE <count> <sum>`` when the store holds ``N`` numbers, ``OVERCOUNT <count> <sum>`` if
it ever holds more.
"""

from __future__ import annotations

import time
from typing import Callable, Optional


def await_count(store_url: str, app: str, n: int, stop: Callable[[], None], *, poll_s: float = 0.2,
                check: Optional[Callable[[], Optional[int]]] = None) -> int:
    """Poll ``app``'s ``numbers`` in the store at ``store_url`` until their ``count`` is ``n``: print
    ``DONE``, call ``stop`` and return 0; print ``OVERCOUNT`` and return 2 if the count exceeds ``n``.
    ``check`` runs before each look and ends the wait with the exit status it returns, if any."""
    from dstream_exactly_once import open_store

    with open_store(store_url, app) as reader:
        while True:
            if check is not None:
                status = check()
                if status is not None:
                    return status
            values = reader.get_values("numbers")
            count = values.get("count", 0)
            if count > n:
                print(f"OVERCOUNT {count} {values.get('sum')}", flush=True)
                return 2
            if count == n:
                print(f"DONE {count} {values.get('sum')}", flush=True)
                stop()
                return 0
            time.sleep(poll_s)
