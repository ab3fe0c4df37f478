"""The CPU side of the report's timeline, packed for report/html/assets/timeline.js: the lanes, launches, syncs
and idle pieces computed by analysis/timeline/lanes.py (in the bundle), in the page's conventions: times in
integer ns relative to the timeline's `t0_ns` (CPU event starts delta-encoded in (lane, start) order), names as
indices into the report's string table. A launch points at its GPU event by (GPU lane, relative start): the page
finds the event by binary search in that lane, so no event index has to travel.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from opscope.analysis.timeline.lanes import CpuLanes, IdlePieces


def _ids(frame: pl.DataFrame, column: str, intern: Any) -> list[int]:
    """The string-table index of each value: one lookup per distinct value, in order of first appearance (the
    table's order is the one a lookup per row gave)."""
    text = frame[column].cast(pl.String).fill_null("")
    mapping = {v: intern(v) for v in text.unique(maintain_order=True).to_list()}
    return text.replace_strict(mapping, return_dtype=pl.Int64).to_list() if len(text) else []


def cpu_lanes(lanes: CpuLanes, t0: int, intern: Any) -> dict[str, Any]:
    """{"lanes": [{pid, tid, label}], "lane", "start", "dur", "name", "kind" (0 op, 1 launch, 2 sync),
    "gpu_lane", "gpu_start" (launches: their GPU event; -1 otherwise), "idle": {...}} (see the module doc)."""
    events = lanes.events
    return {
        "lanes": [
            {"pid": p, "tid": t, "label": intern(f"CPU {p} · thread {t}")}
            for p, t in lanes.threads.select("pid", "tid").iter_rows()
        ],
        "events": lanes.total,
        "shipped": events.height,
        "lane": events["lane"].to_list(),
        "start": _deltas(events["ts"] - t0),
        "dur": events["dur"].to_list(),
        "name": _ids(events, "name", intern),
        "kind": events["kind"].to_list(),
        "gpu_lane": events["gpu_lane"].to_list(),
        "gpu_start": events["gpu_start"].to_list(),
        "idle": idle_gaps(lanes.idle, t0),
    }


def _deltas(rel: pl.Series) -> list[int]:
    """Delta-encoded starts (the i-th start is the running sum), as report/html/timeline_data.py ships them."""
    return (rel - rel.shift(1).fill_null(0)).to_list()


def idle_gaps(idle: IdlePieces, t0: int) -> dict[str, Any]:
    """The idle pieces as columns: device, start (relative to t0), dur, cause."""
    out: dict[str, list[Any]] = {"device": [], "start": [], "dur": [], "cause": []}
    for device, lo_ns, hi_ns, cause in idle.pieces:
        out["device"].append(device)
        out["start"].append(lo_ns - t0)
        out["dur"].append(hi_ns - lo_ns)
        out["cause"].append(cause)
    return {"devices": idle.devices, **out}


__all__ = ["cpu_lanes", "idle_gaps"]
