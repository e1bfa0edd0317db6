"""Child driver of the retirement SIGKILL test (``python -m tests.integration.retirement_faults_proc …``).

``DIR STORE APP KILL``: one driver of the file source on the real committer and store, committing
each batch's sum and count of numbered lines with the positions it retires, as ``commit_each_batch``
does (no Spark: the kill points are in the committer's and the store's code, which Spark does not
change). ``KILL`` is where it SIGKILLs itself on the first batch whose commit drops positions:
``after-commit`` (right after that commit), ``before-commit`` (the batch is in the offset log, its
commit not made) or ``none``. It prints ``IDLE <positions> <tracked>`` and exits 0 after two batches
with nothing to read.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from datetime import datetime, timezone


def drive(directory: str, store_url: str, app: str, kill: str) -> int:
    from dstream_exactly_once.engine._committer import BatchCommitter
    from dstream_exactly_once.files import FilePlanner, FileSourceOptions
    from dstream_exactly_once.stores import Writes, open_store

    planner = FilePlanner(os.path.join(directory, "service.log*"),
                          FileSourceOptions.from_mapping({"starting.offsets": "earliest"}))
    committer = BatchCommitter(open_store(store_url, app), planner, retain_batches=2)
    reader = planner.reader()
    idle = 0
    while idle < 2:
        time.sleep(0.01)  # batch times strictly increase across drivers
        batch = committer.next_batch(datetime.now(timezone.utc))
        if batch is None:
            idle += 1
            continue
        idle = 0
        numbers = [int(line) for r in batch.ranges for line in reader.read(r)]
        drops = committer.position_drops(batch)
        if drops and kill == "before-commit":
            os.kill(os.getpid(), signal.SIGKILL)
        writes = Writes().incr("numbers", "sum", sum(numbers)).incr("numbers", "count", len(numbers))
        outcome = committer.store.commit(committer.epoch, batch, writes.drop_positions(drops))
        committer.committed_batch(outcome, batch, drops)
        if drops and kill == "after-commit":
            os.kill(os.getpid(), signal.SIGKILL)
    print(f"IDLE {len(committer.store.load_positions())} {len(planner.tracked())}", flush=True)
    committer.close()
    return 0


if __name__ == "__main__":
    sys.exit(drive(*sys.argv[1:5]))
