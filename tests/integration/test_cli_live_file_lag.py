"""``dstream-eo offsets show`` of a file app after its driver was SIGKILLed: the lag is the file's size
now (lines appended after the kill included), and the driver is shown DEAD, not LIVE, since its
heartbeat names this host and a PID that no longer runs (a real exactly-once file stream in a child
driver, Spark local mode)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from dstream_exactly_once import open_store

from ..helpers import run_cli
from .faults import ROOT, kill_group

pytestmark = pytest.mark.slow

LINES = 400


def _count(url: str, app: str) -> int:
    with open_store(url, app) as store:
        return int(store.get_value("numbers", "count") or 0)


def test_show_after_a_sigkill_reports_the_live_lag_and_a_dead_driver(tmp_path, capsys):
    logs = tmp_path / "logs"
    logs.mkdir()
    log = logs / "service.log"
    log.write_text("".join(f"{i}\n" for i in range(1, LINES + 1)))
    read_size = log.stat().st_size
    url, app = f"sqlite:///{tmp_path}/store.db", "live-lag"
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    with open(tmp_path / "driver.err", "wb") as err:
        driver = subprocess.Popen([sys.executable, "-m", "tests.integration.file_faults_proc", "driver",
                                   f"{logs}/*.log", url, app, str(10 * LINES)], cwd=ROOT, env=env,
                                  stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while not (tmp_path / "store.db").exists() or _count(url, app) < LINES:
            assert driver.poll() is None, (tmp_path / "driver.err").read_text()[-3000:]
            assert time.monotonic() < deadline, "the driver did not read the file in time"
            time.sleep(0.5)
        with open_store(url, app) as store:  # a heartbeat written after the last commit
            deadline = time.monotonic() + 30
            while not (store.load_heartbeat() or {}).get("pid"):
                assert time.monotonic() < deadline, "no heartbeat"
                time.sleep(0.2)
            beat = store.load_heartbeat()
        assert beat["pid"] == driver.pid
    finally:
        kill_group(driver)  # SIGKILL: no last "stopped" heartbeat

    with open(log, "a") as f:  # written after the driver died
        f.write("".join(f"{i}\n" for i in range(LINES + 1, LINES + 101)))
    appended = log.stat().st_size - read_size

    code, out, err = run_cli(capsys, "offsets", "show", "--store", url, "--app", app, "--json")
    assert code == 0, err
    doc = json.loads(out)
    (row,) = doc["partitions"]
    assert (row["position"], row["latest"], row["lag"]) == (read_size, read_size + appended, appended)
    assert row["live"] is True and row["unit"] == "byte"
    assert doc["driver"]["dead"] is True and doc["driver"]["live"] is False

    code, out, err = run_cli(capsys, "offsets", "show", "--store", url, "--app", app)
    assert code == 0, err
    driver_line = out.splitlines()[1]
    assert driver_line.startswith(f"driver: DEAD (pid {driver.pid} is not running on this host)"), out
    assert "LIVE" not in out
    header, values = out.splitlines()[2].split(), out.splitlines()[3].split()
    assert header[:5] == ["KEY", "BYTE", "EARLIEST", "LATEST", "LAG"]
    assert values[1:5] == [str(read_size), "0", str(read_size + appended), str(appended)]
    assert "their size now, read on this host" in out

    # known dead: an operator action needs no --force (a dry run shows the same driver line)
    code, out, err = run_cli(capsys, "offsets", "reset", "--store", url, "--app", app, "--to-latest")
    assert code == 0 and "driver: DEAD" in out, err
