"""A driver with Spark's UI on, whose Streaming tab a test reads (``python -m tests.integration.streaming_tab_driver``).

- ``kafka BOOTSTRAP TOPIC EXPECTED UI_PORT OUT [HOLD]``: ``createDirectStream`` (maxRatePerPartition 50, 1 s batches);
- ``files GLOB EXPECTED UI_PORT OUT [HOLD]``: ``createDirectFileStream`` (1 s batches, ``bytes.max`` 200);
- ``eo-kafka BOOTSTRAP TOPIC EXPECTED STORE_URL UI_PORT OUT [HOLD]`` and
  ``eo-files GLOB EXPECTED STORE_URL UI_PORT OUT [HOLD]``: the same streams made exactly-once
  (``createExactlyOnceStream``, ``createExactlyOnceFileStream``) into the store at STORE_URL (app id
  ``tab``): ``commit_each_batch`` adds each batch's record count (``counts/records``) and the sum of its
  values (``counts/sum``; a file line's value is its number) to the store.

Once Spark's REST API (``/api/v1/applications/<id>/streaming/batches``) lists completed batches whose
``inputSize`` adds up to EXPECTED (records for Kafka, bytes for files) — or after 90 s — it writes OUT
(JSON: the REST batches and statistics, the batch pages' HTML of the batches with input, the records the
output saw), prints ``READY <ui url>``, keeps streaming HOLD more seconds (for screenshots) and stops.
"""

from __future__ import annotations

import json
import sys
import threading
import time
import urllib.request
from typing import Any, Dict, List


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=60) as resp:
        body = resp.read().decode("utf-8")
    return json.loads(body) if "/api/v1/" in url else body


def main(mode: str, args: List[str]) -> None:
    from pyspark.streaming import StreamingContext

    from dstream_exactly_once import FileUtils, KafkaUtils, Writes
    from dstream_exactly_once.testing._spark import make_spark_context

    exactly_once = mode.startswith("eo-")
    source = mode[3:] if exactly_once else mode
    store = ""
    if source == "kafka":
        bootstrap, topic, expected, *args = args
        conf = {"spark.streaming.kafka.maxRatePerPartition": 50}
    else:
        glob, expected, *args = args
        conf = {}
    if exactly_once:
        store, *args = args
    port, out, *rest = args
    hold = float(rest[0]) if rest else 0.0
    sc = make_spark_context("local[2]", f"deo-streaming-tab-{mode}",
                            {"spark.ui.enabled": "true", "spark.ui.port": port, **conf})
    ssc = StreamingContext(sc, 1)
    seen: List[int] = []
    lock = threading.Lock()
    params = {"bootstrap.servers": bootstrap, "auto.offset.reset": "smallest"} if source == "kafka" else {}
    if exactly_once:
        if source == "kafka":
            eo = KafkaUtils.createExactlyOnceStream(ssc, params, [topic], store=store, app_id="tab")
        else:
            eo = FileUtils.createExactlyOnceFileStream(ssc, glob, {"bytes.max": 200}, store=store, app_id="tab")

        def commit(_batch: Any, rdd: Any) -> Writes:
            values = rdd.map(lambda r: int(r[1] if isinstance(r, tuple) else r)).collect()
            with lock:
                seen.append(len(values))
            return Writes().incr("counts", "records", len(values)).incr("counts", "sum", sum(values))

        eo.commit_each_batch(commit)
    else:
        if source == "kafka":
            stream = KafkaUtils.createDirectStream(ssc, [topic], params)
        else:
            stream = FileUtils.createDirectFileStream(ssc, glob, {"bytes.max": 200})

        def count(rdd: Any) -> None:
            n = rdd.count()
            with lock:
                seen.append(n)

        stream.foreachRDD(count)
    ui = f"http://127.0.0.1:{port}"
    ssc.start()
    result: Dict[str, Any] = {}
    deadline = time.monotonic() + 90
    try:
        app = _get(f"{ui}/api/v1/applications")[0]["id"]
        api = f"{ui}/api/v1/applications/{app}/streaming"
        while True:
            batches = _get(f"{api}/batches")
            done = [b for b in batches if b.get("status") == "COMPLETED"]
            if sum(b["inputSize"] for b in done) >= int(expected) or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        result["batches"] = done
        result["statistics"] = _get(f"{api}/statistics")
        result["pages"] = {str(b["batchId"]): _get(f"{ui}/streaming/batch/?id={b['batchId']}")
                           for b in done if b["inputSize"] > 0}
        with lock:
            result["seen"] = sum(seen)
        with open(out, "w", encoding="utf-8") as f:
            json.dump(result, f)
        print(f"READY {ui}", flush=True)
        time.sleep(hold)
    finally:
        ssc.stop(stopSparkContext=True, stopGraceFully=False)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
