"""``dstream-eo chart``: the points it draws. The first batch of a driver run has no previous batch
to measure its input rate from, so that point is left out (not drawn at 0), and each restart is
marked; a batch whose rows were not counted has no rates at all."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List

from dstream_exactly_once.cli._chart import chart_points, read_progress
from dstream_exactly_once.cli._main import main


def _doc(batch_id: int, run: str, input_rate: float, rows: int = 100, behind: Any = 3) -> Dict[str, Any]:
    return {"batchId": batch_id, "runId": run, "name": "demo", "numInputRows": rows,
            "inputRowsPerSecond": input_rate, "processedRowsPerSecond": 50.0,
            "durationMs": {"latestOffset": 1, "walCommit": 2, "addBatch": 30, "commitOffsets": 4},
            "sources": [{"metrics": {"maxOffsetsBehindLatest": behind}}]}


def _write(path: Path, docs: List[Dict[str, Any]]) -> str:
    path.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    return str(path)


def test_the_first_batch_of_each_run_has_no_input_rate_and_restarts_are_marked(tmp_path):
    # two restarts: runs a (batches 0-2), b (3-4), c (5); each run's first record says 0 rows/s
    docs = [_doc(0, "a", 0.0), _doc(1, "a", 100.0), _doc(2, "a", 110.0), _doc(3, "b", 0.0), _doc(4, "b", 90.0),
            _doc(5, "c", 0.0)]
    points = chart_points(read_progress(_write(tmp_path / "p.jsonl", docs)))
    assert points.batch_ids == [0, 1, 2, 3, 4, 5]
    assert points.input_rate == [None, 100.0, 110.0, None, 90.0, None]
    assert points.processed_rate == [50.0] * 6
    assert points.restarts == [3, 5]


def test_uncounted_rows_have_no_rates_and_unknown_lag_no_point(tmp_path):
    docs = [_doc(0, "a", 0.0), _doc(1, "a", 0.0, rows=-1, behind=None), _doc(2, "a", 7.5)]
    points = chart_points(read_progress(_write(tmp_path / "p.jsonl", docs)))
    assert points.input_rate == [None, None, 7.5]
    assert points.processed_rate == [50.0, None, 50.0]
    assert points.behind == [3, None, 3]
    assert points.restarts == []


def test_records_without_a_run_id_are_one_run(tmp_path):
    docs = [{k: v for k, v in _doc(i, "x", 20.0).items() if k != "runId"} for i in range(3)]
    points = chart_points(read_progress(_write(tmp_path / "p.jsonl", docs)))
    assert points.input_rate == [None, 20.0, 20.0] and points.restarts == []


def test_the_chart_of_restarted_runs_is_written(tmp_path, capsys):
    docs = [_doc(0, "a", 0.0), _doc(1, "a", 100.0), _doc(2, "b", 0.0), _doc(3, "b", 80.0)]
    png = tmp_path / "out.png"
    assert main(["chart", _write(tmp_path / "p.jsonl", docs), "-o", str(png)]) == 0
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert "(4 batches)" in capsys.readouterr().out


def test_the_batch_after_a_replayed_one_has_no_input_rate(tmp_path):
    # run b replays batch 2 (planned in run a, keeping its time): batch 3's rate spans the restart
    docs = [_doc(0, "a", 0.0), _doc(1, "a", 100.0), {**_doc(2, "b", 0.0), "replayedBatch": True},
            _doc(3, "b", 12.8), _doc(4, "b", 95.0)]
    points = chart_points(read_progress(_write(tmp_path / "p.jsonl", docs)))
    assert points.input_rate == [None, 100.0, None, None, 95.0]
    assert points.restarts == [2]
