"""Driver of ``test_files_cluster.py``: an exactly-once file stream over node-local files on two hosts.

Run as ``python files_cluster_job.py MASTER STORE_URL APP PATH HOSTS EXPECTED`` in its own process
(one SparkContext per process). Every line read is counted in the store's namespace ``lines``
(line -> times counted) and ``readers`` (``<host of the line's file>@<host whose executor read
it>`` -> lines; lines are ``<host>-<n>``, the reader's host is the executor's ``SPARK_LOCAL_IP``).
Prints ``RESULT {json}`` once EXPECTED lines are counted (or after 100 s).
"""

from __future__ import annotations

import json
import os
import sys
import time

from pyspark.streaming import StreamingContext

from dstream_exactly_once import FileUtils
from dstream_exactly_once.stores import Writes, open_store
from dstream_exactly_once.testing import make_spark_context


def main(master: str, url: str, app: str, path: str, hosts: str, expected: int) -> None:
    sc = make_spark_context(master, "files-cluster", {"spark.locality.wait": "30s", "spark.cores.max": "2",
                                                       "spark.executor.memory": "512m",
                                                       "spark.task.maxFailures": "4"})
    ssc = StreamingContext(sc, 1)
    stream = FileUtils.createExactlyOnceFileStream(ssc, path, {"hosts": hosts, "include.file.name": True},
                                                   store=url, app_id=app)

    def count(batch, rdd):
        w = Writes()
        for (_path, line), reader in rdd.map(lambda r: (r, os.environ.get("SPARK_LOCAL_IP"))).collect():
            w.incr("lines", line, 1)
            w.incr("readers", f"{line.split('-')[0]}@{reader}", 1)  # lines are '<host>-<n>'
        return w

    stream.commit_each_batch(count)
    ssc.start()
    deadline = time.monotonic() + 100
    try:
        while True:
            with open_store(url, app) as store:
                done = sum(store.get_values("lines").values())
            if done >= expected or time.monotonic() > deadline:
                break
            time.sleep(0.5)
    finally:
        ssc.stop(stopSparkContext=False, stopGraceFully=False)
    planner = stream.committer.source
    result = {"counted": done, "counters": planner.counters, "hosts": list(planner.hosts),
              "tracked": {k: list(v) for k, v in planner.tracked().items()}}
    sc.stop()
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:6], int(sys.argv[6]))
