"""The report's critical-path panel: per step the path length and its breakdown by kind (a bar per step), and
the path's pieces on the timeline's time axis (drawn by assets/critical_path.js under the GPU timeline).

Built from `analysis.critical_path` (the figures of `opscope critical-path`); times are nanoseconds relative to
the report timeline's origin, names go through the report's string table.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import polars as pl

from opscope.analysis.critical_path.kinds import EDGE_KINDS
from opscope.analysis.critical_path.stats import CriticalPathStats

MAX_SEGMENTS = 100_000


def critical_path_panel(
    stats: CriticalPathStats, origin_ns: int | None, strings: Callable[[str | None], int]
) -> dict[str, Any]:
    """The panel's data: `steps` (name, start_ns, wall_us, path_us, breakdown_us) and `segments` (columnar:
    start_ns, dur_ns, kind index into `kinds`, gpu 0/1, name string id), at most MAX_SEGMENTS of the longest."""
    # `stats`: the first steps only (analysis/bundle.py: CRITICAL_PATH_STEPS), each needs its own graph
    origin = origin_ns or 0
    chosen = stats.steps
    steps = [
        {
            "name": s.window.name,
            "start_ns": s.window.start_ns - origin,
            "wall_us": s.window.dur_ns / 1e3,
            "path_us": s.path.length_ns / 1e3,
            "breakdown_us": {k: v / 1e3 for k, v in s.path.breakdown_ns.items()},
        }
        for s in chosen
    ]
    frames = [s.segments for s in chosen if s.segments.height]
    segments = pl.concat(frames) if frames else None
    packed: dict[str, list[int]] = {"start_ns": [], "dur_ns": [], "kind": [], "gpu": [], "name": []}
    if segments is not None:
        segments = segments.with_columns((pl.col("dst_ts_ns") - pl.col("src_ts_ns")).alias("dur")).filter(
            pl.col("dur") > 0
        )
        if segments.height > MAX_SEGMENTS:
            segments = segments.sort("dur", descending=True).head(MAX_SEGMENTS)
        segments = segments.sort("src_ts_ns")
        kind_index = {k: i for i, k in enumerate(EDGE_KINDS)}
        # each distinct name interned once, in order of first appearance (the string table's ids as a call
        # per segment gave them), then looked up per segment
        names = segments["name"]
        ids = {n: strings(n) for n in names.unique(maintain_order=True).to_list()}
        name_ids = names.replace_strict(list(ids), list(ids.values()), return_dtype=pl.Int64)
        packed = {
            "start_ns": (segments["src_ts_ns"].to_numpy() - origin).tolist(),
            "dur_ns": segments["dur"].to_list(),
            "kind": segments["kind"].replace_strict(kind_index, default=0, return_dtype=pl.Int64).to_list(),
            "gpu": segments["gpu"].cast(pl.Int8).to_list(),
            "name": name_ids.to_list(),
        }
    return {
        "kinds": list(EDGE_KINDS),
        "steps": steps,
        "segments": packed,
        "from_markers": stats.from_markers,
        "total_steps": stats.windows_total,
        "segments_total": int(sum(f.height for f in frames)) if frames else 0,
        "shipped": len(packed["start_ns"]),
    }
