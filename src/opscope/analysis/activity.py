"""GPU activity prepared once for every timeline analysis: intervals, category and launch call per event.

`gpu_activity(trace, options)` selects kernels, memcpys and memsets (devices, streams), matches each to its
launch call (`launches.gpu_launches`), adds its category (`categories`), and the analysed window (`window`).
Events with a negative duration are dropped and counted (a profiler bug, not work); zero-length events stay
(they count as calls, add no time). The analyses in timeline / idle / launch_delay / memcpy all take an
optional `activity=` so `opscope analyze` builds it once.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import polars as pl

from opscope.analysis import intervals, window
from opscope.analysis.categories import with_category
from opscope.analysis.launches import LAUNCH_DUR, LAUNCH_PID, LAUNCH_TID, LAUNCH_TS, GpuLaunches, gpu_launches
from opscope.analysis.syncs import cpu_spans, issuing_ops
from opscope.model.schema import Col
from opscope.model.trace import Trace

LAUNCH_OP = "launch_op"  # innermost CPU op / annotation around the launch call (null: none or no launch)


@dataclass(frozen=True)
class TimelineOptions:
    devices: tuple[int, ...] | None = None
    streams: tuple[int, ...] | None = None
    # Analysed window pieces, e.g. the chosen steps' spans; None = the whole trace (see analysis/window.py).
    windows: tuple[tuple[int, int], ...] | None = None


@dataclass(frozen=True)
class Activity:
    """`events`: one row per GPU activity (all of the selection, not clipped) with kind, name, device,
    stream, ts_ns, dur_ns, start_ns, end_ns, bytes, category and the launch columns of `launches`."""

    events: pl.DataFrame
    window: window.Window
    launches: GpuLaunches
    negative_durations: int
    options: TimelineOptions

    def clipped(self) -> pl.DataFrame:
        """The events cut to the analysed window (start_ns / end_ns clipped; events outside dropped)."""
        return window.restrict(self.events, self.window)


def gpu_activity(trace: Trace, options: TimelineOptions | None = None) -> Activity:
    opts = options or TimelineOptions()
    launches = gpu_launches(trace, opts.devices, opts.streams)
    frame = launches.frame
    negative = int(frame.filter(pl.col(Col.DUR_NS) < 0).height)
    frame = frame.filter((pl.col(Col.DUR_NS) >= 0) & pl.col(Col.TS_NS).is_not_null()).with_columns(
        pl.col(Col.TS_NS).alias(intervals.START), (pl.col(Col.TS_NS) + pl.col(Col.DUR_NS)).alias(intervals.END)
    )
    frame = with_category(frame)
    if opts.windows is not None:
        win = window.from_bounds(opts.windows)
    else:
        win = window.trace_window(trace, opts.devices, opts.streams)
    return Activity(events=frame, window=win, launches=launches, negative_durations=negative, options=opts)


def with_launch_ops(trace: Trace, activity: Activity, spans: pl.DataFrame | None = None) -> Activity:
    """`activity` with a `launch_op` column: the op that launched each GPU event (computed once, reused)."""
    if LAUNCH_OP in activity.events.columns:
        return activity
    events = activity.events
    calls = events.select(
        pl.col(LAUNCH_PID).alias(Col.PID), pl.col(LAUNCH_TID).alias(Col.TID), pl.col(LAUNCH_TS).alias(Col.TS_NS),
        (pl.col(LAUNCH_TS) + pl.col(LAUNCH_DUR).fill_null(0).clip(lower_bound=0)).alias("end_ns"),
    )
    ops = issuing_ops(calls, cpu_spans(trace) if spans is None else spans)
    return replace(activity, events=events.with_columns(ops.alias(LAUNCH_OP)))
