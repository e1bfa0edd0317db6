"""A driver + executor + store stand-in for the file source's unit tests (no Spark, real files).

``batch()`` plans, sends every range through the offset log's encoding, reads it with the
executor-side reader, and commits each range's end and identity document into a dict with the
store's compare-and-set rule (start must equal the stored position). ``restart()`` builds a new
planner from what that store holds, as a restarted driver would.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, Callable, Dict, List, Optional

from dstream_exactly_once.core._ranges import Position, decode_range, encode_range
from dstream_exactly_once.files import FilePlanner, FileRange, FileSourceOptions


class Harness:
    def __init__(self, pattern: str, **options: Any) -> None:
        self.pattern = pattern
        self.options = FileSourceOptions.from_mapping({k.replace("_", "."): v for k, v in options.items()})
        self.store: Dict[str, Position] = {}
        self.ranges: List[FileRange] = []
        self.planner = self._planner()

    def _planner(self) -> FilePlanner:
        planner = FilePlanner(self.pattern, self.options)
        stored = {k: Position(p.offset, json.loads(json.dumps(p.meta))) for k, p in self.store.items()}
        planner.start(stored)
        return planner

    def restart(self) -> None:
        self.planner = self._planner()

    def batch(self) -> List[Any]:
        planned = self.planner.plan()
        ranges = [decode_range(json.loads(json.dumps(encode_range(r)))) for r in planned]
        assert ranges == planned
        reader = self.planner.reader()
        out = [rec for r in ranges for rec in reader.read(r)]
        for r in ranges:
            stored = self.store.get(r.position_key)
            assert stored is None or stored.offset == r.start, (r, stored)
            self.store[r.position_key] = Position(r.end, r.position_meta())
        self.ranges = ranges  # type: ignore[assignment]
        return out

    def drain(self, limit: int = 1000) -> List[Any]:
        """Batches until one plans no bytes."""
        out: List[Any] = []
        for _ in range(limit):
            got = self.batch()
            out.extend(got)
            if not any(r.count() for r in self.ranges):
                return out
        raise AssertionError("drain did not settle")


def write(path: str, text: str, mode: str = "a") -> None:
    with open(path, mode, encoding="utf-8") as f:
        f.write(text)


def lines(prefix: str, a: int, b: int) -> str:
    return "".join(f"{prefix}{i}\n" for i in range(a, b))


def names(prefix: str, a: int, b: int) -> List[str]:
    return [f"{prefix}{i}" for i in range(a, b)]


def copytruncate(src: str, dst: str) -> None:
    with open(src, "rb") as f:
        data = f.read()
    with open(dst, "wb") as f:
        f.write(data)
    os.truncate(src, 0)


def on_inode(path: str, text: str, inode: int, scratch: str) -> bool:
    """Create ``path`` holding ``text`` on ``inode``, just freed by a delete: the file system hands a
    freed inode to the next new file; should another process take it first, park the file we got
    (keeping its inode busy) and try again. ``False`` when the inode stayed taken (another process
    holds it): the caller plays its case again on new files."""
    parked = []
    landed = False
    for i in range(50):
        write(path, text, mode="w")
        if os.stat(path).st_ino == inode:
            landed = True
            break
        parked.append(os.path.join(scratch, f"parked-{i}"))
        os.rename(path, parked[-1])
    for p in parked:
        os.remove(p)
    return landed


def until_on_inode(case: Callable[[str], Optional[Any]], tmp_path: Any, within: float = 120.0) -> Any:
    """Run ``case(directory)`` in a new directory until it gets its freed inode back (``None``: it did not;
    other processes creating files on the same file system may take a freed inode first — on a machine
    running other test processes that can happen many times in a row, so it tries for ``within`` seconds,
    pausing briefly between tries)."""
    deadline = time.monotonic() + within
    attempt = 0
    while attempt < 20 or time.monotonic() < deadline:
        directory = tmp_path / f"try-{attempt}"
        directory.mkdir()
        result = case(str(directory))
        if result is not None:
            return result
        attempt += 1
        time.sleep(0.05)
    raise AssertionError(f"another process took the freed inode in each of {attempt} tries over {within:.0f} s")
