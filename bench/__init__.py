"""Benchmarks of dstream-exactly-once: ``python3 -m bench`` / ``make bench``.

Benchmarks, not tests: every number is printed next to a baseline measured in the same run and a
target (PASS/FAIL, or FLAGGED invalid when the measurement cannot be right — never an assertion),
a section is appended to ``bench/RESULTS.md`` and one PNG chart per benchmark is drawn into
``bench/results/``.

Method: peers run in the same rounds, interleaved, after equal warm-ups, >= 5 rounds,
medians with min/max and IQR; every reader uses the same consumer settings
(``bench.common.READ_SETTINGS``, printed); wall time is reported with CPU time (user + sys of every
benchmark process, the Kafka broker included, ``bench/cpu.py``) and the CPU other processes of a
shared machine took meanwhile.

- B1 read throughput per core at ``local[1]``: KafkaRDD (a), KafkaRDD with a metadata
  ``messageHandler`` (a′), a bare kafka-python loop (b), Spark's JVM Kafka source counting (c) and
  selecting the same columns as (a′) (c′) in one persistent subprocess.
- B2 end-to-end exactly-once word count per store (SQLite, PostgreSQL, Redis) vs the same
  pipeline with the store's own set-based write without fencing/offsets/logs; output cost per batch.
- B3 output cost per batch (``log_batch`` + ``commit``) per store, partitions x result keys, vs
  that plain set-based write of the same keys, interleaved.
- B4 driver planning latency (``DirectPlanner.plan()``) for 10/100/1000 partitions while a
  producer writes to every partition.
- B5 scaling local[1] -> local[2] of B1(a) and B2 (SQLite), with CPU time; ratios above the core
  count are flagged invalid.
- B6 file source read throughput (``bench/file_read.py``): the same generated log files
  read by a bare Python line loop (A), the file source's reader without Spark (B), the file source
  through Spark (C) and Spark's ``spark.read.text`` (D), interleaved rounds, lines per wall- and
  CPU-second, per-round ratios split into CPU efficiency and parallelism (a parallelism part above
  the core count is flagged); run first, before any service starts. ``python3 -m bench.files`` runs
  it alone.
- B7 commit scale (``bench/commit_scale.py``, ``python3 -m bench.commit_scale``, run on its own):
  the exactly-once commit with its offset log (both ``offset_log`` modes) vs the plain set-based
  write of the same 1,000 keys, at 100 / 1,000 / 10,000 partitions, every partition with data
  (dense) or 100 of them (sparse), interleaved, CPU time beside wall time.

- B8 keeping up (``bench/keepup.py``, ``python3 -m bench.keepup``, run on its own): a producer writes
  2,000 records/s over P partitions while ``createExactlyOnceStream`` (0.5 s batches), Spark's JVM
  Structured Streaming Kafka source (same trigger, ``foreachBatch`` doing the same count and sum) and a
  plain PySpark job of the same task count run in turn, each in its own JVM; committed batches per
  second, batch / plan / job / commit p50, CPU per batch and the lag left behind, P = 10 → 10,000,
  and a skewed topic read with and without splitting.
- B9 Delta append (``bench/delta.py``, ``python3 -m bench.delta``, run on its own): the exactly-once
  Delta sink's batch (files, pending record, one Delta commit with the application transaction, the
  store's commit) vs a plain ``deltalake.write_deltalake`` append of the same 100,000 rows,
  interleaved, CPU time beside wall time.
- B10 Structured Streaming backlog read (``bench/ss_read.py``, ``python3 -m bench.ss_read``, run on its
  own): Spark's JVM Kafka source vs the ``deo-kafka`` source (kafka-python and confluent-kafka
  readers), ``Trigger.AvailableNow`` over the same backlog, every column consumed by the same
  ``foreachBatch`` aggregate, one session for all peers; records per CPU-second and wall time;
  ``--connect`` also through Spark Connect.
- B11 first committed micro-batch (``bench/ss_first.py``, ``python3 -m bench.ss_first``, run on its
  own): seconds from ``start()`` to the first committed batch of ``deo-kafka`` into ``deo-store``,
  ``deo-kafka``, ``deo-doris`` and ``deo-delta``, each against a ``foreachBatch`` writer of the same
  rows; ``--connect`` also through Spark Connect.
- Layers (``bench/layers.py``, ``python3 -m bench.layers --before REV``, run on its own): the driver's
  own work — importing the package, a batch's ``log_batch`` + ``commit`` on SQLite and Redis, the
  Kafka planner's ``plan()`` — done by the package of two revisions in interleaved rounds of fresh
  processes; after / before per case, to show a change of module layout costs nothing.

The soak run is separate (``python3 -m bench.soak --store … --minutes 30``, ``bench/soak.py``):
a long exactly-once Kafka + rotating-file job whose memory, descriptors, threads, latency, store
size and tracked file identities must stay flat (slopes per hour against stated thresholds).

Real services only (``dstream_exactly_once.testing``): a KRaft Kafka broker, redis-server,
PostgreSQL and a local Spark, all started here and stopped at the end; B6's files are generated
into the run's temporary directory.
"""
