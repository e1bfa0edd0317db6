"""A Spark-2.4-style driver for the checkpoint recovery test, run as a child process.

    python -m tests.integration.checkpoint_driver BOOTSTRAP TOPIC CHECKPOINT_DIR OUT_DIR EXPECTED_TOTAL

``StreamingContext.getOrCreate(CHECKPOINT_DIR, create)``: a direct stream and a running word count
(``updateStateByKey``). Each batch appends ``{"time", "pid", "ranges"}`` to OUT_DIR/ranges.log and
writes the whole state to OUT_DIR/state.json (replaced atomically; an at-least-once output). When
the state's total reaches EXPECTED_TOTAL the driver prints DONE and stops. The test SIGKILLs it
mid-run and starts it again on the same checkpoint.
"""

from __future__ import annotations

import json
import os
import sys
import time


def _log_ranges(t, rdd):
    out = os.environ["DEO_CKPT_OUT"]
    line = json.dumps({"time": int(round(t.timestamp() * 1000)), "pid": os.getpid(),
                       "ranges": [[r.topic, r.partition, r.fromOffset, r.untilOffset] for r in rdd.offsetRanges()]})
    with open(os.path.join(out, "ranges.log"), "a") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


def _update(new, old):
    return sum(new) + (old or 0)


def _write_state(rdd):
    out = os.environ["DEO_CKPT_OUT"]
    state = dict(rdd.collect())
    tmp = os.path.join(out, f"state.json.{os.getpid()}")
    with open(tmp, "w") as f:
        json.dump(state, f)
    os.replace(tmp, os.path.join(out, "state.json"))
    time.sleep(0.5)  # batches stay pending a little longer, so a kill finds some in the checkpoint


def main(bootstrap: str, topic: str, checkpoint: str, out: str, expected_total: int) -> None:
    os.environ["DEO_CKPT_OUT"] = out
    from pyspark.streaming import StreamingContext

    from dstream_exactly_once import KafkaUtils
    from dstream_exactly_once.testing._spark import make_spark_context

    sc = make_spark_context("local[2]", "deo-checkpoint-driver",
                            {"spark.streaming.kafka.maxRatePerPartition": "20"})

    def create() -> StreamingContext:
        ssc = StreamingContext(sc, 1)
        stream = KafkaUtils.createDirectStream(ssc, [topic], {"bootstrap.servers": bootstrap,
                                                              "auto.offset.reset": "smallest"})
        stream.foreachRDD(_log_ranges)
        stream.flatMap(lambda kv: [(w, 1) for w in kv[1].split()]).updateStateByKey(_update).foreachRDD(_write_state)
        print("CREATED", flush=True)
        return ssc

    ssc = StreamingContext.getOrCreate(checkpoint, create)
    ssc.start()
    print("STARTED", flush=True)
    path = os.path.join(out, "state.json")
    while True:
        try:
            with open(path) as f:
                total = sum(json.load(f).values())
        except FileNotFoundError:
            total = 0
        if total >= expected_total:
            break
        time.sleep(0.2)
    print("DONE", total, flush=True)
    ssc.stop(stopSparkContext=True, stopGraceFully=False)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
