"""StreamingContext.getOrCreate with the direct stream on a real broker and a local[2] StreamingContext.

Functions handed to checkpointed DStreams are module-level: Spark pickles them into the checkpoint.
"""

from __future__ import annotations

import subprocess
import threading

import pytest
from pyspark.streaming import StreamingContext

from dstream_exactly_once import KafkaUtils, TopicAndPartition
from dstream_exactly_once.stores import Writes, open_store

from ..helpers import eventually
from .streams import run_until

_LOCK = threading.Lock()
_STATE: dict = {}
_WINDOW: dict = {}
_RANGES: list = []  # (batch time in ms, ranges) of every batch that ran, in both contexts


def _update(new, old):
    return sum(new) + (old or 0)


def _keep_state(rdd):
    state = dict(rdd.collect())
    with _LOCK:
        _STATE.clear()
        _STATE.update(state)


def _plus(a, b):
    return a + b


def _minus(a, b):
    return a - b


def _keep_window(rdd):
    window = {k: v for k, v in rdd.collect() if v}
    with _LOCK:
        _WINDOW.clear()
        _WINDOW.update(window)


def _keep_ranges(t, rdd):
    with _LOCK:
        _RANGES.append((int(round(t.timestamp() * 1000)), rdd.offsetRanges()))


def _state():
    with _LOCK:
        return dict(_STATE)


def _window():
    with _LOCK:
        return dict(_WINDOW)


def _words(kafka, topic, lines):
    kafka.produce(topic, lines, partitions=2)
    counts: dict = {}
    for line in lines:
        for w in line.split():
            counts[w] = counts.get(w, 0) + 1
    return counts


def _add(a, b):
    return {k: a.get(k, 0) + b.get(k, 0) for k in set(a) | set(b)}


def test_get_or_create_recovers_the_direct_stream_and_its_state_in_the_same_process(kafka, topic_name, sc,
                                                                                     tmp_path):
    """stop(False) then getOrCreate on the same directory (Spark 2.4's own recovery test): the
    updateStateByKey state and a reduceByKeyAndWindow (with inverse) window come back, batches
    continue from the checkpointed offsets, every record is counted once."""
    kafka.create_topic(topic_name, 2)
    first = _words(kafka, topic_name, [f"a{i % 3} b{i % 2}" for i in range(60)])
    ckpt = str(tmp_path / "ckpt")
    created = []
    _STATE.clear()
    _WINDOW.clear()
    _RANGES.clear()

    def create():
        ssc = StreamingContext(sc, 2)
        stream = KafkaUtils.createDirectStream(ssc, [topic_name], {"bootstrap.servers": kafka.bootstrap,
                                                                    "auto.offset.reset": "smallest"})
        stream.foreachRDD(_keep_ranges)
        words = stream.flatMap(lambda kv: [(w, 1) for w in kv[1].split()])
        words.updateStateByKey(_update, numPartitions=1).foreachRDD(_keep_state)
        # the window spans the whole test, so it equals the running count
        words.reduceByKeyAndWindow(_plus, _minus, 600, 2, numPartitions=1).foreachRDD(_keep_window)
        created.append(ssc)
        return ssc

    ssc = StreamingContext.getOrCreate(ckpt, create)
    assert len(created) == 1
    # run_until ends with ssc.stop(stopSparkContext=False)
    run_until(ssc, lambda: _state() == first and _window() == first, timeout=180)
    before = list(_RANGES)

    second = _words(kafka, topic_name, [f"a{i % 3} c{i % 4}" for i in range(40)])
    expected = _add(first, second)
    ssc = StreamingContext.getOrCreate(ckpt, create)
    assert len(created) == 1, "getOrCreate must recover the context, not call create() again"
    try:
        run_until(ssc, lambda: _state() == expected and _window() == expected, timeout=180)
    except AssertionError as exc:
        raise AssertionError(f"{exc}: state {_state()}, window {_window()}, expected {expected}") from None

    # each batch time has one set of ranges, also when Spark regenerated it after the recovery
    by_time: dict = {}
    for t, ranges in _RANGES:
        assert by_time.setdefault(t, ranges) == ranges, f"batch {t} regenerated with other ranges"
    # the distinct batches' ranges tile each partition's log: nothing read twice, nothing skipped
    ends = {TopicAndPartition(topic_name, p): 0 for p in range(2)}
    for t in sorted(by_time):
        for r in by_time[t]:
            assert r.fromOffset == ends[r.topicPartition()], f"batch {t}: {r} does not start at the previous end"
            ends[r.topicPartition()] = r.untilOffset
    assert sum(ends.values()) == 100
    assert len(before) < len(_RANGES)


def _eo_output(batch, rdd):
    w = Writes()
    for word, n in rdd.flatMap(lambda kv: kv[1].split()).countByValue().items():
        w.incr("words", word, n)
    return w


