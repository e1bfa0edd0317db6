"""``dstream-eo retire`` on a SQLite store: a dry run lists what would go, ``--execute`` deletes the
app and nothing else, a live driver or an unknown app is refused with nothing written."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any, Dict

from dstream_exactly_once.kafka._offsets import OffsetRange
from dstream_exactly_once.stores import PlannedBatch, Writes, open_store

from ..helpers import run_cli as cli


def _store(tmp_path: Path, heartbeat_time: float = 1.0) -> str:
    url = f"sqlite:///{tmp_path}/apps.db"
    for app in ("gone", "kept"):
        with open_store(url, app) as s:
            epoch = s.start_epoch()
            for i in range(2):
                b = PlannedBatch(i, 1000 * (i + 1), (OffsetRange("t", 0, 5 * i, 5 * i + 5),))
                s.log_batch(epoch, b)
                s.commit(epoch, b, Writes().incr("sums", "total", 5).put_batch_rows("rows", [i]).add_label(f"l{i}"))
            s.heartbeat(epoch, {"epoch": epoch, "host": "h", "pid": 7, "last_batch": 1, "time": heartbeat_time,
                                "interval_s": 10})
    return url


def _state(url: str) -> Dict[str, Any]:
    out = {}
    for app in ("gone", "kept"):
        with open_store(url, app) as s:
            out[app] = (s.app_inventory(), s.current_epoch(), s.get_values("sums"))
    return out


def test_dry_run_lists_every_kind_with_counts_and_writes_nothing(tmp_path: Path, capsys: Any) -> None:
    url = _store(tmp_path)
    before = _state(url)
    code, out, err = cli(capsys, "retire", "--store", url, "--app", "gone")
    assert code == 0, err
    assert out.startswith("DRY RUN for app gone") and "nothing written; add --execute" in out
    table = out.splitlines()[3:]
    assert table[0].split() == ["KIND", "NAMESPACE", "COUNT"]
    rows = {tuple(re.split(r"\s{2,}", line.strip())) for line in table[1:]}
    for row in [("epoch", "-", "1"), ("offset log", "-", "2"), ("commit log", "-", "2"), ("values", "sums", "1"),
                ("batch rows", "rows", "2"), ("labels", "-", "2"), ("heartbeat", "-", "1")]:
        assert row in rows, (row, out)
    assert _state(url) == before


def test_execute_deletes_the_app_and_nothing_of_another(tmp_path: Path, capsys: Any) -> None:
    url = _store(tmp_path)
    kept = _state(url)["kept"]
    code, out, err = cli(capsys, "retire", "--store", url, "--app", "gone", "--execute", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["dry_run"] is False and doc["epoch"] == 2 and doc["total"] > 10
    assert {"kind": "labels", "namespace": None, "count": 2} in doc["items"]
    state = _state(url)
    assert state["gone"] == ([], 0, {}) and state["kept"] == kept
    with open_store(url, "kept") as s:
        assert s.list_apps() == ["kept"]
    # retiring it again: the app is gone, and the error names the apps there
    code, out, err = cli(capsys, "retire", "--store", url, "--app", "gone", "--execute")
    assert code == 1 and out == "" and "'gone' not found" in err and "kept" in err


def test_a_live_driver_refuses_unless_forced(tmp_path: Path, capsys: Any) -> None:
    url = _store(tmp_path, heartbeat_time=time.time())
    before = _state(url)
    code, out, err = cli(capsys, "retire", "--store", url, "--app", "gone", "--execute")
    assert code == 3 and "refusing to retire app 'gone': a driver is live" in err and "--force" in err
    assert _state(url) == before
    code, out, err = cli(capsys, "retire", "--store", url, "--app", "gone")  # a dry run says it is live
    assert code == 0 and "driver: LIVE" in out
    code, out, err = cli(capsys, "retire", "--store", url, "--app", "gone", "--execute", "--force")
    assert code == 0, err
    assert out.startswith("retired app gone") and _state(url)["gone"] == ([], 0, {})


def test_a_missing_store_file_is_refused_and_not_created(tmp_path: Path, capsys: Any) -> None:
    db = tmp_path / "none.db"
    code, out, err = cli(capsys, "retire", "--store", f"sqlite:///{db}", "--app", "a", "--execute")
    assert code == 1 and "does not exist" in err and not db.exists()


def test_help_says_dry_run_by_default(capsys: Any) -> None:
    code, out, _ = cli(capsys, "retire", "--help")
    assert code == 0 and "Dry run by default" in out and "--execute" in out and "--force" in out
