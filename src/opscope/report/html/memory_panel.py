"""The HTML report's memory panel data: allocated and reserved over time per device (with the peak), the top
allocating operators and the largest live-at-end allocations, from `analysis.memory.summary` (docs/memory.md).
Op names are untrusted text: they travel in the page's JSON block and reach the DOM through textContent."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from opscope.analysis.memory.summary import MemoryStats
from opscope.report.memory_view import device_data

MAX_POINTS = (
    2_000  # per device: each bucket keeps both series' own extremes, so each series' peak stays exact
)


def bucket_extremes(series: list[np.ndarray], n: int, buckets: int) -> np.ndarray:
    """Positions of the highest and lowest value of each series in each of `buckets` runs of n events (in
    order, each once): a thinned step line then still reaches every series' own maxima and minima."""
    edges = np.linspace(0, n, buckets + 1).astype(np.int64)
    picks: set[int] = set()
    for lo, hi in itertools.pairwise(edges):
        if hi > lo:
            for values in series:
                picks.update((lo + int(np.argmax(values[lo:hi])), lo + int(np.argmin(values[lo:hi]))))
    return np.array(sorted(picks), dtype=np.int64)


def _thin(ts: list[int], level: list[int], reserved: list[int] | None) -> dict[str, Any]:
    """At most MAX_POINTS samples: every event, or in each bucket of events the extremes of allocated and of
    reserved (the reserved line must reach its own peak, not only where allocated peaks)."""
    n = len(ts)
    picks = np.arange(n)
    if n > MAX_POINTS:
        series = [np.asarray(level)] + ([np.asarray(reserved)] if reserved is not None else [])
        picks = bucket_extremes(series, n, MAX_POINTS // (2 * len(series)))
    base = ts[0] if ts else 0
    return {
        "t_us": [round((ts[i] - base) / 1e3, 3) for i in picks],
        "allocated": [level[i] for i in picks],
        "reserved": None if reserved is None else [reserved[i] for i in picks],
        "start_ts_us": base / 1e3,
    }


def memory_panel(stats: MemoryStats) -> dict[str, Any]:
    """`stats`: `memory_stats(trace, MemoryOptions(top=20))`, as the bundle computes it."""
    return {
        "devices": [device_data(d) for d in stats.devices],
        "series": {name: _thin(*parts) for name, parts in stats.timeline.items()},
        "top_ops": [
            {
                "op": o.op,
                "device": o.device,
                "self_alloc_bytes": o.self_alloc_bytes,
                "self_alloc_count": o.self_alloc_count,
                "live_at_end_bytes": o.live_at_end_bytes,
                "alloc_bytes": o.alloc_bytes,
            }
            for o in stats.top_ops
        ],
        "live_at_end": [{"device": b.device, "bytes": b.nbytes, "op": b.op} for b in stats.live_at_end],
        "warnings": list(stats.warnings),
    }
