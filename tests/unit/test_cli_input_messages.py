"""Operator commands say what is wrong with their input: a missing store file, an unknown app (naming
the apps the store holds), an empty or malformed ``--from-file`` (naming the file and the line), each
with its own message and the documented exit status, and nothing written."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict

import pytest

from dstream_exactly_once.kafka._offsets import OffsetRange
from dstream_exactly_once.stores import PlannedBatch, Writes, open_store

from ..helpers import run_cli as cli


def _snapshot(directory: Path) -> Dict[str, bytes]:
    """The files and their bytes (a read-only connection may leave an empty write-ahead log and the
    shared-memory index behind; neither holds data)."""
    out = {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if not p.name.endswith("-shm")}
    return {name: data for name, data in out.items() if data or not name.endswith("-wal")}


@pytest.fixture
def store(tmp_path: Path) -> str:
    """A SQLite store holding app ``orders`` with one committed and one pending batch of a Kafka source."""
    url = f"sqlite:///{tmp_path / 'state.db'}"
    with open_store(url, "orders") as st:
        epoch = st.start_epoch()
        b0 = PlannedBatch(0, 1000, (OffsetRange("t", 0, 0, 10),))
        st.log_batch(epoch, b0)
        st.commit(epoch, b0, Writes().incr("n", "c", 1))
        st.log_batch(epoch, PlannedBatch(1, 2000, (OffsetRange("t", 0, 10, 20),)))
    return url


def test_batches_skip_on_a_missing_store_file_names_the_file(capsys: Any, tmp_path: Path) -> None:
    missing = tmp_path / "sub" / "typo.db"
    code, _, err = cli(capsys, "batches", "skip", "--store", f"sqlite:///{missing}", "--app", "orders",
                       "--batch", "1", "--execute")
    assert code == 1
    assert f"the SQLite file '{missing}' does not exist" in err and "offset log" not in err, err
    assert list(tmp_path.iterdir()) == []


def test_batches_skip_of_an_unknown_app_names_the_apps_there(capsys: Any, store: str, tmp_path: Path) -> None:
    before = _snapshot(tmp_path)
    code, _, err = cli(capsys, "batches", "skip", "--store", store, "--app", "ordres", "--batch", "1", "--execute")
    assert code == 1
    assert "app 'ordres' not found" in err and "apps there: orders" in err and "offset log" not in err, err
    assert _snapshot(tmp_path) == before


@pytest.mark.parametrize("content, expected", [
    ("", "--from-file {path} holds no positions (the file is empty)"),
    ("# only a comment\n\n", "--from-file {path} holds no positions (only blank lines and # comments)"),
    ("t,0,5\nt,zero,5\n", "--from-file {path}:2: expected topic,partition,offset or key,position, got 't,zero,5'"),
    ("t,0,5,6\n", "--from-file {path}:1: expected topic,partition,offset or key,position"),
    ("t,0,-1\n", "--from-file {path}:1: position of t/0 must be >= 0, got -1"),
    ("t,0,1\n\nt,0,2\n", "--from-file {path}:3: t/0 is named twice (first on line 1)"),
])
def test_offsets_reset_names_an_empty_or_malformed_file(capsys: Any, store: str, tmp_path: Path, content: str,
                                                        expected: str) -> None:
    path = tmp_path / "positions.csv"
    path.write_text(content)
    before = _snapshot(tmp_path)
    code, _, err = cli(capsys, "offsets", "reset", "--store", store, "--app", "orders", "--from-file", str(path),
                       "--execute")
    assert code == 2, err
    assert expected.format(path=path) in err, err
    assert "has no positions" not in err
    assert _snapshot(tmp_path) == before


def test_offsets_reset_of_a_missing_file_is_a_usage_error(capsys: Any, store: str, tmp_path: Path) -> None:
    code, _, err = cli(capsys, "offsets", "reset", "--store", store, "--app", "orders", "--from-file",
                       str(tmp_path / "nope.csv"))
    assert code == 2 and f"cannot read --from-file '{tmp_path / 'nope.csv'}'" in err, err


def test_offsets_commands_name_the_apps_of_the_store_for_a_typo(capsys: Any, store: str) -> None:
    for argv in (("offsets", "show"), ("offsets", "export"), ("batches",), ("retire",)):
        code, _, err = cli(capsys, *argv, "--store", store, "--app", "ordres")
        assert code == 1 and "app 'ordres' not found" in err and "apps there: orders" in err, (argv, err)
