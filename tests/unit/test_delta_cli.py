"""``dstream-eo delta status|orphans`` on a real Delta table written by the sink."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from dstream_exactly_once.sinks.delta import DeltaSink  # noqa: E402
from dstream_exactly_once.stores import open_store  # noqa: E402

from ..helpers import run_cli as cli  # noqa: E402
from .test_delta_sink import SCHEMA, batch, rows, run_batch, table_ns  # noqa: E402


@pytest.fixture
def table(tmp_path, monkeypatch):
    """A table with batches 0 and 1 of app ``orders`` and the files of a crashed attempt of batch 2."""
    uri = str(tmp_path / "table")
    sink = DeltaSink(uri, schema=SCHEMA)
    with open_store(f"sqlite:///{tmp_path}/state.db", "orders") as store:
        epoch = store.start_epoch()
        run_batch(sink, store, epoch, batch(0, 0, 4), rows(0, 4))
        run_batch(sink, store, epoch, batch(1, 4, 9), rows(4, 9))
        b = batch(2, 9, 12)
        store.log_batch(epoch, b)

        def crash(*args: Any, **kwargs: Any) -> None:
            raise KeyboardInterrupt("the driver dies")

        monkeypatch.setattr(sink.target, "commit", crash)
        with pytest.raises(KeyboardInterrupt):
            sink.write_batch(store, epoch, b, rows(9, 12))
    return uri


def test_status_shows_the_last_batch_and_its_positions(table, capsys):
    code, out, err = cli(capsys, "delta", "status", "--table", table)
    assert code == 0, err
    assert "last batch 1 of application transaction 'orders'" in out and "5 rows" in out
    assert "events/0" in out and " 4 " in out and "9" in out
    code, out, _ = cli(capsys, "delta", "status", "--table", table, "--app-id", "other", "--json")
    assert code == 0 and json.loads(out)["last_batch"] is None
    code, out, _ = cli(capsys, "delta", "status", "--table", table, "--json")
    doc = json.loads(out)["last_batch"]
    assert doc["batch_id"] == 1 and doc["transaction_version"] == 1 and doc["positions"][0]["end"] == 9


def test_orphans_is_a_dry_run_unless_apply(table, capsys):
    code, out, _ = cli(capsys, "delta", "orphans", "--table", table, "--min-age", "0", "--json")
    found = json.loads(out)["unreferenced"]
    assert code == 0 and len(found) == 2 and not any(f["removed"] for f in found)
    assert all(os.path.exists(os.path.join(table, f["path"])) for f in found)
    code, out, _ = cli(capsys, "delta", "orphans", "--table", table)  # younger than the default hour
    assert code == 0 and "0 unreferenced" in out
    code, out, _ = cli(capsys, "delta", "orphans", "--table", table, "--min-age", "0", "--apply")
    assert code == 0 and "REMOVED" in out
    assert not any(os.path.exists(os.path.join(table, f["path"])) for f in found)
    assert table_ns(table) == list(range(9))  # the committed files are all there
    code, out, _ = cli(capsys, "delta", "orphans", "--table", table, "--min-age", "0")
    assert "0 unreferenced" in out


def test_bad_input_is_refused(tmp_path, capsys):
    code, _, err = cli(capsys, "delta", "orphans", "--table", str(tmp_path), "--min-age", "-1")
    assert code == 2 and "--min-age" in err
    code, _, err = cli(capsys, "delta", "status", "--table", str(tmp_path / "none"))
    assert code == 2 and "is not a Delta table" in err and not (tmp_path / "none").exists()
