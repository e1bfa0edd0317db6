"""One measurement of :mod:`bench.layers` in a fresh interpreter whose ``PYTHONPATH`` names one source tree.

``python3 bench/layers_child.py CASE ARG…`` prints one JSON line: ``{"package": path of the package
imported, "samples": [ms, …], "cpu_s": CPU seconds of this process over the timed part, "wall_s": …}``.
It imports nothing of the ``bench`` package, so the package measured is the tree's own: only names
that both trees define are used (public ones, and the Kafka planner under either of its module paths).

Cases:

- ``import``: ``import dstream_exactly_once`` (one sample);
- ``commit URL APP PARTITIONS KEYS REPS WARM``: per batch, ``log_batch`` then ``commit`` of
  ``PARTITIONS`` ranges and ``KEYS`` key increments (``Writes`` built once, untimed);
- ``plan BOOTSTRAP TOPIC REPS WARM``: the direct Kafka planner's ``plan()`` + ``advance()`` per batch
  (topic discovery at its default interval).
"""

from __future__ import annotations

import importlib
import json
import resource
import sys
import time
from typing import Any, Callable, List


def _cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _either(*paths: str) -> Any:
    """The first of ``paths`` (``module:name``) that imports: a module that moved has two paths."""
    for path in paths:
        module, _, name = path.partition(":")
        try:
            return getattr(importlib.import_module(module), name)
        except ImportError:
            continue
    raise ImportError(f"none of {paths} imports")


def _timed(step: Callable[[int], None], reps: int, warm: int) -> dict:
    for i in range(warm):
        step(i)
    samples: List[float] = []
    cpu0, wall0 = _cpu(), time.perf_counter()
    for i in range(warm, warm + reps):
        t0 = time.perf_counter()
        step(i)
        samples.append((time.perf_counter() - t0) * 1000)
    return {"samples": samples, "cpu_s": _cpu() - cpu0, "wall_s": time.perf_counter() - wall0}


def main(argv: List[str]) -> dict:
    case = argv[0]
    if case == "import":
        cpu0, t0 = _cpu(), time.perf_counter()
        import dstream_exactly_once  # noqa: F401 - the measured work

        wall = time.perf_counter() - t0
        return {"samples": [wall * 1000], "cpu_s": _cpu() - cpu0, "wall_s": wall,
                "package": dstream_exactly_once.__file__}
    import dstream_exactly_once
    from dstream_exactly_once import OffsetRange

    if case == "commit":
        from dstream_exactly_once.stores import CommitOutcome, PlannedBatch, Writes, open_store

        url, app, partitions, keys, reps, warm = argv[1], argv[2], *map(int, argv[3:7])
        store = open_store(url, app)
        try:
            epoch = store.start_epoch()
            writes = Writes()
            for k in range(keys):
                writes.incr("words", f"key{k:06d}", 1)

            def commit(b: int) -> None:
                batch = PlannedBatch(b, int(time.time() * 1000),
                                     tuple(OffsetRange("layers", p, 10 * b, 10 * b + 10) for p in range(partitions)))
                store.log_batch(epoch, batch)
                if store.commit(epoch, batch, writes) is not CommitOutcome.APPLIED:
                    raise RuntimeError(f"batch {b} did not apply")

            out = _timed(commit, reps, warm)
            if store.get_value("words", "key000000") != reps + warm:
                raise RuntimeError("the committed increments are wrong")
        finally:
            store.close()
    elif case == "plan":
        metadata = _either("dstream_exactly_once.kafka._metadata:KafkaMetadata",
                           "dstream_exactly_once.kafka.metadata:KafkaMetadata")
        params = _either("dstream_exactly_once.kafka._params:parse_kafka_params",
                         "dstream_exactly_once.kafka.params:parse_kafka_params")
        planner_type = _either("dstream_exactly_once.kafka._planner:DirectPlanner",
                               "dstream_exactly_once.kafka.planner:DirectPlanner")
        subscribe = _either("dstream_exactly_once.kafka._strategies:Subscribe",
                            "dstream_exactly_once.kafka.strategies:Subscribe")
        bootstrap, topic, reps, warm = argv[1], argv[2], int(argv[3]), int(argv[4])
        md = metadata(params({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"}))
        try:
            planner = planner_type(md, subscribe([topic]), auto_offset_reset="earliest", discovery_interval_s=5.0)
            planner.start()

            def plan(_b: int) -> None:
                planner.advance(planner.plan(1.0))

            out = _timed(plan, reps, warm)
        finally:
            md.close()
    else:
        raise SystemExit(f"unknown case {case!r}")
    out["package"] = dstream_exactly_once.__file__
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))
