"""The CLI reaches a source only through hooks resolved by range kind: the broker is the live log of
kind ``"kafka"`` (here a double registered in its place, so the whole ``offsets`` path runs without
a broker; the real one is in tests/integration/test_operators_cli.py), and a file position keeps its
identity document through ``FileRange.reanchor_position``."""

from __future__ import annotations

import json
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import pytest

from dstream_exactly_once.core import _live_log as live_log
from dstream_exactly_once.core._live_log import LiveLog, live_log_kinds, open_live_log, register_live_log
from dstream_exactly_once.errors import ConfigurationError
from dstream_exactly_once.files._identity import content_hash
from dstream_exactly_once.files._ranges import FileRange

from ..helpers import run_cli as cli
from . import test_cli

one_error_line, snapshot = test_cli.one_error_line, test_cli.snapshot
kafka_db = test_cli.kafka_db  # the fixture: app1 with positions events/0 = 5, events/1 = 7


class _Log(LiveLog):
    """Topic ``events`` with partitions 0..2, offsets [2, 20); a by-time look-up that fails."""

    kind = "kafka"
    opened: List[Dict[str, object]] = []
    closed = 0

    def __init__(self, settings: Dict[str, object]) -> None:
        type(self).opened.append(dict(settings))

    @property
    def where(self) -> str:
        return "double:9092"

    def stream_partitions(self, groups: Sequence[str]) -> Dict[str, Dict[int, str]]:
        unknown = sorted(set(groups) - {"events"})
        if unknown:
            raise ConfigurationError(f"unknown topic(s) {unknown} at {self.where}")
        return {g: {p: f"{g}/{p}" for p in range(3)} for g in groups}

    def ends(self, keys: Sequence[str]) -> Tuple[Dict[str, int], Dict[str, int]]:
        return {k: 2 for k in keys}, {k: 20 for k in keys}

    def positions_at(self, keys: Sequence[str], time_ms: int) -> Dict[str, Optional[int]]:
        raise TimeoutError("no answer")

    def close(self) -> None:
        type(self).closed += 1


@pytest.fixture
def broker() -> Iterator[type]:
    real = live_log._OPENERS["kafka"]
    _Log.opened, _Log.closed = [], 0
    register_live_log("kafka", _Log)
    try:
        yield _Log
    finally:
        register_live_log("kafka", real)


def test_the_kafka_package_registers_its_live_log_and_it_checks_its_settings():
    assert "kafka" in live_log_kinds()
    with pytest.raises(ConfigurationError, match="enable.auto.commit"):
        open_live_log("kafka", {"bootstrap.servers": "127.0.0.1:9", "enable.auto.commit": "true"})
    with pytest.raises(ConfigurationError, match=r"no live log is registered for range kind 'rows'.*'kafka'"):
        open_live_log("rows", {})


def test_show_asks_the_live_log_by_kind(broker, kafka_db, capsys):
    code, out, err = cli(capsys, "offsets", "show", "--store", f"sqlite:///{kafka_db}", "--app", "app1",
                         "--bootstrap-servers", "h:1", "--json")
    assert code == 0, err
    assert broker.opened == [{"bootstrap.servers": "h:1"}] and broker.closed == 1
    doc = json.loads(out)
    assert doc["broker"] == "double:9092"
    rows = {r["key"]: r for r in doc["partitions"]}
    assert sorted(rows) == ["events/0", "events/1", "events/2"]  # events/2: at the broker, no position
    assert (rows["events/0"]["position"], rows["events/0"]["earliest"], rows["events/0"]["latest"],
            rows["events/0"]["lag"]) == (5, 2, 20, 15)
    assert rows["events/2"]["position"] is None and rows["events/2"].get("lag") is None


def test_reset_answers_the_live_log_s_refusals_and_failures_as_one_line(broker, kafka_db, capsys):
    before = snapshot(kafka_db)
    base = ("offsets", "reset", "--store", f"sqlite:///{kafka_db}", "--app", "app1", "--bootstrap-servers", "h:1")
    code, _, err = cli(capsys, *base, "--topic", "nope", "--to-earliest", "--execute")
    assert code == 1 and "unknown topic(s) ['nope'] at double:9092" in one_error_line(err)
    code, _, err = cli(capsys, *base, "--to-datetime", "2024-05-01T00:00:00Z", "--execute")
    assert code == 1
    assert "cannot look up offsets by time at double:9092: TimeoutError: no answer" in one_error_line(err)
    assert snapshot(kafka_db) == before
    code, out, err = cli(capsys, *base, "--to-offset", "50")  # clamped to the live log's latest
    assert code == 0 and "to latest (50 -> 20)" in out, err
    assert broker.closed == 3


def _file_meta(path: str, data: bytes) -> Dict[str, object]:
    r = FileRange("f1", path, 0, len(data), fingerprint=content_hash(data[:8]), sample_length=8,
                  tail=content_hash(data[-4:]), tail_length=4)
    return r.position_meta()


def test_a_file_position_is_re_anchored_at_its_new_byte(tmp_path):
    path = tmp_path / "a.log"
    data = b"first line\nsecond line\n"
    path.write_bytes(data)
    meta = _file_meta(str(path), data)
    doc = FileRange.reanchor_position("file:f1", meta, 11)
    assert doc["tail"] == content_hash(data[3:11]) and doc["tail_length"] == 8  # at least the sample length
    assert {k: v for k, v in doc.items() if k not in ("tail", "tail_length")} == \
        {k: v for k, v in meta.items() if k not in ("tail", "tail_length")}
    for document, new, words in ((None, 1, "has no file identity document"),
                                 ({**meta, "path": str(tmp_path / "gone.log")}, 1, "is gone"),
                                 (meta, 100, "is shorter than the new position 100")):
        with pytest.raises(ConfigurationError, match=words) as info:
            FileRange.reanchor_position("file:f1", document, new)
        assert str(info.value).startswith("file:f1: ")
    path.write_bytes(b"X" + data)
    with pytest.raises(ConfigurationError, match="no longer starts with the bytes of this identity"):
        FileRange.reanchor_position("file:f1", meta, 11)
