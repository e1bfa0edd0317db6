"""No local service outlives its owner: a pytest session holding every ``deo_*`` service fixture, or a
user's script holding LocalKafka and LocalPostgres (both fork children), killed by SIGKILL or SIGTERM,
leaves no process of any service's group and no data directory behind within seconds."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Set

import pytest

from dstream_exactly_once.testing._reaper import family, start_time

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
#: seconds the reaper gets once the owner is dead (the machine running the suite may be loaded)
GONE_WITHIN_S = 15.0

HOLDER = '''
import json, os, time


def dump(services, dirs):
    from dstream_exactly_once.testing._reaper import reaper_pid

    path = os.environ["DEO_HOLD_FILE"]
    with open(path + ".tmp", "w") as f:
        json.dump({"groups": services, "dirs": [str(d) for d in dirs], "reaper": reaper_pid()}, f)
    os.rename(path + ".tmp", path)
    time.sleep(900)
'''

PYTEST_HOLDER = HOLDER + '''

def test_hold(deo_kafka, deo_redis, deo_redis_cluster, deo_postgres, deo_spark_cluster, deo_spark_connect):
    nodes = list(deo_redis_cluster._nodes.values())
    spark = [deo_spark_cluster._master, *deo_spark_cluster._workers]
    services = {"kafka": [deo_kafka._proc.proc.pid], "redis": [deo_redis._proc.proc.pid],
                "redis-cluster": [n.proc.pid for n in nodes], "postgres": [deo_postgres._proc.proc.pid],
                "spark": [p.proc.pid for p in spark], "spark-connect": [deo_spark_connect._proc.proc.pid]}
    dump(services, [deo_kafka._proc.workdir, deo_redis._proc.workdir, deo_redis_cluster._root,
                    deo_postgres._proc.workdir, *(p.workdir for p in spark), deo_spark_connect._proc.workdir])
'''

SCRIPT_HOLDER = HOLDER + '''

from dstream_exactly_once.testing import LocalKafka, LocalPostgres

kafka, pg = LocalKafka().start(), LocalPostgres().start()
dump({"kafka": [kafka._proc.proc.pid], "postgres": [pg._proc.proc.pid]}, [kafka._proc.workdir, pg._proc.workdir])
'''


def _pgid(pid: int) -> int:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return -1
    return int(stat[stat.rindex(")") + 2:].split()[2])


def _members(groups: Set[int]) -> Dict[int, str]:
    """``{pid: start time}`` of every process of ``groups`` and its descendants (PostgreSQL's backends
    lead groups of their own), as the reaper finds them."""
    return {pid: start_time(pid) for pid in family(groups) if _state(pid) != "Z"}


def _survivors(before: Dict[int, str]) -> Dict[int, str]:
    """The processes of ``before`` still running (same PID and start time, not a zombie)."""
    out = {}
    for pid, started in before.items():
        if start_time(pid) == started and _state(pid) != "Z":
            try:
                out[pid] = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:120]
            except OSError:
                continue
    return out


def _hold_and_kill(argv: List[str], cwd: Path, hold: Path, sig: int) -> None:
    env = {**os.environ, "DEO_HOLD_FILE": str(hold), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    owner = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=open(cwd / "err.log", "wb"),
                             start_new_session=True)
    groups: Set[int] = set()
    before: Dict[int, str] = {}
    try:
        deadline = time.monotonic() + 400
        while not hold.exists():
            assert owner.poll() is None, f"the owner exited ({owner.returncode}): {(cwd / 'err.log').read_text()}"
            assert time.monotonic() < deadline, "the services did not start in time"
            time.sleep(0.5)
        info = json.loads(hold.read_text())
        services: Dict[str, List[int]] = info["groups"]
        groups = {pid for pids in services.values() for pid in pids}
        assert all(_pgid(pid) == pid for pid in groups), "each service leads its own process group"
        before = _members(groups)
        # the forking service really forked: PostgreSQL's checkpointer, WAL writer, … (groups of their own)
        assert any(_pgid(p) not in groups for p in before), before
        dirs = [Path(d) for d in info["dirs"]]
        assert all(d.is_dir() for d in dirs)

        os.kill(owner.pid, sig)  # the owner only: its group (the services are not in it) is left alone
        owner.wait(30)
        killed_at = time.monotonic()
        while time.monotonic() - killed_at < GONE_WITHIN_S:
            if not _survivors(before) and not any(d.exists() for d in dirs) and not _alive([info["reaper"]]):
                break
            time.sleep(0.2)
        left = _survivors(before)
        assert not left, f"survivors {time.monotonic() - killed_at:.1f}s after the owner died: {left}"
        assert not [d for d in dirs if d.exists()], "data dirs left behind"
        assert not _alive([info["reaper"]]), "the reaper did not exit"
    finally:
        if owner.poll() is None:
            os.killpg(owner.pid, signal.SIGKILL)
            owner.wait(30)
        for pid in _survivors(before):  # never leave ours running, whatever the test found
            os.kill(pid, signal.SIGKILL)


def _alive(pids: List[int]) -> List[int]:
    return [p for p in pids if p and Path(f"/proc/{p}").exists() and "Z" != _state(p)]


def _state(pid: int) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "Z"
    return stat[stat.rindex(")") + 2:].split()[0]


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_a_killed_pytest_session_leaves_no_service(tmp_path: Path, sig: int) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "test_hold.py").write_text(PYTEST_HOLDER)
    _hold_and_kill([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
                    "-p", "dstream_exactly_once.testing.pytest_plugin", "test_hold.py"],
                   project, tmp_path / "hold.json", sig)


def test_a_killed_script_leaves_no_broker_or_cluster(tmp_path: Path) -> None:
    (tmp_path / "script.py").write_text(SCRIPT_HOLDER)
    _hold_and_kill([sys.executable, "script.py"], tmp_path, tmp_path / "hold.json", signal.SIGKILL)
