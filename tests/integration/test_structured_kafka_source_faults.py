"""Acceptance: the ``deo-kafka`` source into each exactly-once sink (``deo-store`` store-anchored,
``deo-kafka``, ``deo-doris``) on each store (SQLite, PostgreSQL, Redis), plus ``deo-store`` without
anchoring on SQLite; the driver SIGKILLed at random, inside planning and right after the store commit,
and the anchored queries restarted with their checkpoints deleted; every record lands exactly once in
every output.

One driver (``kafka_source_faults_proc``) runs the ten queries over one topic, so one JVM start per
kill serves every cell. Before each run the test produces that run's share of the records (most of
them into one hot partition: a micro-batch's hot range is split over tasks while the small ranges of
the other partitions are packed into one). Every run is SIGKILLed as a whole process group once each
query reached its kill point of that run; the points rotate, so every cell meets each of them:

- ``random``: a random moment after Spark committed a micro-batch of this run (planning, reading or
  committing the next one);
- ``planning``: the source holds on the driver after planning a micro-batch's end offset (checked:
  not in Spark's offset log) or, for every other cell, after planning its tasks (checked: offset
  logged, not committed);
- ``after-commit``: the sink holds after its store transaction (Doris: and its Doris commits), before
  Spark's commit-log entry (checked): the restart runs the batch again and the sink must recognise
  it (or, on a deleted checkpoint, the anchored source starts past it).

The anchored queries keep the source's offsets in the store (``anchor=true``) and their source starts
from them: their checkpoints are deleted before the second run and before the last one. A last run
drains; then each store counts every record once, each ``deo-kafka`` output topic holds it once for a
``read_committed`` consumer and each Doris table once. The sinks' commits name how many tasks each
micro-batch had: the task planner's plan of the batch's offsets, packed and split tasks among them."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List, Optional, Set, Tuple

import pytest

from dstream_exactly_once.core._tasks import TaskOptions, plan_tasks
from dstream_exactly_once.kafka._range_reader import SPLIT_FLOOR
from dstream_exactly_once.kafka.structured._source_offsets import ranges_between
from dstream_exactly_once.stores import open_store
from dstream_exactly_once.testing._doris_double import DorisProtocolDouble

from ..helpers import eventually
from .faults import ROOT, kill_group
from .kafka_source_faults_proc import TASK_SIZE
from .test_structured_kafka_sink_faults import read_committed

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.pyspark4]

STORES = ("sqlite", "postgres", "redis")
SINKS = ("anchored", "kafka", "doris")  # anchored: deo-store with anchor=true; and deo-store without it on SQLite
POINTS = ("random", "planning", "after-commit")
KILLS = 3  # every cell meets every point once
SHARE = 40  # records a run: 28 into the hot partition 0, 4 into each of partitions 1-3
RECORDS = SHARE * (KILLS + 1)
DELETE_BEFORE = (1, KILLS)  # runs that start the anchored (deo-store) queries on deleted checkpoints


def schedule(cell: int, kill: int) -> str:
    """The kill point of cell ``cell`` in run ``kill``."""
    return POINTS[(cell + kill) % len(POINTS)]


def planning_point(cell: int) -> str:
    """Where the source holds for cell ``cell``'s ``planning`` kill (both kinds on every store)."""
    return "plan-offsets" if cell % 2 == 0 else "plan-tasks"


def _spark_log(checkpoint: Path, log: str) -> Set[int]:
    folder = checkpoint / log
    return {int(p.name) for p in folder.iterdir() if p.name.isdigit()} if folder.is_dir() else set()


def _held(hold: Path) -> Optional[Tuple[str, int]]:
    try:
        point, batch = (hold / "held").read_text().split()
    except (FileNotFoundError, ValueError):
        return None
    return point, int(batch)


def _produce(kafka: Any, topic: str, run: int) -> None:
    values = list(range(run * SHARE, (run + 1) * SHARE))
    hot, rest = values[:28], values[28:]
    kafka.produce(topic, hot, partition=0)
    for p in range(1, 4):
        kafka.produce(topic, rest[(p - 1) * 4:p * 4], partition=p)


def _offset_docs(checkpoint: Path) -> List[Any]:
    """The offsets Spark logged, by batch id (the last line of each offset-log entry)."""
    ids = sorted(_spark_log(checkpoint, "offsets"))
    assert ids == list(range(len(ids))), ids
    return [json.loads((checkpoint / "offsets" / str(i)).read_text().splitlines()[-1]) for i in ids]


def _check_tasks(checkpoint: Path, tasks_file: Path) -> Tuple[bool, bool]:
    """Each committed micro-batch's task count (as the sink saw it) is the task planner's plan of its
    offsets; returns whether some task was packed (several ranges) and some range was split."""
    docs = _offset_docs(checkpoint)
    options = TaskOptions.from_mapping({"tasks.target.size": TASK_SIZE, "tasks.split.size": TASK_SIZE})
    seen = {int(b): int(n) for b, n in (line.split() for line in tasks_file.read_text().splitlines())}
    packed = split = False
    for batch, tasks in seen.items():
        plan = plan_tasks(ranges_between(docs[batch - 1] if batch else {}, docs[batch]), options,
                          split_floor=SPLIT_FLOOR)
        assert tasks == len(plan), (batch, tasks, plan)
        packed |= any(len(task) > 1 for task in plan)
        split |= any(not piece.whole for task in plan for piece in task)
    return packed, split


