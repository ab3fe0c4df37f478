"""GPU activity prepared once for every timeline analysis: intervals, category and launch call per event.

`gpu_activity(trace, options)` takes the linked GPU events of `analysis.base.linking` (every kernel, memcpy and
memset with its launch call and the innermost CPU op around that call), restricted to the selected devices and
streams, adds the copy sizes, the intervals and the category (`categories`), and the analysed window
(`window`). Negative durations count as zero (linking clips them, and they are counted in its stats); zero-length
events count as calls and add no time. timeline / idle / launch_delay / memcpy all take an optional
`activity=` so `opscope analyze` builds it once, and the `Linkage` inside is reused by ops and steps.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

import polars as pl

from opscope.analysis.base import intervals, window
from opscope.analysis.base.linking import ROW, Linkage, LinkStats, event_columns, link, selected_gpu
from opscope.analysis.kernels.categories import CATEGORY, with_category
from opscope.model.schema import GPU_KINDS, Col
from opscope.model.trace import Trace

# Launch columns of `Activity.events` (null when the launch call is not in the trace).
LAUNCH_NAME = "launch_name"
LAUNCH_TS = "launch_ts_ns"
LAUNCH_DUR = "launch_dur_ns"
FROM_GRAPH = "from_graph"  # launched by cudaGraphLaunch / hipGraphLaunch
LAUNCH_OP = "launch_op"  # innermost CPU op or annotation around the launch call (null: none, or no launch)
ATTRIBUTED = "attributed"  # the launch lies inside some CPU op, annotation or Python frame


@dataclass(frozen=True)
class TimelineOptions:
    devices: tuple[int, ...] | None = None
    streams: tuple[int, ...] | None = None
    # Analysed window pieces, e.g. the chosen steps' spans; None = the whole trace (see analysis/base/window.py).
    windows: tuple[tuple[int, int], ...] | None = None


@dataclass(frozen=True, eq=False)
class Activity:
    """`events`: one row per GPU activity of the selection (not clipped) with kind, name, device, stream, ts_ns,
    dur_ns, start_ns, end_ns, bytes, category, correlation and the launch columns above."""

    events: pl.DataFrame
    window: window.Window
    linkage: Linkage
    options: TimelineOptions
    # results derived from this activity alone that several views ask for (`idle.device_gaps`); not an init
    # field, so a `dataclasses.replace` copy with other events starts with an empty one
    memo: dict[object, object] = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def link(self) -> LinkStats:
        return self.linkage.stats

    def clipped(self) -> pl.DataFrame:
        """The events cut to the analysed window (start_ns / end_ns clipped; events outside dropped), cut once
        per activity (`memo`: the overview, the timeline, the idle breakdown and the rules each ask)."""
        found = self.memo.get(_CLIPPED)
        if found is None:
            found = self.memo[_CLIPPED] = window.restrict(self.events, self.window)
        return cast(pl.DataFrame, found)


_CLIPPED = "clipped"  # Activity.memo's key of the clipped events


def gpu_activity(
    trace: Trace, options: TimelineOptions | None = None, linkage: Linkage | None = None
) -> Activity:
    opts = options or TimelineOptions()
    linked = linkage or link(trace)
    gpu = selected_gpu(trace, linked, opts.devices, opts.streams)
    # the byte counts by row (`linking.event_columns`); the category from the categorical name and kind, before
    # they become text (kernels/categories.py)
    (size,) = event_columns(trace, gpu[ROW], GPU_KINDS, [Col.BYTES])
    category = with_category(gpu.select(Col.NAME, Col.KIND))[CATEGORY]
    frame = (
        gpu.with_columns(size.alias(Col.BYTES), category)
        .select(
            ROW,
            pl.col(Col.KIND).cast(pl.String),
            pl.col(Col.NAME).cast(pl.String),
            Col.DEVICE,
            Col.STREAM,
            Col.TS_NS,
            Col.DUR_NS,
            Col.CORRELATION,
            Col.BYTES,
            pl.col(LAUNCH_NAME).cast(pl.String),
            LAUNCH_TS,
            LAUNCH_DUR,
            FROM_GRAPH,
            pl.col("op_name").cast(pl.String).alias(LAUNCH_OP),
            ATTRIBUTED,
            CATEGORY,
        )
        .filter(pl.col(Col.TS_NS).is_not_null())
        .with_columns(
            pl.col(Col.TS_NS).alias(intervals.START),
            (pl.col(Col.TS_NS) + pl.col(Col.DUR_NS)).alias(intervals.END),
        )
        .select(pl.exclude(CATEGORY), CATEGORY)  # the category last, where it has always been
    )
    if opts.windows is not None:
        win = window.from_bounds(opts.windows)
    else:
        win = window.trace_window(trace, opts.devices, opts.streams)
    return Activity(events=frame, window=win, linkage=linked, options=opts)
