"""Slopes, windows and the chart of a soak run (``bench/soak.py``): pure functions over its samples."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from .common import percentile

#: Per series: (label, unit, the |slope| per hour at or below which the series counts as flat).
#: A JVM's RSS climbs while its heap expands towards ``-Xmx`` and drops when the collector returns
#: memory, so the JVM's leak check is the heap it *retains*: survivor + old generation after the
#: collections of a window, taken as the lowest sample of the window.
SERIES: Dict[str, Tuple[str, str, float]] = {
    "rss_python_mib": ("driver RSS, Python", "MiB", 16.0),
    "rss_jvm_mib": ("driver RSS, JVM", "MiB", 64.0),
    "jvm_retained_low_mib": ("JVM heap retained (survivor + old), lowest per window", "MiB", 32.0),
    "jvm_metaspace_mib": ("JVM metaspace", "MiB", 8.0),
    "fds_python": ("open fds, Python", "fds", 2.0),
    "fds_jvm": ("open fds, JVM", "fds", 8.0),
    "threads_python": ("threads, Python", "threads", 2.0),
    "threads_jvm": ("threads, JVM", "threads", 8.0),
    "tracked_files": ("tracked file identities", "identities", 1.0),
    "stored_file_positions": ("stored file positions", "rows", 1.0),
    "latency_p50_ms": ("batch latency p50 (per window)", "ms", 50.0),
    "latency_p99_ms": ("batch latency p99 (per window)", "ms", 200.0),
    "store_bytes_per_1k_batches": ("store size growth per 1,000 batches (per window)", "KiB", 64.0),
}

#: The series computed per window (the rest are samples).
PER_WINDOW = ("latency_p50_ms", "latency_p99_ms", "store_bytes_per_1k_batches", "jvm_retained_low_mib")


def slope_per_hour(points: Sequence[Tuple[float, float]]) -> Optional[float]:
    """Least-squares slope of ``(seconds, value)`` points, per hour; ``None`` below two distinct times."""
    if len(points) < 2:
        return None
    n = len(points)
    mx = sum(t for t, _ in points) / n
    my = sum(v for _, v in points) / n
    sxx = sum((t - mx) ** 2 for t, _ in points)
    if sxx == 0:
        return None
    sxy = sum((t - mx) * (v - my) for t, v in points)
    return sxy / sxx * 3600.0


def windows(latencies: Sequence[Tuple[float, float]], samples: Sequence[Dict[str, Any]], window_s: float,
            duration_s: float) -> List[Dict[str, Any]]:
    """Per window ``[k * window_s, (k + 1) * window_s)``: batch latency p50/p99 (ms), batches and the store's
    growth per 1,000 batches (KiB)."""
    out = []
    k = 0
    while k * window_s < duration_s:
        lo, hi = k * window_s, (k + 1) * window_s
        lat = [ms for t, ms in latencies if lo <= t < hi]
        inside = [s for s in samples if lo <= s["t"] < hi and s.get("store_bytes") is not None]
        growth = None
        if len(inside) >= 2 and inside[-1]["batches"] > inside[0]["batches"]:
            growth = ((inside[-1]["store_bytes"] - inside[0]["store_bytes"]) / 1024.0
                      / (inside[-1]["batches"] - inside[0]["batches"]) * 1000.0)
        retained = [float(s["jvm_retained_mib"]) for s in samples
                    if lo <= s["t"] < hi and s.get("jvm_retained_mib") is not None]
        out.append({"t": (lo + min(hi, duration_s)) / 2, "start_s": lo, "batches": len(lat),
                    "latency_p50_ms": percentile(lat, 50) if lat else None,
                    "latency_p99_ms": percentile(lat, 99) if lat else None,
                    "store_bytes_per_1k_batches": growth,
                    "jvm_retained_low_mib": min(retained) if retained else None})
        k += 1
    return out


def slopes(samples: Sequence[Dict[str, Any]], per_window: Sequence[Dict[str, Any]],
           warmup_s: float) -> Dict[str, Dict[str, Any]]:
    """Each series' slope per hour over the samples (or windows) after ``warmup_s``, and whether it is flat."""
    out: Dict[str, Dict[str, Any]] = {}
    for key, (label, unit, flat) in SERIES.items():
        rows = per_window if key in PER_WINDOW else samples
        points = [(r["t"], float(r[key])) for r in rows if r["t"] >= warmup_s and r.get(key) is not None]
        s = slope_per_hour(points)
        out[key] = {"label": label, "unit": unit, "slope_per_hour": s, "flat_threshold_per_hour": flat,
                    "points": len(points), "flat": None if s is None else abs(s) <= flat}
    return out


def print_slopes(result: Dict[str, Dict[str, Any]]) -> None:
    print(f"{'series':<52} {'slope / hour':>16}  {'flat if |slope| <=':>20}  verdict")
    for r in result.values():
        s = r["slope_per_hour"]
        shown = "n/a" if s is None else f"{s:+,.2f} {r['unit']}"
        verdict = ("too few points" if r["flat"] is None else "flat" if r["flat"]
                   else "GROWS" if s > 0 else "falls (still settling?)")
        print(f"{r['label']:<52} {shown:>16}  {r['flat_threshold_per_hour']:>11,.1f} {r['unit']:<8}  {verdict}")


def chart(samples: Sequence[Dict[str, Any]], per_window: Sequence[Dict[str, Any]], title: str, path: str) -> None:
    """One panel per series (minutes on x) written as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = list(SERIES)
    fig, axes = plt.subplots((len(keys) + 2) // 3, 3, figsize=(15, 3 * ((len(keys) + 2) // 3)))
    for ax, key in zip(axes.flat, keys, strict=False):
        rows = per_window if key in PER_WINDOW else samples
        pts = [(r["t"] / 60.0, r[key]) for r in rows if r.get(key) is not None]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="." if rows is per_window else None)
        label, unit, _ = SERIES[key]
        ax.set_title(label, fontsize=9)
        ax.set_xlabel("minutes", fontsize=8)
        ax.set_ylabel(unit, fontsize=8)
    for ax in list(axes.flat)[len(keys):]:
        ax.axis("off")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
