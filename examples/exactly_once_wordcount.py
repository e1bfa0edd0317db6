"""Word count with exactly-once results: counts and offsets committed together in one store.

Usage: exactly_once_wordcount.py <bootstrap.servers> <topic> [store URL] [app id]

Stop it with SIGTERM (or Ctrl-C) and the batch in flight commits before it exits; kill it at any
moment (even with SIGKILL) and start it again: it resumes from the offsets
committed in the store, replays an uncommitted batch with the same ranges, and never counts a
line twice. Read the counts with ``dstream-eo``-free Python::

    from dstream_exactly_once import open_store
    print(open_store("sqlite:///wordcount.db", "wordcount").get_values("words"))
"""

import sys

from pyspark import SparkContext
from pyspark.streaming import StreamingContext

from dstream_exactly_once import KafkaUtils, Writes, await_termination, stop_gracefully_on_signals

if __name__ == "__main__":
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        sys.exit(-1)
    brokers, topic = sys.argv[1:3]
    store = sys.argv[3] if len(sys.argv) > 3 else "sqlite:///wordcount.db"
    app_id = sys.argv[4] if len(sys.argv) > 4 else "wordcount"

    sc = SparkContext(appName="ExactlyOnceWordCount")
    ssc = StreamingContext(sc, 2)
    stream = KafkaUtils.createExactlyOnceStream(
        ssc, {"bootstrap.servers": brokers, "auto.offset.reset": "earliest"}, [topic],
        store=store, app_id=app_id)

    def per_batch(batch, rdd):
        counts = rdd.flatMap(lambda kv: kv[1].split()).countByValue()
        writes = Writes()
        for word, n in counts.items():
            writes.incr("words", word, n)
        print(f"batch {batch.batch_id}: {sum(counts.values())} words, ranges {[str(r) for r in batch.ranges]}",
              flush=True)
        return writes

    stream.commit_each_batch(per_batch)
    stop_gracefully_on_signals(ssc)  # SIGTERM: the in-flight batch finishes and commits, then exit 0
    ssc.start()
    await_termination(ssc)  # the library's own error (FencedError, ...) if the stream failed
