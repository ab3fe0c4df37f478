"""The analysed window: the stretch of time over which busy, idle and utilization are measured.

Default (whole trace): from the start of the first to the end of the last event of the selection that has a
duration and is GPU activity (kernel, memcpy, memset, on the selected devices and streams) or CPU work (cpu_op,
runtime / driver call, user annotation such as ProfilerStep#N, python_function). Metadata, flows, instants,
counters and the profiler's own "Trace" span are left out: they are not work. CPU events are not filtered by
--device (a CPU thread is not tied to one GPU).

With --steps, the window is the union of the chosen steps' time spans (possibly several disjoint pieces);
everything is clipped to it and its length is the sum of the pieces.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from opscope.analysis.base import intervals, select, windows
from opscope.analysis.base.windows import CPU_WORK_KINDS as CPU_WORK_KINDS
from opscope.model.schema import Col
from opscope.model.trace import Trace

TRACE = "trace"
STEPS = "steps"
PIECE = "piece"


@dataclass(frozen=True)
class Window:
    bounds: tuple[tuple[int, int], ...]  # disjoint, sorted [start_ns, end_ns) pieces
    source: str = TRACE  # "trace" (first to last event) or "steps"

    @property
    def start_ns(self) -> int | None:
        return self.bounds[0][0] if self.bounds else None

    @property
    def end_ns(self) -> int | None:
        return self.bounds[-1][1] if self.bounds else None

    @property
    def total_ns(self) -> int:
        return sum(hi - lo for lo, hi in self.bounds)


def from_bounds(pieces: Sequence[tuple[int, int]], source: str = STEPS) -> Window:
    """A window from possibly overlapping pieces (e.g. step spans), merged."""
    frame = pl.DataFrame(
        {intervals.START: [p[0] for p in pieces], intervals.END: [p[1] for p in pieces]},
        schema={intervals.START: pl.Int64, intervals.END: pl.Int64},
    )
    merged = intervals.merge(frame)
    return Window(
        bounds=tuple(zip(merged[intervals.START].to_list(), merged[intervals.END].to_list())), source=source
    )


def trace_window(
    trace: Trace, devices: Sequence[int] | None = None, streams: Sequence[int] | None = None
) -> Window:
    """First to last GPU-or-CPU event of the selection (see the module doc; `windows.work_span`, the one
    definition)."""
    selected = (
        None
        if not devices and not streams
        else select.by_streams(select.by_devices(trace.gpu_events(), devices), streams)
    )
    span = windows.work_span(trace, selected)
    if span is None or span[1] <= span[0]:
        return Window(bounds=(), source=TRACE)
    return Window(bounds=(span,), source=TRACE)


def restrict(
    frame: pl.DataFrame, window: Window, start: str = intervals.START, end: str = intervals.END
) -> pl.DataFrame:
    """Intervals clipped to the window's pieces, with the index of the piece in a `piece` column. An interval
    spanning two pieces becomes two rows; a zero-length interval is kept when it lies in a piece (it counts
    as a call and adds no time)."""
    pieces = []
    for i, (lo, hi) in enumerate(window.bounds):
        point = (pl.col(start) == pl.col(end)) & pl.col(start).is_between(lo, hi, closed="left")
        pieces.append(
            frame.lazy()
            .filter((pl.col(end) > lo) & (pl.col(start) < hi) & (pl.col(end) > pl.col(start)) | point)
            .with_columns(
                pl.col(start).clip(lower_bound=lo),
                pl.col(end).clip(upper_bound=hi),
                pl.lit(i, dtype=pl.Int32).alias(PIECE),
            )
        )
    if not pieces:
        return frame.clear().with_columns(pl.lit(0, dtype=pl.Int32).alias(PIECE))
    return pl.concat(pieces).collect()


def starts_inside(window: Window, start: str = Col.TS_NS) -> pl.Expr:
    """True for rows whose start lies in one of the window's pieces."""
    inside = pl.lit(False)
    for lo, hi in window.bounds:
        inside = inside | pl.col(start).is_between(lo, hi, closed="left")
    return inside


def covered_ns(frame: pl.DataFrame) -> int:
    """Length of the union of the frame's start_ns / end_ns intervals (0 for no rows)."""
    if frame.height == 0:
        return 0
    total = intervals.union_ns(frame)
    assert isinstance(total, int)
    return total
