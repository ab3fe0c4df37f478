"""GPU activity packed for the HTML report's timeline: one lane per (device, stream), columnar integer arrays.

The browser draws at most one rectangle per lane and pixel column at the current zoom (report/html/assets/
timeline.js), so the cost of a redraw is bounded by the screen, not by the trace. What is shipped is bounded
too: at most `max_events` rectangles. Beyond that, the longest `max_events` events are shipped one by one
(they carry most of the GPU time) and every event, shipped or not, is summed into `bins` per lane: the busy
fraction of fixed time bins over the window, drawn underneath so that no activity disappears from view.

Times are integer nanoseconds relative to `t0_ns` (the analysed window's start). `start` is delta-encoded in
(lane, start) order to keep the file small: the i-th start is the running sum of `start[:i+1]`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from opscope.model.schema import Col

BINS_PER_LANE = 2000
OPTIONAL = {"launch": "launch_id", "py": "py"}  # shipped key -> events column (-1: none)


@dataclass(frozen=True)
class TimelineOptions:
    max_events: int = 200_000


def lane_label(device: int | None, stream: int | None) -> str:
    dev = "GPU ?" if device is None else f"GPU {device}"
    return f"{dev} · stream {'?' if stream is None else stream}"


def pack_timeline(
    events: pl.DataFrame,
    t0: int,
    t1: int,
    intern: Any,
    device_names: dict[int | None, str | None],
    options: TimelineOptions | None = None,
) -> dict[str, Any]:
    """`events` columns: device, stream, name_id, op_id (-1: none), ts_ns, dur_ns, delay_ns (null: unknown),
    cat_id, and optionally launch_id (the launch call's name, -1: none) and py (its Python stack, -1: none).
    `intern(str) -> int` is the report's string table."""
    opts = options or TimelineOptions()
    lanes = events.select(Col.DEVICE, Col.STREAM).unique().sort([Col.DEVICE, Col.STREAM], nulls_last=True)
    lane_rows = list(lanes.iter_rows())
    lane_index = lanes.with_row_index("lane").with_columns(pl.col("lane").cast(pl.Int64))
    framed = events.join(lane_index, on=[Col.DEVICE, Col.STREAM], how="left", nulls_equal=True)
    total = framed.height
    shipped = framed
    if total > opts.max_events:
        shipped = framed.sort([Col.DUR_NS, Col.TS_NS], descending=[True, False]).head(opts.max_events)
    shipped = shipped.sort(["lane", Col.TS_NS]).with_columns((pl.col(Col.TS_NS) - t0).alias("rel"))
    rel = shipped["rel"]
    deltas = (rel - rel.shift(1).fill_null(0)).to_list()
    out: dict[str, Any] = {
        "t0_ns": t0,
        "span_ns": max(t1 - t0, 1),
        "lanes": [
            {
                "device": d,
                "stream": s,
                "label": intern(lane_label(d, s)),
                "device_name": intern(device_names.get(d) or ""),
            }
            for d, s in lane_rows
        ],
        "events": total,
        "shipped": shipped.height,
        "lane": shipped["lane"].to_list(),
        "start": deltas,
        "dur": shipped[Col.DUR_NS].to_list(),
        "name": shipped["name_id"].to_list(),
        "op": shipped["op_id"].to_list(),
        "delay": shipped["delay_ns"].fill_null(-1).to_list(),
        "cat": shipped["cat_id"].to_list(),
        "bins": None,
    }
    for key, column in OPTIONAL.items():  # the launch call and its Python stack, when the caller has them
        if column in shipped.columns:
            out[key] = shipped[column].to_list()
    if total > opts.max_events:
        out["bins"] = _bins(framed, t0, max(t1 - t0, 1), len(lane_rows))
    return out


def _bins(framed: pl.DataFrame, t0: int, span: int, lanes: int) -> dict[str, Any]:
    """Busy fraction per lane and bin: the time of the events starting in the bin over the bin width, at
    most 1 (an overview: an event longer than a bin is counted in the bin where it starts)."""
    width = max(span // BINS_PER_LANE, 1)
    per = (
        framed.with_columns(((pl.col(Col.TS_NS) - t0) // width).clip(0, BINS_PER_LANE - 1).alias("bin"))
        .group_by("lane", "bin")
        .agg(pl.col(Col.DUR_NS).sum().alias("t"))
    )
    fill = [[0.0] * BINS_PER_LANE for _ in range(lanes)]
    for lane, b, t in per.iter_rows():
        fill[lane][b] = round(min(t / width, 1.0), 3)
    return {"width_ns": width, "count": BINS_PER_LANE, "fill": fill}