def test_get_or_create_refuses_an_exactly_once_stream_and_writes_nothing(kafka, topic_name, sc, tmp_path):
    """The store is an exactly-once stream's source of truth: recovery is refused with what to do,
    before anything runs; the store stays byte-identical."""
    kafka.create_topic(topic_name, 2)
    expected = _words(kafka, topic_name, [f"x{i % 3}" for i in range(30)])
    db = tmp_path / "eo.db"
    url = f"sqlite:///{db}"
    ckpt = str(tmp_path / "ckpt")

    def create():
        ssc = StreamingContext(sc, 1)
        stream = KafkaUtils.createExactlyOnceStream(ssc, {"bootstrap.servers": kafka.bootstrap,
                                                          "auto.offset.reset": "earliest"}, [topic_name],
                                                    store=url, app_id="eo")
        stream.commit_each_batch(_eo_output)
        return ssc

    ssc = StreamingContext.getOrCreate(ckpt, create)
    store = open_store(url, "eo")
    run_until(ssc, lambda: store.get_values("words") == expected)
    store.close()
    snapshot = db.read_bytes()

    with pytest.raises(Exception) as caught:
        StreamingContext.getOrCreate(ckpt, create)
    text = str(caught.value)
    assert "StreamingContext.getOrCreate cannot recover this ExactlyOnceDStream from a Spark checkpoint" in text
    assert "ssc = create()" in text and "resumes from the store's committed positions" in text
    assert "is closed" not in text
    assert db.read_bytes() == snapshot

    # what the message says works: a new context from the setup function resumes from the store
    more = _words(kafka, topic_name, [f"x{i % 3}" for i in range(9)])
    ssc = create()
    store = open_store(url, "eo")
    run_until(ssc, lambda: store.get_values("words") == _add(expected, more))
    assert store.get_values("words") == _add(expected, more)
    store.close()



def _start_driver(kafka, topic, ckpt, out, total):
    import os
    import subprocess
    import sys

    from .faults import ROOT

    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    log = open(os.path.join(out, "driver.log"), "a")
    return subprocess.Popen([sys.executable, "-m", "tests.integration.checkpoint_driver", kafka.bootstrap, topic,
                             ckpt, out, str(total)], stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env=env,
                            start_new_session=True)


def test_get_or_create_recovers_the_direct_stream_after_a_sigkill_of_the_driver(kafka, topic_name, tmp_path):
    """A new driver process recovers from the checkpoint of a SIGKILLed one: the checkpointed
    batches are regenerated with their original ranges, the word count state ends exact."""
    import json

    from .faults import kill_group

    kafka.create_topic(topic_name, 3)
    lines = [f"w{i % 5} v{i % 2}" for i in range(450)]
    kafka.produce(topic_name, lines, partitions=3)
    expected: dict = {}
    for line in lines:
        for w in line.split():
            expected[w] = expected.get(w, 0) + 1
    ckpt, out = str(tmp_path / "ckpt"), tmp_path / "out"
    out.mkdir()
    ranges_log = out / "ranges.log"

    def batches_logged():
        if not ranges_log.exists():
            return []
        return [json.loads(x) for x in ranges_log.read_text().splitlines() if x.endswith("}")]

    first = _start_driver(kafka, topic_name, ckpt, str(out), 900)
    try:
        eventually(lambda: len([b for b in batches_logged() if b["ranges"]]) >= 3, "three batches", 240, proc=first)
    finally:
        kill_group(first)
    killed_pid = first.pid
    assert not (out / "state.json").exists() or sum(json.loads((out / "state.json").read_text()).values()) < 900

    second = _start_driver(kafka, topic_name, ckpt, str(out), 900)
    try:
        try:
            second.wait(300)  # it exits once every record is counted
        except subprocess.TimeoutExpired:
            pass  # the log below says what is missing
    finally:
        kill_group(second)
    driver_log = (out / "driver.log").read_text()
    assert "DONE 900" in driver_log, driver_log[-4000:]
    assert driver_log.count("CREATED") == 1, "the second driver must recover, not call create()"
    assert json.loads((out / "state.json").read_text()) == expected

    logged = batches_logged()
    before = {b["time"]: b["ranges"] for b in logged if b["pid"] == killed_pid}
    after = {b["time"]: b["ranges"] for b in logged if b["pid"] != killed_pid}
    regenerated = sorted(set(before) & set(after))
    assert regenerated, "no checkpointed batch was regenerated after the kill"
    for t in regenerated:
        assert after[t] == before[t], f"batch {t} was regenerated with other ranges"
    # the distinct batches tile each partition's log [0, 150): nothing read twice or skipped
    ends = {p: 0 for p in range(3)}
    for t in sorted({**before, **after}):
        for _topic, p, start, until in {**before, **after}[t]:
            assert start == ends[p], f"batch {t}: partition {p} starts at {start}, not at {ends[p]}"
            ends[p] = until
    assert ends == {p: 150 for p in range(3)}
