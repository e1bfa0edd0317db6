"""A replayed file range is read wherever rotation moved its bytes: no loss reported, every line once.

A driver plans and logs a batch holding a range of ``service.log.3`` and is SIGKILLed before the
range is read. While no driver runs, logrotate rotates 1, 2 or 6 steps (``service.log.N`` ->
``.N+1``, ``service.log`` -> ``.1``), by rename and by copytruncate in turn, each step after new
lines; the planned bytes end up under ``service.log.4`` .. ``service.log.9``. A new driver replays the
batch while two more steps run during its first batches (renames while it lists the directory). On
every store and with both output patterns (``commit_each_batch``, ``commit_each_partition``): every
number is counted once and no loss is reported (none in the store, none in the planner's counters).
Each store x pattern case runs one of the step counts, so each store and each pattern sees several.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
import uuid

import pytest
from pyspark.streaming import StreamingContext

from dstream_exactly_once import FileUtils, Writes, open_store
from dstream_exactly_once.stores._writes import RESERVED_NAMESPACE

from ..helpers import eventually
from .faults import ROOT, kill_group
from .test_file_faults import _lines, _wait_for

PER_FILE = 300
CASES = [("sqlite", "batch", 1), ("sqlite", "partition", 6), ("postgres", "batch", 2),
         ("postgres", "partition", 1), ("redis", "batch", 6), ("redis", "partition", 2)]


class Numbers:
    """Hands out the next unique numbers, one per line."""

    def __init__(self) -> None:
        self.next, self.written = 1, []

    def append(self, path: str, n: int = PER_FILE) -> None:
        got = list(range(self.next, self.next + n))
        self.next += n
        with open(path, "a", encoding="utf-8") as f:
            f.write("".join(f"{i}\n" for i in got))
        self.written.extend(got)


def rotate(directory: str, copytruncate: bool) -> None:
    live = os.path.join(directory, "service.log")
    rotated = sorted(int(n.rsplit(".", 1)[1]) for n in os.listdir(directory) if n.startswith("service.log."))
    for n in reversed(rotated):
        os.rename(f"{live}.{n}", f"{live}.{n + 1}")
    if copytruncate:
        shutil.copyfile(live, live + ".1")
        os.truncate(live, 0)
    else:
        os.rename(live, live + ".1")
        open(live, "w").close()


def _store_url(kind, tmp_path, request):
    if kind == "sqlite":
        return f"sqlite:///{tmp_path}/replay.db"
    if kind == "postgres":
        server = request.getfixturevalue("postgres_server")
        return server.url(server.create_database())
    return request.getfixturevalue("redis_server").url


def _values(url, app):
    with open_store(url, app) as store:
        return store.get_values("numbers")


def _losses(url, app):
    with open_store(url, app) as store:
        return {k: v for k, v in store.get_values(RESERVED_NAMESPACE).items() if k.startswith("loss:")}


def _spawn(args, stderr_path):
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), "PYTHONUNBUFFERED": "1"}
    with open(stderr_path, "ab") as err:
        return subprocess.Popen([sys.executable, "-m", "tests.integration.replay_rotation_proc", *args],
                                stdout=subprocess.PIPE, stderr=err, text=True, cwd=ROOT, env=env,
                                start_new_session=True)


def _restart(sc, pattern, url, app, output):
    ssc = StreamingContext(sc, 0.5)
    stream = FileUtils.createExactlyOnceFileStream(ssc, pattern, {"bytes.max": 1 << 20},
                                                   store=url, app_id=app)
    if output == "batch":
        def per_batch(batch, rdd):
            numbers = rdd.map(int).collect()
            return Writes().incr("numbers", "sum", sum(numbers)).incr("numbers", "count", len(numbers))

        stream.commit_each_batch(per_batch)
    else:
        def per_partition(records, r, batch):
            numbers = [int(x) for x in records]
            return Writes().incr("numbers", "sum", sum(numbers)).incr("numbers", "count", len(numbers))

        stream.commit_each_partition(per_partition)
    return ssc, stream


@pytest.mark.parametrize(("kind", "output", "steps"), CASES, ids=[f"{k}-{o}-{s}steps" for k, o, s in CASES])
def test_replayed_range_found_after_rotation_while_the_driver_was_down(kind, output, steps, sc, tmp_path, request):
    url, app = _store_url(kind, tmp_path, request), f"replay-{uuid.uuid4().hex[:8]}"
    logs = tmp_path / "logs"
    logs.mkdir()
    d, numbers = str(logs), Numbers()
    for name in ("service.log.3", "service.log.2", "service.log.1", "service.log"):
        numbers.append(os.path.join(d, name))
    pattern, marker, stderr = f"{d}/service.log*", str(tmp_path / "planned"), str(tmp_path / "driver.err")
    driver = _spawn([pattern, url, app, output, marker], stderr)
    try:
        _wait_for(_lines(driver), "STARTED", 120)
        eventually(lambda: os.path.exists(marker), what="the batch holding service.log.3 planned", timeout=120)
    except AssertionError as exc:
        with open(stderr, errors="replace") as f:
            raise AssertionError(f"{exc}\ndriver's stderr (tail):\n{f.read()[-3000:]}") from None
    finally:
        kill_group(driver)
    with open_store(url, app) as store:
        pending = store.pending_batches()
        assert pending and any(r.path.endswith("service.log.3") for r in pending[0].ranges)
    live = os.path.join(d, "service.log")
    for k in range(steps):  # while no driver runs
        numbers.append(live, 50)
        rotate(d, copytruncate=k % 2 == 1)
    assert os.path.exists(os.path.join(d, f"service.log.{3 + steps}"))

    def rotating():  # two more steps while the new driver lists and replays
        for k in range(2):
            time.sleep(0.3)
            numbers.append(live, 50)
            rotate(d, copytruncate=k % 2 == 0)

    ssc, stream = _restart(sc, pattern, url, app, output)
    rotator = threading.Thread(target=rotating)
    ssc.start()
    rotator.start()
    try:
        rotator.join()
        want = {"count": len(numbers.written), "sum": sum(numbers.written)}
        eventually(lambda: _values(url, app) == want or _values(url, app).get("count", 0) > want["count"]
                   or _losses(url, app), what="every line counted", timeout=90)
        time.sleep(1.5)  # a few more batches: nothing counted twice
    finally:
        ssc.stop(stopSparkContext=False, stopGraceFully=False)
    assert _values(url, app) == want
    assert _losses(url, app) == {}
    assert stream.committer.source.counters["losses"] == 0
    assert stream.data_loss().planned == 0 and stream.data_loss().read == 0
