"""The stream of :mod:`bench.stopstart` in its own process: ``python -m bench.stopstart_child '<json spec>'``.

``KafkaUtils.createExactlyOnceStream`` over the spec's topic from ``earliest``, ``commit_each_batch``
folding each batch to a count and a sum (``Writes().incr``) into the spec's SQLite store, ``local[2]``,
the task planner's defaults. Runs until SIGTERM, then stops gracefully (the batch in flight commits).
"""

from __future__ import annotations

import json
import sys
from typing import Any


def main() -> int:
    from pyspark.streaming import StreamingContext

    from dstream_exactly_once import KafkaUtils, Writes, await_termination, stop_gracefully_on_signals
    from dstream_exactly_once.testing import make_spark_context

    spec = json.loads(sys.argv[1])
    sc = make_spark_context("local[2]", "deo-bench-stopstart", {
        "spark.driver.memory": "2g", "spark.streaming.exactlyOnce.catchUp": str(bool(spec.get("catch_up"))).lower()})
    ssc = StreamingContext(sc, spec["batch_s"])
    stream = KafkaUtils.createExactlyOnceStream(
        ssc, {"bootstrap.servers": spec["bootstrap"], "auto.offset.reset": "earliest"}, [spec["topic"]],
        store=spec["url"], app_id=spec["app"])

    def count_and_sum(_batch: Any, rdd: Any) -> Any:
        n, total = rdd.map(lambda r: (1, len(r[1] or ""))).fold((0, 0), lambda a, b: (a[0] + b[0], a[1] + b[1]))
        return Writes().incr("keepup", "count", n).incr("keepup", "sum", total)

    stream.commit_each_batch(count_and_sum)
    stop_gracefully_on_signals(ssc)
    ssc.start()
    await_termination(ssc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
