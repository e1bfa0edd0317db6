"""A Structured Streaming query from Spark's Kafka source into the deo-kafka sink, as a child driver.

``python -m tests.integration.structured_kafka_sink_proc BOOTSTRAP IN_TOPIC OUT_TOPIC STORE APP CHECKPOINT EXPECTED``

Every input record becomes one output record (key and value = the input value, a header naming the
input partition); at most 20 offsets a trigger, so a run takes several micro-batches. Prints
``STARTED`` once the query runs and ``DONE`` once a ``read_committed`` consumer of the output topic
has seen ``EXPECTED`` distinct values; the tests SIGKILL it at any moment in between and restart it
from its checkpoint.
"""

from __future__ import annotations

import sys


def main(bootstrap: str, in_topic: str, out_topic: str, store: str, app: str, checkpoint: str,
         expected: int) -> None:
    from kafka import KafkaConsumer

    from dstream_exactly_once.structured import kafka_sink_options

    from .structured_sink_proc import kafka_query_session

    spark = kafka_query_session("structured-kafka-sink")
    rows = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", in_topic).option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", 20)
            .option("failOnDataLoss", "true").load()
            .selectExpr("CAST(value AS STRING) AS key", "value",
                        "array(named_struct('key', 'from', 'value', CAST(CAST(partition AS STRING) AS BINARY))) "
                        "AS headers"))
    query = (rows.writeStream.format("deo-kafka")
             .options(**kafka_sink_options(store, app, out_topic, {"bootstrap.servers": bootstrap},
                                           transaction_timeout_ms=20000))
             .option("checkpointLocation", checkpoint).trigger(processingTime="200 milliseconds").start())
    print("STARTED", flush=True)
    consumer = KafkaConsumer(out_topic, bootstrap_servers=bootstrap, isolation_level="read_committed",
                             auto_offset_reset="earliest", enable_auto_commit=False, group_id=None)
    seen = set()
    try:
        while len(seen) < expected:
            if query.exception() is not None:
                raise SystemExit(f"query failed: {query.exception()}")
            for records in consumer.poll(timeout_ms=200).values():
                seen.update(r.value for r in records)
    finally:
        consumer.close()
    query.stop()
    print("DONE", flush=True)


if __name__ == "__main__":
    a = sys.argv[1:]
    main(a[0], a[1], a[2], a[3], a[4], a[5], int(a[6]))
