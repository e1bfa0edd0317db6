"""A driver's heartbeat is judged LIVE only while its process may run: a heartbeat from this host whose
PID (and start time) no longer runs here is DEAD at once, not live for the rest of the live window;
from another host, or another PID namespace, only the heartbeat's age tells."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

from dstream_exactly_once.engine._heartbeat import Heartbeat, driver_status, known_dead
from dstream_exactly_once.stores import open_store

from ..helpers import run_cli


def _exited_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_heartbeat_records_where_its_process_can_be_looked_up() -> None:
    doc = Heartbeat(store=None, epoch=1, interval_s=1.0).doc(3)  # type: ignore[arg-type]
    assert (doc["host"], doc["pid"]) == (socket.gethostname(), os.getpid())
    assert doc["pid_ns"] == os.readlink("/proc/self/ns/pid") and isinstance(doc["started"], int)
    assert not known_dead(doc)  # this very process


def test_known_dead_only_when_this_host_can_tell() -> None:
    here = Heartbeat(store=None, epoch=1, interval_s=1.0).doc(0)  # type: ignore[arg-type]
    gone = _exited_pid()
    assert known_dead({**here, "pid": gone})
    assert known_dead({**here, "started": here["started"] + 1})  # the PID was reused by another process
    assert known_dead({"host": here["host"], "pid": gone})  # a heartbeat without pid_ns / started
    assert not known_dead({**here, "pid": gone, "host": "another-host"})
    assert not known_dead({**here, "pid": gone, "pid_ns": "pid:[1]"})  # another container's PIDs
    assert not known_dead({**here, "pid": None}) and not known_dead(None)


def test_show_marks_a_dead_driver_dead_and_operator_actions_go_ahead(tmp_path, capsys) -> None:
    url = f"sqlite:///{tmp_path}/hb.db"
    with open_store(url, "app") as store:
        epoch = store.start_epoch()
        store.reset_positions(epoch, {"events/0": 5})
        beat = Heartbeat(store, epoch, 10.0)
        beat.pid = _exited_pid()
        assert beat.beat(7, force=True)
        status = driver_status(store)
        assert status["dead"] and not status["live"] and status["age_s"] < 60  # fresh, yet not live
    code, out, err = run_cli(capsys, "offsets", "show", "--store", url, "--app", "app")
    assert code == 0, err
    assert out.splitlines()[1].startswith(f"driver: DEAD (pid {beat.pid} is not running on this host) - epoch 1")
    code, out, err = run_cli(capsys, "retire", "--store", url, "--app", "app", "--execute")
    assert code == 0, err  # no refusal, no --force needed: the driver is known dead

    with open_store(url, "other") as store:  # the same heartbeat from another host: live by its age
        epoch = store.start_epoch()
        store.reset_positions(epoch, {"events/0": 5})
        beat = Heartbeat(store, epoch, 10.0)
        beat.pid, beat.host = _exited_pid(), "another-host"
        assert beat.beat(7, force=True)
        time.sleep(0.01)
    code, out, err = run_cli(capsys, "retire", "--store", url, "--app", "other", "--execute")
    assert code == 3 and "is live" in err