def test_deo_kafka_source_into_every_sink_and_store_exactly_once_under_sigkill(kafka, tmp_path, request):
    urls = {"postgres": request.getfixturevalue("postgres_url"), "redis": request.getfixturevalue("redis_url")}
    topic, tag = "ksf-" + uuid.uuid4().hex[:10], uuid.uuid4().hex[:8]
    kafka.create_topic(topic, partitions=4)
    cells: List[Dict[str, str]] = []
    for sink in SINKS:
        for store in STORES:
            app = f"ksf-{sink}-{store}-{tag}"
            out = f"ksf-out-{store}-{tag}" if sink == "kafka" else f"t_{store}"
            if sink == "kafka":
                kafka.create_topic(out, partitions=2)
            url = f"sqlite:///{tmp_path}/{sink}.db" if store == "sqlite" else urls[store]  # a file per writer
            cells.append({"sink": sink, "store": url, "app": app, "out": out, "name": f"{sink}/{store}"})
    cells.append({"sink": "store", "store": f"sqlite:///{tmp_path}/store.db", "app": f"ksf-store-sqlite-{tag}",
                  "out": "", "name": "store/sqlite"})
    checkpoints, hold = tmp_path / "checkpoints", tmp_path / "hold"
    for cell in cells:
        (hold / cell["app"]).mkdir(parents=True)
    log = tmp_path / "driver.log"
    rng = random.Random(KILLS)
    killed: Dict[str, List[str]] = {cell["name"]: [] for cell in cells}

    with DorisProtocolDouble(password="doris-pw") as doris:
        def start() -> subprocess.Popen:
            env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
            with open(log, "ab") as out:
                return subprocess.Popen([sys.executable, "-m", "tests.integration.kafka_source_faults_proc",
                                         kafka.bootstrap, topic, str(checkpoints), str(hold), doris.fe_url,
                                         json.dumps(cells)], stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, env=env,
                                        start_new_session=True)

        def tail() -> str:
            return log.read_text(errors="replace")[-4000:]

        def before_run(run: int) -> None:
            _produce(kafka, topic, run)
            if run in DELETE_BEFORE:
                for cell in cells:
                    if cell["sink"] == "anchored":
                        shutil.rmtree(checkpoints / cell["app"], ignore_errors=True)

        for kill in range(KILLS):
            before_run(kill)
            points = {i: schedule(i, kill) for i in range(len(cells))}
            committed = {}
            for i, cell in enumerate(cells):
                if points[i] == "planning":
                    (hold / cell["app"] / planning_point(i)).touch()
                elif points[i] == "after-commit":
                    (hold / cell["app"] / "after-commit").touch()
                committed[i] = _spark_log(checkpoints / cell["app"], "commits")

            def at_point(i: int, committed: Dict[int, Set[int]] = committed,
                         points: Dict[int, str] = points) -> bool:
                if points[i] == "random":
                    return bool(_spark_log(checkpoints / cells[i]["app"], "commits") - committed[i])
                return _held(hold / cells[i]["app"]) is not None

            driver = start()
            try:
                eventually(lambda: all(at_point(i) for i in range(len(cells))),
                           f"run {kill}: every query at its kill point", 300, interval=0.05, proc=driver,
                           detail=tail)
                for i, cell in enumerate(cells):
                    checkpoint = checkpoints / cell["app"]
                    if points[i] != "random":
                        point, batch = _held(hold / cell["app"])  # type: ignore[misc]
                        wanted = planning_point(i) if points[i] == "planning" else "after-commit"
                        assert point == wanted, (cell["name"], point, wanted)
                        logged, done = _spark_log(checkpoint, "offsets"), _spark_log(checkpoint, "commits")
                        if point == "plan-offsets":  # the planned offset is not logged: nothing pending
                            assert logged == done, (cell["name"], point, logged, done)
                        else:  # the micro-batch is logged, not committed
                            batch = max(logged) if point == "plan-tasks" else batch
                            assert batch in logged and batch not in done, (cell["name"], point, batch, done)
                    killed[cell["name"]].append(points[i])
                time.sleep(rng.uniform(0.0, 0.6))  # the random cells: anywhere in their next micro-batch
            finally:
                kill_group(driver)
            for cell in cells:
                for name in ("plan-offsets", "plan-tasks", "after-commit", "held"):
                    (hold / cell["app"] / name).unlink(missing_ok=True)

        before_run(KILLS)
        driver = start()

        def outputs() -> Dict[str, Counter]:
            got: Dict[str, Counter] = {}
            for cell in cells:
                if cell["sink"] in ("store", "anchored"):
                    with open_store(cell["store"], cell["app"]) as s:
                        got[cell["name"]] = Counter({int(k): v for k, v in s.get_values("seen").items()})
                elif cell["sink"] == "kafka":
                    got[cell["name"]] = Counter(int(r.value) for r in read_committed(kafka.bootstrap, cell["out"]))
                else:
                    got[cell["name"]] = Counter(int(r[0]) for r in doris.rows("db", cell["out"]))
            return got

        try:
            eventually(lambda: all(len(got) >= RECORDS for got in outputs().values()),
                       "every output holding every record", 300, interval=1.0, proc=driver, detail=tail)
        finally:
            kill_group(driver)
        final = outputs()  # after the driver's end: anything written twice is there too
        labels = doris.labels("db")

    for i, cell in enumerate(cells):  # every SIGKILL happened at its planned point
        assert killed[cell["name"]] == [schedule(i, kill) for kill in range(KILLS)], cell["name"]
    expected = Counter(range(RECORDS))
    for name, got in final.items():
        assert got == expected, (name, sorted(set(expected) - set(got)), {k: n for k, n in got.items() if n != 1})
    assert "PRECOMMITTED" not in labels.values(), labels
    packed = split = False
    for cell in cells:
        if cell["sink"] != "anchored":  # their checkpoints hold every micro-batch's offsets
            p, s = _check_tasks(checkpoints / cell["app"], hold / cell["app"] / "tasks")
            packed, split = packed or p, split or s
    assert packed and split, (packed, split)
