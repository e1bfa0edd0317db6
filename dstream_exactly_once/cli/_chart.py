"""``dstream-eo chart progress.jsonl -o out.png``: throughput, lag and durations per batch.

Reads the JSON-lines file an exactly-once stream writes with ``stream.progress_to(path)`` (or
``progress_path=``). Needs matplotlib: ``pip install 'dstream-exactly-once[chart]'``.

A driver start (a new ``runId``) is drawn as a labelled vertical line. The input rate of the first
batch of each run has no previous batch to measure from (its record says 0), and a batch whose
rows were not counted (``numInputRows`` -1) has no rates: those points are left out, not drawn at 0.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

from .._checks import is_number
from ..errors import CliError
from ._exit_codes import EXIT_OK

__all__ = ["ChartPoints", "chart_points", "read_progress", "run_chart"]

_DURATIONS = (("latestOffset", "planning"), ("walCommit", "offset log"), ("addBatch", "read + output"),
              ("commitOffsets", "commit"))


def _number(value: Any) -> bool:
    return is_number(value) and math.isfinite(value)


def _record(doc: Any) -> Optional[Dict[str, Any]]:
    """The fields the chart plots, checked; None when ``doc`` is not a usable progress record."""
    if not isinstance(doc, dict) or not _number(doc.get("batchId")) or not isinstance(doc.get("durationMs"), dict):
        return None
    durations = {key: doc["durationMs"].get(key, 0) for key, _ in _DURATIONS}
    rates = {key: doc.get(key, 0) for key in ("inputRowsPerSecond", "processedRowsPerSecond")}
    if not all(_number(v) for v in (*durations.values(), *rates.values())):
        return None
    sources = doc.get("sources")
    first = sources[0] if isinstance(sources, list) and sources and isinstance(sources[0], dict) else {}
    metrics = first.get("metrics")
    behind = metrics.get("maxOffsetsBehindLatest") if isinstance(metrics, dict) else None
    name = doc.get("name")
    run_id = doc.get("runId")
    rows = doc.get("numInputRows")
    return {"batchId": doc["batchId"], "durationMs": durations, **rates,
            "behind": behind if _number(behind) else None, "name": name if isinstance(name, str) else "",
            "runId": run_id if isinstance(run_id, str) else None, "numInputRows": rows if _number(rows) else None,
            "replayed": doc.get("replayedBatch") is True}


@dataclass(frozen=True)
class ChartPoints:
    """What the chart draws, one entry per record (None: no point there)."""

    batch_ids: List[float]
    input_rate: List[Optional[float]]
    processed_rate: List[Optional[float]]
    behind: List[Optional[float]]
    #: batch ids where a driver run starts after an earlier one in the file
    restarts: List[float]


def chart_points(records: Sequence[Dict[str, Any]]) -> ChartPoints:
    """The points of ``records`` (see :func:`read_progress`): rates only where they were measured.

    A record is the first of its run when its ``runId`` differs from the record before it (the
    first record of the file too): its input rate is left out. So is the rate of a batch that
    follows a replayed one (a replayed batch keeps the time it was planned at, in the run before,
    so the interval spans the restart). Records without a ``runId`` are taken as one run. A batch
    with uncounted rows (``numInputRows`` negative) has neither rate.
    """
    input_rate: List[Optional[float]] = []
    processed: List[Optional[float]] = []
    restarts: List[float] = []
    previous: Any = object()
    after_replay = False
    for n, r in enumerate(records):
        first_of_run = n == 0 or (r["runId"] is not None and r["runId"] != previous)
        if first_of_run and n > 0:
            restarts.append(r["batchId"])
        previous = r["runId"] if r["runId"] is not None else previous
        counted = r["numInputRows"] is None or r["numInputRows"] >= 0
        measured = counted and not first_of_run and not after_replay
        input_rate.append(float(r["inputRowsPerSecond"]) if measured else None)
        after_replay = r["replayed"]
        processed.append(float(r["processedRowsPerSecond"]) if counted else None)
    return ChartPoints([r["batchId"] for r in records], input_rate, processed,
                       [r["behind"] for r in records], restarts)


def _nan(values: Sequence[Optional[float]]) -> List[float]:
    """None as NaN: matplotlib leaves a gap there."""
    return [math.nan if v is None else v for v in values]


def read_progress(path: str) -> List[Dict[str, Any]]:
    """The usable progress records of ``path`` (checked, see :func:`_record`); a torn or undecodable
    line, or a record with wrong types, is skipped and reported in one line on stderr."""
    records: List[Dict[str, Any]] = []
    bad: List[int] = []
    try:
        with open(path, "rb") as f:
            for n, raw in enumerate(f, 1):
                if not raw.strip():
                    continue
                try:
                    rec = _record(json.loads(raw.decode("utf-8")))
                except ValueError:  # torn JSON, not UTF-8
                    rec = None
                if rec is None:
                    bad.append(n)
                else:
                    records.append(rec)
    except OSError as exc:
        raise CliError(f"cannot read {path!r}: {exc}") from exc
    if bad:
        shown = ", ".join(map(str, bad[:10])) + (", …" if len(bad) > 10 else "")
        sys.stderr.write(f"warning: skipped {len(bad)} line(s) of {path} that are not progress records "
                         f"(torn, not UTF-8 JSON, or wrong types): line {shown}\n")
    if not records:
        raise CliError(f"{path!r} holds no progress records (write them with stream.progress_to(path))")
    return records


def run_chart(args: argparse.Namespace) -> int:
    records = read_progress(args.progress)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise CliError("dstream-eo chart needs matplotlib: pip install 'dstream-exactly-once[chart]'") from None
    points = chart_points(records)
    ids = points.batch_ids
    fig, (ax1, ax2, ax3) = plt.subplots(3, 1, figsize=(9, 8), sharex=True)
    ax1.plot(ids, _nan(points.input_rate), marker=".", label="input rows/s")
    ax1.plot(ids, _nan(points.processed_rate), marker=".", label="processed rows/s")
    ax1.set_ylabel("rows/s")
    ax1.set_title(f"{records[-1]['name']}: {len(records)} batches, {len(points.restarts)} restart(s)")
    ax2.plot(ids, _nan(points.behind), marker=".", color="tab:red", label="max offsets behind latest")
    ax2.set_ylabel("lag")
    for ax in (ax1, ax2, ax3):
        for i, x in enumerate(points.restarts):
            ax.axvline(x - 0.5, color="tab:gray", linestyle="--", linewidth=1,
                       label="driver restart" if i == 0 and ax is not ax3 else None)
    for x in points.restarts:
        ax1.annotate("restart", (x - 0.5, 0.02), xycoords=("data", "axes fraction"), rotation=90, va="bottom",
                     ha="right", fontsize=8, color="dimgray")
    ax1.legend(loc="upper left")
    ax2.legend(loc="upper left")
    bottom = [0.0] * len(records)
    for key, label in _DURATIONS:
        values = [float(r["durationMs"][key]) for r in records]
        ax3.bar(ids, values, bottom=bottom, label=label)
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    ax3.set_ylabel("ms")
    ax3.set_xlabel("batch id")
    ax3.legend(loc="upper left", fontsize="small")
    fig.tight_layout()
    try:
        fig.savefig(args.output, format="png", dpi=args.dpi)
    except OSError as exc:
        raise CliError(f"cannot write {args.output!r}: {exc}") from exc
    finally:
        plt.close(fig)
    sys.stdout.write(f"wrote {args.output} ({len(records)} batches)\n")
    return EXIT_OK
