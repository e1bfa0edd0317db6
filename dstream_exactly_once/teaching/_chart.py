"""The demo's PNG: both running totals per batch, the expected sum and the kills (optional matplotlib).

matplotlib is the optional extra ``chart`` (``pip install 'dstream-exactly-once[chart]'``);
without it only the PNG is skipped, with a one-line note.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional

MISSING = "matplotlib is not installed (pip install 'dstream-exactly-once[chart]'): no chart written"


def write_chart(trace: List[Dict[str, Any]], expected: int, path: Path) -> Optional[str]:
    """Draw ``trace`` (see :class:`~._points.Trace`) to ``path``; returns a note when it could not."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # no display needed
        import matplotlib.pyplot as plt
    except ImportError:
        return MISSING
    if not trace:
        return "no batches were traced: no chart written"
    from matplotlib.ticker import FuncFormatter

    steps = list(range(1, len(trace) + 1))
    fig, ax = plt.subplots(figsize=(10, 5.5), dpi=100)
    for key, color, label in (("alo_sum", "tab:red", "at-least-once (output, then offsets)"),
                              ("eo_sum", "tab:green", "exactly-once (results + offsets in one transaction)")):
        ys = [e[key] for e in trace]
        ax.step(steps + [steps[-1] + 0.6], ys + ys[-1:], where="post", color=color, linewidth=2, label=label)
        ax.plot(steps, ys, "o", color=color, markersize=3)
    ax.axhline(expected, color="black", linestyle=":", linewidth=1, label=f"expected N(N+1)/2 = {expected:,}")
    top = max(max(e["alo_sum"] for e in trace), expected)
    for i, (x, e) in enumerate((x, e) for x, e in zip(steps, trace, strict=True) if e["event"] == "kill"):
        ax.axvline(x, color="tab:gray", linestyle="--", linewidth=1, label="SIGKILL of the driver" if i == 0 else None)
        ax.text(x, top * 1.04, f"{e.get('point', '')} ", rotation=90, va="top", ha="right", fontsize=8,
                color="dimgray")
    ax.set_xlabel("batch (all driver runs, in order)")
    ax.set_ylabel("running total in the store")
    ax.set_title("Sum of 1..N through Kafka and Spark with the driver SIGKILLed")
    ax.set_ylim(0, top * 1.06)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:,.0f}"))
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(0.005, 0.74), fontsize=9)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return None
