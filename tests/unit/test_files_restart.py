"""Driver restarts across rotations: every line is read exactly once (simulated store, real files).

A writer appends numbered lines and rotates its file by rename, by copytruncate and by delayed
compression; the "driver" plans, reads and commits batches, crashes between reading and committing,
and restarts from what the store holds (each committed range's end + ``position_meta()``).
"""

from __future__ import annotations

import gzip
import os
import random
from collections import Counter

import pytest

from ._files_harness import Harness, copytruncate


class Writer:
    def __init__(self, directory: str) -> None:
        self.dir = directory
        self.log = os.path.join(directory, "app.log")
        self.next = 0
        self.partial = ""
        self.rotated: list[str] = []
        self.seq = 0

    def append(self, n: int, partial: bool) -> None:
        with open(self.log, "a", encoding="utf-8") as f:
            for _ in range(n):
                if self.partial:
                    f.write(self.partial[len(self.partial) // 2:] + "\n")
                    self.partial = ""
                else:
                    f.write(f"{self.next}\n")
                    self.next += 1
            if partial and not self.partial:
                self.partial = str(self.next)
                self.next += 1
                f.write(self.partial[: len(self.partial) // 2])

    def finish_line(self) -> None:
        if self.partial:
            with open(self.log, "a", encoding="utf-8") as f:
                f.write(self.partial[len(self.partial) // 2:] + "\n")
            self.partial = ""

    def _rotated_name(self) -> str:
        self.seq += 1
        return f"{self.log}.{self.seq:03d}"

    def rename(self) -> None:
        self.finish_line()
        name = self._rotated_name()
        os.rename(self.log, name)
        open(self.log, "w").close()
        self.rotated.append(name)

    def copytruncate(self) -> None:
        self.finish_line()
        name = self._rotated_name()
        copytruncate(self.log, name)
        self.rotated.append(name)

    def compress_oldest(self) -> None:
        plain = [p for p in self.rotated if not p.endswith(".gz")]
        if len(plain) < 2:  # delaycompress: the newest rotated file stays plain
            return
        name = plain[0]
        with open(name, "rb") as f, gzip.open(name + ".gz", "wb") as g:
            g.write(f.read())
        os.remove(name)
        self.rotated[self.rotated.index(name)] = name + ".gz"


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_every_line_exactly_once_across_rotations_and_restarts(tmp_path, seed):
    rnd = random.Random(seed)
    w = Writer(str(tmp_path))
    w.append(3, partial=False)
    h = Harness(os.path.join(str(tmp_path), "app.log*"), bytes_max=64, line_max_bytes=32)
    seen: Counter[str] = Counter()
    restarts = crashes = 0
    for _ in range(250):
        op = rnd.random()
        if op < 0.35:
            w.append(rnd.randint(1, 12), partial=rnd.random() < 0.3)
        elif op < 0.42:
            w.rename()
        elif op < 0.49:
            w.copytruncate()
        elif op < 0.55:
            w.compress_oldest()
        elif op < 0.62:
            h.restart()
            restarts += 1
        elif op < 0.67:  # crash after reading, before the commit: the batch's output is lost with it
            h.planner.plan()
            h.restart()
            crashes += 1
        else:
            seen.update(h.batch())
    w.finish_line()
    seen.update(h.drain())
    expected = {str(i) for i in range(w.next)}
    assert set(seen) == expected, sorted(expected ^ set(seen), key=int)[:10]
    assert [k for k, n in seen.items() if n != 1] == []
    assert h.planner.counters["losses"] == 0
    assert restarts > 5 and crashes > 3
