"""What the SIGKILL tests' child drivers share: waiting until the store holds every number once.

A child driver sums and counts numbers into the ``numbers`` namespace of its app; the parent reads
its stdout: ``DONE <count> <sum>`` when the store holds ``N`` numbers, ``OVERCOUNT <count> <sum>`` if
it ever holds more.
"""

from __future__ import annotations

import time
from typing import Callable, Optional, Sequence, Tuple


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


def await_counts(targets: Sequence[Tuple[str, str]], n: int, stop: Callable[[], None], *,
                 poll_s: float = 0.3) -> int:
    """:func:`await_count` for several ``(store_url, app)`` targets of one driver: ``DONE <count>
    <sum>`` once every target holds ``n`` numbers with one and the same sum (then ``stop`` and 0);
    ``OVERCOUNT <app> <count> <sum>`` and 2 as soon as any target holds more than ``n``."""
    from dstream_exactly_once import open_store

    readers = [open_store(url, app) for url, app in targets]
    try:
        while True:
            seen = [(app, r.get_values("numbers")) for (_, app), r in zip(targets, readers, strict=True)]
            for app, values in seen:
                if values.get("count", 0) > n:
                    print(f"OVERCOUNT {app} {values.get('count')} {values.get('sum')}", flush=True)
                    return 2
            if all(values.get("count", 0) == n for _, values in seen):
                sums = {values.get("sum") for _, values in seen}
                print(f"DONE {n} {' '.join(str(s) for s in sorted(sums))}", flush=True)
                stop()
                return 0
            time.sleep(poll_s)
    finally:
        for r in readers:
            r.close()
