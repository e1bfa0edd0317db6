"""``dstream-eo offsets export --format structured-streaming`` and its function."""

from __future__ import annotations

import json
import os

import pytest

from dstream_exactly_once import OffsetRange
from dstream_exactly_once.admin._export import export_offsets, structured_streaming_offsets
from dstream_exactly_once.cli import main
from dstream_exactly_once.errors import ConfigurationError
from dstream_exactly_once.stores import open_store
from dstream_exactly_once.stores._writes import PlannedBatch, Writes


def committed_store(path):
    url = f"sqlite:///{path}"
    with open_store(url, "dstream") as s:
        epoch = s.start_epoch()
        s.commit(epoch, PlannedBatch(0, 1, (OffsetRange("events", 0, 0, 42), OffsetRange("events", 1, 0, 7),
                                            OffsetRange("other", 0, 5, 9))), Writes())
    return url


def test_structured_streaming_offsets(tmp_path):
    url = committed_store(tmp_path / "s.db")
    with open_store(url, "dstream") as s:
        assert structured_streaming_offsets(s) == {"events": {"0": 42, "1": 7}, "other": {"0": 9}}
        assert json.loads(export_offsets(s)) == {"events": {"0": 42, "1": 7}, "other": {"0": 9}}
        with pytest.raises(ConfigurationError, match=r"export format must be one of \['structured-streaming'\], "
                                                     r"got 'csv'"):
            export_offsets(s, "csv")


def test_cli_export(tmp_path, capsys):
    url = committed_store(tmp_path / "s.db")
    assert main(["offsets", "export", "--store", url, "--app", "dstream", "--format", "structured-streaming"]) == 0
    assert json.loads(capsys.readouterr().out) == {"events": {"0": 42, "1": 7}, "other": {"0": 9}}


def test_cli_export_nothing_committed_writes_nothing(tmp_path, capsys):
    url = committed_store(tmp_path / "s.db")
    with open_store(url, "started-only") as s:
        s.start_epoch()
    before = open(tmp_path / "s.db", "rb").read()
    assert main(["offsets", "export", "--store", url, "--app", "started-only"]) == 1
    assert "application 'started-only' has no committed Kafka offsets" in capsys.readouterr().err
    assert open(tmp_path / "s.db", "rb").read() == before
    assert main(["offsets", "export", "--store", f"sqlite:///{tmp_path}/none.db", "--app", "a"]) != 0
    assert not os.path.exists(tmp_path / "none.db")
