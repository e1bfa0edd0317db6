"""Benchmarks of dstream-exactly-once (issue 6): ``python3 -m bench`` / ``make bench``.

Benchmarks, not tests: every number is printed next to a baseline measured in the same run and a
target (pass/fail column, never an assertion), a section is appended to ``bench/RESULTS.md`` and
one PNG chart per benchmark is drawn into ``bench/results/``.

- B1 read throughput: KafkaRDD (``KafkaUtils.createRDD(...).count()``) vs a bare kafka-python
  consumer loop vs Spark's JVM Kafka source (``spark.read.format("kafka")``, in a subprocess).
- B2 end-to-end exactly-once word count per store (SQLite, PostgreSQL, Redis) vs the same
  pipeline with plain, non-transactional upserts.
- B3 ``TransactionalStore.commit`` latency p50/p99 per store, partitions x result keys.
- B4 driver planning latency (``DirectPlanner.plan()``) for 10/100/1000 partitions.
- B5 scaling local[1] -> local[2] of B1(a) and B2 (SQLite).

Real services only (``dstream_exactly_once.testing``): a KRaft Kafka broker, redis-server,
PostgreSQL and a local Spark, all started here and stopped at the end.
"""
