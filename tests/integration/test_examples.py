"""The examples run as users run them: ``python examples/<name>.py …`` in a subprocess, real broker."""

from __future__ import annotations

import ast
import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

from ..helpers import eventually

ROOT = Path(__file__).resolve().parents[2]
WORDCOUNT = ROOT / "examples" / "direct_kafka_wordcount.py"
START_TIMEOUT_S = 240.0  # JVM start + first batch on a small, busy machine
COUNT_TIMEOUT_S = 120.0
PAIR = re.compile(r"^\(.*, \d+\)$")


def example_env() -> dict:
    env = dict(os.environ)
    env.update({
        "PYTHONPATH": os.pathsep.join([str(ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYTHONUNBUFFERED": "1",  # pprint output reaches the pipe batch by batch
        "PYSPARK_SUBMIT_ARGS": "--master local[2] --conf spark.ui.enabled=false pyspark-shell",
    })
    return env


class Example:
    """A running example: stdout lines collected by a thread, stderr kept in a file for diagnosis."""

    def __init__(self, script: Path, *args: str) -> None:
        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([sys.executable, str(script), *args], cwd=str(ROOT), env=example_env(),
                                     stdout=subprocess.PIPE, stderr=self.stderr, text=True,
                                     start_new_session=True)  # its own process group: python, spark-submit, JVM
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def read_until(self, done, timeout: float, what: str) -> None:
        """Consume stdout lines until ``done(all lines so far)`` holds."""
        deadline = time.monotonic() + timeout
        while not done(self.seen):
            if self.proc.poll() is not None and self.lines.empty():
                raise AssertionError(f"the example exited ({self.proc.returncode}) before {what}:\n{self.tail()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"no {what} within {timeout}s; stdout:\n" + "\n".join(self.seen[-40:])
                                     + f"\nstderr:\n{self.tail()}")
            try:
                self.seen.append(self.lines.get(timeout=0.5))
            except queue.Empty:
                pass

    def await_first_batch(self) -> None:
        """Read stdout until the example reports its first committed batch."""
        self.read_until(lambda seen: any(line.startswith("batch ") for line in seen), START_TIMEOUT_S,
                        "the first committed batch")

    def crash_after_first_batch(self) -> None:
        """SIGKILL the example's process group (a crash, not a shutdown) once its first batch committed."""
        try:
            self.await_first_batch()
        finally:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.kill()

    def tail(self, n: int = 4000) -> str:
        self.stderr.seek(0)
        return self.stderr.read().decode("utf-8", "replace")[-n:]

    def group_gone(self) -> bool:
        try:
            os.killpg(self.proc.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False

    def kill(self) -> None:
        """SIGTERM the example's process group, then SIGKILL whatever is left."""
        for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 10)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.proc.wait(wait)
                eventually(self.group_gone, "the example's process group to end", 1.0, interval=0.1)
            except (subprocess.TimeoutExpired, AssertionError):
                continue  # still there: the next signal
            break
        self.stderr.close()


def _values(url: str, app: str, namespace: str) -> dict:
    from dstream_exactly_once import open_store

    with open_store(url, app) as store:  # read-only
        return store.get_values(namespace)


def _planned_up_to(url: str, app: str) -> int:
    """The highest end offset of the newest batch in the offset log (-1: none yet)."""
    from dstream_exactly_once import open_store

    with open_store(url, app) as store:
        last = store.last_logged_batch_id()
        batch = store.get_batch(last) if last is not None else None
    return max((r.end for r in batch.ranges), default=-1) if batch is not None else -1


def pprint_counts(lines: list[str]) -> Counter:
    """Sum the ``(word, n)`` pairs that ``DStream.pprint()`` printed under each ``Time:`` header."""
    total: Counter = Counter()
    in_batch = False
    for line in lines:
        if line.startswith("Time: "):
            in_batch = True
        elif in_batch and PAIR.match(line):
            word, n = ast.literal_eval(line)
            total[word] += n
    return total


def test_direct_kafka_wordcount_prints_the_counts(kafka, topic_name):
    kafka.create_topic(topic_name, 2)
    example = Example(WORDCOUNT, kafka.bootstrap, topic_name)
    try:
        # auto.offset.reset is Spark 2.4's default (largest): produce only once the stream runs
        example.read_until(lambda seen: any(line.startswith("Time: ") for line in seen), START_TIMEOUT_S,
                           "first pprint header")
        text = ["to be or not to be", "that is the question", "to be"]
        kafka.produce(topic_name, text, partitions=2)
        expected = Counter(" ".join(text).split(" "))
        example.read_until(lambda seen: pprint_counts(seen) == expected
                           or sum(pprint_counts(seen).values()) > sum(expected.values()),
                           COUNT_TIMEOUT_S, "word counts")
    finally:
        example.kill()
    assert pprint_counts(example.seen) == expected == Counter(
        {"to": 3, "be": 3, "or": 1, "not": 1, "that": 1, "is": 1, "the": 1, "question": 1})


def test_direct_kafka_wordcount_usage():
    proc = subprocess.run([sys.executable, str(WORDCOUNT)], cwd=str(ROOT), env=example_env(),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 255  # sys.exit(-1)
    assert "Usage: direct_kafka_wordcount.py <broker_list> <topic>" in proc.stderr


def test_exactly_once_wordcount_survives_sigkill(kafka, topic_name, tmp_path):
    """The headline example, SIGKILLed mid-stream and restarted: the stored counts stay exact."""
    from dstream_exactly_once import open_store

    script = ROOT / "examples" / "exactly_once_wordcount.py"
    url = f"sqlite:///{tmp_path}/wc.db"
    kafka.create_topic(topic_name, 2)
    first = ["a b c"] * 300
    kafka.produce(topic_name, first, partitions=2)
    example = Example(script, kafka.bootstrap, topic_name, url, "wc")
    example.crash_after_first_batch()
    second = ["b c d"] * 200
    kafka.produce(topic_name, second, partitions=2)
    expected = Counter(" ".join(first + second).split())
    example = Example(script, kafka.bootstrap, topic_name, url, "wc")
    try:
        eventually(lambda: sum(_values(url, "wc", "words").values()) >= sum(expected.values()),
                   "every word counted", START_TIMEOUT_S, interval=1.0, proc=example.proc, detail=example.tail)
    finally:
        example.kill()
    with open_store(url, "wc") as store:
        assert Counter(store.get_values("words")) == expected


def test_exactly_once_wordcount_stops_gracefully_on_sigterm(kafka, topic_name, tmp_path):
    """SIGTERM to the driver (the Python process only, as a supervisor or Kubernetes sends it): the
    batch in flight finishes and commits, nothing is left pending, and the process exits 0."""
    from dstream_exactly_once import open_store

    script = ROOT / "examples" / "exactly_once_wordcount.py"
    url = f"sqlite:///{tmp_path}/wc.db"
    kafka.create_topic(topic_name, 2)
    kafka.produce(topic_name, ["a b c"] * 300, partitions=2)
    example = Example(script, kafka.bootstrap, topic_name, url, "wc")
    try:
        example.await_first_batch()
        kafka.produce(topic_name, ["d e"] * 200, partitions=2)
        # the signal comes once a batch of the new records (offsets from 150 on) is planned: it is in
        # flight, or just committed, when the driver is asked to stop
        eventually(lambda: _planned_up_to(url, "wc") > 150, "a batch of the new records to be planned",
                   COUNT_TIMEOUT_S, proc=example.proc, detail=example.tail)
        os.kill(example.proc.pid, signal.SIGTERM)
        code = example.proc.wait(COUNT_TIMEOUT_S)
        assert code == 0, example.tail()
    finally:
        example.kill()
    with open_store(url, "wc") as store:
        assert store.pending_batches() == []  # every logged batch was committed before the exit
        assert store.last_committed_batch_id() is not None
        heartbeat = store.load_heartbeat()
        assert heartbeat is not None and heartbeat.get("stopped") is True  # it stopped, it was not killed


def test_file_exactly_once_survives_sigkill_and_rotation(tmp_path):
    """The file example, SIGKILLed after its first batch, the log rotated by rename while it is down,
    restarted: every line counted once."""
    from dstream_exactly_once import open_store

    script = ROOT / "examples" / "file_exactly_once.py"
    url = f"sqlite:///{tmp_path}/files.db"
    log = tmp_path / "service.log"
    log.write_text("".join(f"line {i} x\n" for i in range(500)))
    example = Example(script, f"{tmp_path}/service.log*", url, "files")
    example.crash_after_first_batch()
    with open(log, "a") as f:
        f.write("".join(f"line {i} x\n" for i in range(500, 700)))
    log.rename(tmp_path / "service.log.1")
    log.write_text("".join(f"line {i} x\n" for i in range(700, 1000)))
    example = Example(script, f"{tmp_path}/service.log*", url, "files")
    try:
        eventually(lambda: _values(url, "files", "lines").get("lines", 0) >= 1000, "all 1000 lines counted",
                   START_TIMEOUT_S, interval=1.0, proc=example.proc, detail=example.tail)
    finally:
        example.kill()
    with open_store(url, "files") as store:
        assert store.get_values("lines") == {"lines": 1000, "words": 3000}


def test_file_exactly_once_usage():
    script = ROOT / "examples" / "file_exactly_once.py"
    proc = subprocess.run([sys.executable, str(script)], cwd=str(ROOT), env=example_env(),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 255
    assert "Usage: file_exactly_once.py <absolute path glob>" in proc.stderr
