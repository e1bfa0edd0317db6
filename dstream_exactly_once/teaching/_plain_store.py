"""The at-least-once pipeline's store: a running sum and the offsets, written separately.

This is what a hand-written ``foreachRDD`` loop (or a receiver committing to ZooKeeper) did: add
the batch's result with one plain write, then store the offsets with another. A crash between the
two leaves the result applied and the offsets behind it: the restarted job reads the batch again
and adds it a second time. Unit of parallelism: none (driver-side SQLite). Delivery guarantee:
at-least-once — on purpose, for the contrast.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Dict, Mapping, Tuple

from ..kafka._offsets import TopicAndPartition


class PlainSumStore:
    """A SQLite file holding ``(sum, count, outputs)`` and ``{topic/partition: next offset}``."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(str(self.path), isolation_level=None, timeout=30, check_same_thread=False)
        with self._lock:
            self._conn.execute("CREATE TABLE IF NOT EXISTS totals (id INTEGER PRIMARY KEY CHECK (id = 0), "
                               "total INTEGER NOT NULL, records INTEGER NOT NULL, outputs INTEGER NOT NULL)")
            self._conn.execute("INSERT OR IGNORE INTO totals VALUES (0, 0, 0, 0)")
            self._conn.execute("CREATE TABLE IF NOT EXISTS offsets (topic TEXT NOT NULL, part INTEGER NOT NULL, "
                               "next_offset INTEGER NOT NULL, PRIMARY KEY (topic, part))")

    def __repr__(self) -> str:
        return f"PlainSumStore({str(self.path)!r})"

    def add(self, total: int, records: int) -> None:
        """Step 1, the output: add a batch's sum and record count (autocommit, on its own)."""
        with self._lock:
            self._conn.execute("UPDATE totals SET total = total + ?, records = records + ?, outputs = outputs + 1 "
                               "WHERE id = 0", (total, records))

    def store_offsets(self, offsets: Mapping[TopicAndPartition, int]) -> None:
        """Step 2, the bookkeeping: the next offset to read per partition (one transaction of its own)."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                self._conn.executemany("INSERT OR REPLACE INTO offsets VALUES (?, ?, ?)",
                                       [(tp.topic, tp.partition, off) for tp, off in offsets.items()])
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def offsets(self) -> Dict[TopicAndPartition, int]:
        with self._lock:
            rows = self._conn.execute("SELECT topic, part, next_offset FROM offsets").fetchall()
        return {TopicAndPartition(t, p): o for t, p, o in rows}

    def totals(self) -> Tuple[int, int, int]:
        """``(sum, records counted, outputs written)``."""
        with self._lock:
            total, records, outputs = self._conn.execute(
                "SELECT total, records, outputs FROM totals WHERE id = 0").fetchone()
        return int(total), int(records), int(outputs)

    def close(self) -> None:
        with self._lock:
            self._conn.close()
