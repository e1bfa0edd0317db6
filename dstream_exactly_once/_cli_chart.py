"""``dstream-eo chart progress.jsonl -o out.png``: throughput, lag and durations per batch.

Reads the JSON-lines file an exactly-once stream writes with ``stream.progress_to(path)`` (or
``progress_path=``). Needs matplotlib: ``pip install 'dstream-exactly-once[chart]'``.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Dict, List

from ._cli_common import EXIT_OK, CliError

__all__ = ["read_progress", "run_chart"]

_DURATIONS = (("latestOffset", "planning"), ("walCommit", "offset log"), ("addBatch", "read + output"),
              ("commitOffsets", "commit"))


def read_progress(path: str) -> List[Dict[str, Any]]:
    records = []
    try:
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    doc = json.loads(line)
                except ValueError:
                    raise CliError(f"{path}:{n}: not a JSON line") from None
                if isinstance(doc, dict) and "batchId" in doc and "durationMs" in doc:
                    records.append(doc)
    except OSError as exc:
        raise CliError(f"cannot read {path!r}: {exc}") from exc
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
    ax1.plot(ids, [r.get("inputRowsPerSecond", 0) for r in records], label="input rows/s")
    ax1.plot(ids, [r.get("processedRowsPerSecond", 0) for r in records], label="processed rows/s")
    ax1.set_ylabel("rows/s")
    ax1.legend(loc="upper left")
    ax1.set_title(f"{records[-1].get('name', '')}: {len(records)} batches")
    behind = [((r.get("sources") or [{}])[0].get("metrics") or {}).get("maxOffsetsBehindLatest") for r in records]
    ax2.plot(ids, [b if b is not None else 0 for b in behind], color="tab:red", label="max offsets behind latest")
    ax2.set_ylabel("lag")
    ax2.legend(loc="upper left")
    bottom = [0.0] * len(records)
    for key, label in _DURATIONS:
        values = [float(r["durationMs"].get(key, 0)) for r in records]
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
