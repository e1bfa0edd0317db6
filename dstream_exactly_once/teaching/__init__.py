"""The teaching demo: one stream of integers, two pipelines, the same SIGKILLs.

``dstream-eo demo`` (``make demo``) sums the integers 1..N from Kafka twice in one Spark driver:
an **at-least-once** pipeline written the way receivers and hand-written ``foreachRDD`` loops were
(add the batch to a running sum, then store the offsets in a second step) and the **exactly-once**
one (``KafkaUtils.createExactlyOnceStream`` + ``commit_each_batch``). The driver is SIGKILLed on a
fixed schedule at each crash point of ``docs/walkthrough.md``; the at-least-once sum ends too high,
the exactly-once sum ends at N(N+1)/2.

Modules: :mod:`._points` (crash points, kill schedule, trace file), :mod:`._plain_store` (the
at-least-once pipeline's store), :mod:`._driver` (one Spark driver running both pipelines),
:mod:`._show` (the parent: broker, runs, table), :mod:`._chart` (the PNG, optional matplotlib);
:mod:`._pipeline` is the exactly-once sum pipeline alone, the driver the fault-injection tests kill.
"""
