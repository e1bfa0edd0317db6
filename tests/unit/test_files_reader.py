"""The executor-side file reader: exact bytes of the identified file, as deterministic records."""

from __future__ import annotations

import os
import pickle

import pytest

from dstream_exactly_once.errors import DataLossError, DecodeError
from dstream_exactly_once.files import FilePlanner, FileRangeReader, FileSourceOptions

from ._files_harness import write


def _plan(path, pattern=None, **opts):
    o = FileSourceOptions.from_mapping({k.replace("_", "."): v for k, v in opts.items()})
    p = FilePlanner(pattern or path, o)
    p.start({})
    return p.plan(), FileRangeReader(pattern or path, o)


def test_records_with_file_name_and_offset(tmp_path):
    log = str(tmp_path / "app.log")
    write(log, "ab\n\ncd\r\n")
    (r,), reader = _plan(log, include_file_name=True, include_byte_offset=True)
    assert list(reader.read(r)) == [(log, 0, "ab"), (log, 3, ""), (log, 4, "cd\r")]
    (r,), reader = _plan(log, include_byte_offset=True, line_decoding="bytes")
    assert list(reader.read(r)) == [(0, b"ab"), (3, b""), (4, b"cd\r")]
    reader2 = pickle.loads(pickle.dumps(reader))
    assert list(reader2.read(r)) == list(reader.read(r))  # deterministic, picklable


def test_undecodable_line_strict_fails_naming_file_and_byte_replace_accepts(tmp_path):
    log = str(tmp_path / "app.log")
    with open(log, "wb") as f:
        f.write(b"ok\nbad \xff here\n")
    (r,), reader = _plan(log)
    with pytest.raises(DecodeError, match=r"app\.log: undecodable UTF-8 at byte 7"):
        list(reader.read(r))
    (r,), reader = _plan(log, line_decoding="replace")
    assert list(reader.read(r)) == ["ok", "bad \ufffd here"]


def test_file_renamed_after_planning_is_found_by_identity(tmp_path):
    log = str(tmp_path / "app.log")
    write(log, "one\ntwo\n")
    (r,), reader = _plan(log, pattern=str(tmp_path / "app.log*"))
    os.rename(log, log + ".1")
    write(log, "other\n")
    assert list(reader.read(r)) == ["one", "two"]


def test_file_replaced_after_planning_fails_clearly_under_fail_on_data_loss(tmp_path):
    log = str(tmp_path / "app.log")
    write(log, "one\ntwo\n")
    (r,), reader = _plan(log, fail_on_data_loss=True)
    write(log, "ONE\nTWO\n", mode="w")
    with pytest.raises(DataLossError, match=r"app\.log.*not the planned one"):
        list(reader.read(r))
    os.remove(log)
    with pytest.raises(DataLossError, match=r"\[0 -> 8\)"):
        list(reader.read(r))


def test_bytes_gone_after_planning_are_reported_once_and_skipped_by_default(tmp_path, caplog):
    log = str(tmp_path / "app.log")
    write(log, "one\ntwo\n")
    (r,), reader = _plan(log)
    assert reader.options.fail_on_data_loss is False  # the default: log shippers keep going
    reported = []
    reporting = reader.reporting_to(reported.append)
    assert reader.on_data_loss is None  # a copy: the planner's reader is unchanged
    write(log, "x\n", mode="w")  # copytruncate's truncate: no file holds [0, 8) any more
    assert list(reporting.read(r)) == []
    assert list(reader.read(r)) == []  # without a callback: a WARN line names the range
    assert [(d.position_key, d.start, d.end, d.lost, d.unit, d.where) for d in reported] == [
        (r.position_key, 0, 8, 8, "bytes", log)]
    assert "not the planned one" in reported[0].reason
    warnings = [rec for rec in caplog.records if rec.levelname == "WARNING"]
    assert len(warnings) == 1 and "[0, 8)" in warnings[0].getMessage()
