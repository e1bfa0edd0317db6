"""``dstream-eo chart progress.jsonl -o out.png``: throughput, lag and durations per batch.

Reads the JSON-lines file an exactly-once stream writes with ``stream.progress_to(path)`` (or
``progress_path=``). Needs matplotlib: ``pip install 'dstream-exactly-once[chart]'``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any, Dict, List, Optional

from ._checks import is_number
from ._cli_common import EXIT_OK, CliError

__all__ = ["read_progress", "run_chart"]

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
    return {"batchId": doc["batchId"], "durationMs": durations, **rates,
            "behind": behind if _number(behind) else None, "name": name if isinstance(name, str) else ""}


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
    ids = [r["batchId"] for r in records]
    fig, (ax1, ax2, ax3) = plt.subplots(3, 1, figsize=(9, 8), sharex=True)
    ax1.plot(ids, [r["inputRowsPerSecond"] for r in records], label="input rows/s")
    ax1.plot(ids, [r["processedRowsPerSecond"] for r in records], label="processed rows/s")
    ax1.set_ylabel("rows/s")
    ax1.legend(loc="upper left")
    ax1.set_title(f"{records[-1]['name']}: {len(records)} batches")
    ax2.plot(ids, [r["behind"] if r["behind"] is not None else 0 for r in records], color="tab:red",
             label="max offsets behind latest")
    ax2.set_ylabel("lag")
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
