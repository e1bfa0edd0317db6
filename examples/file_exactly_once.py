"""Exactly-once line counts of growing log files: results and byte positions committed together.

Usage: file_exactly_once.py <absolute path glob> [store URL] [app id]

    python examples/file_exactly_once.py '/var/log/app/service.log*' sqlite:///files.db files

Every batch (2 s) counts the new complete lines of the files the glob names and their words,
and commits the counts with each file's byte position and identity (content fingerprint) in one
store transaction. Rotate the log by rename or copytruncate, kill the driver at any moment (even
with SIGKILL) and start it again: no line is lost or counted twice. Read the counts with::

    from dstream_exactly_once import open_store
    print(open_store("sqlite:///files.db", "files").get_values("lines"))

Local mode only unless every executor sees the same files (``--conf spark.aof.shared.filesystem=true``).
"""

import sys

from pyspark import SparkContext
from pyspark.streaming import StreamingContext

from dstream_exactly_once import FileUtils, Writes, await_termination, stop_gracefully_on_signals

if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(-1)
    path = sys.argv[1]
    store = sys.argv[2] if len(sys.argv) > 2 else "sqlite:///files.db"
    app_id = sys.argv[3] if len(sys.argv) > 3 else "files"

    sc = SparkContext(appName="FileExactlyOnce")
    ssc = StreamingContext(sc, 2)
    stream = FileUtils.createExactlyOnceFileStream(ssc, path, {"starting.offsets": "earliest"},
                                                   store=store, app_id=app_id)

    def per_batch(batch, rdd):
        lines, words = rdd.map(lambda line: (1, len(line.split()))).fold((0, 0), lambda a, b: (a[0] + b[0],
                                                                                             a[1] + b[1]))
        print(f"batch {batch.batch_id}: {lines} lines, {words} words, ranges "
              f"{[(r.path, r.fromOffset, r.untilOffset) for r in batch.ranges]}", flush=True)
        return Writes().incr("lines", "lines", lines).incr("lines", "words", words)

    stream.commit_each_batch(per_batch)
    stop_gracefully_on_signals(ssc)  # SIGTERM: the in-flight batch finishes and commits, then exit 0
    ssc.start()
    await_termination(ssc)
