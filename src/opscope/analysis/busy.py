"""Step windows and busy time: the two figures a capture comparison needs from a trace it just wrote.

- step windows: the `ProfilerStep#N` spans (CPU-side user annotations written by `torch.profiler` on each
  `step()`; category `Operator` in 2021-schema traces); a trace without them is one window from its first event's start to its last event's end.
- busy time of some event kinds inside the windows: the length of the union of their intervals clipped to
  each window, so two overlapping events (two streams, two threads) count once.

`opscope bench` reports busy / window length as utilization: GPU kernels, memcpys and memsets on a GPU trace
("GPU busy %"), cpu_op events on a CPU-only trace ("share of wall time inside profiled operators").
The full timeline analysis (idle causes, per-stream overlap) is a separate analysis; this one stays small.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from opscope.model.schema import Col, Kind
from opscope.model.trace import Trace

STEP_NAME = re.compile(r"^ProfilerStep#(\d+)$")


@dataclass(frozen=True)
class StepWindow:
    step: int | None  # N of ProfilerStep#N; None for the whole-trace window
    start_ns: int
    end_ns: int

    @property
    def dur_ns(self) -> int:
        return self.end_ns - self.start_ns


def step_windows(trace: Trace) -> tuple[StepWindow, ...]:
    """ProfilerStep#N windows in step order; without markers, one window over every event with a duration."""
    marks = (
        trace.lazy()
        .filter(pl.col(Col.KIND).cast(pl.String).is_in([Kind.USER_ANNOTATION, Kind.CPU_OP])
                & pl.col(Col.DUR_NS).is_not_null()
                & pl.col(Col.NAME).cast(pl.String).str.contains(STEP_NAME.pattern))
        .select(pl.col(Col.NAME).cast(pl.String), Col.TS_NS, Col.DUR_NS)
        .collect()
    )
    windows = []
    for name, ts, dur in marks.iter_rows():
        match = STEP_NAME.match(name)
        assert match is not None
        windows.append(StepWindow(int(match.group(1)), ts, ts + dur))
    if windows:
        return tuple(sorted(windows, key=lambda w: (w.step or 0, w.start_ns)))
    span = (
        trace.lazy()
        .filter(pl.col(Col.DUR_NS).is_not_null() & (pl.col(Col.KIND).cast(pl.String) != Kind.TRACE))
        .select(pl.col(Col.TS_NS).min().alias("lo"), (pl.col(Col.TS_NS) + pl.col(Col.DUR_NS)).max().alias("hi"))
        .collect()
    )
    lo, hi = span.row(0)
    return () if lo is None else (StepWindow(None, int(lo), int(hi)),)


def union_ns(starts: np.ndarray, ends: np.ndarray) -> int:
    """Length of the union of the intervals [start, end)."""
    keep = ends > starts
    starts, ends = starts[keep], ends[keep]
    if starts.size == 0:
        return 0
    order = np.argsort(starts, kind="stable")
    starts, ends = starts[order], ends[order]
    reach = np.maximum.accumulate(ends)  # furthest end seen so far
    new_run = np.empty(starts.size, dtype=bool)
    new_run[0] = True
    new_run[1:] = starts[1:] > reach[:-1]
    run_id = np.cumsum(new_run) - 1
    run_start = starts[new_run]
    run_end = np.zeros(run_start.size, dtype=ends.dtype)
    np.maximum.at(run_end, run_id, ends)
    return int((run_end - run_start).sum())


def busy_ns(trace: Trace, kinds: Sequence[str], windows: Sequence[StepWindow]) -> int:
    """Union length of the events of `kinds` inside `windows` (each event clipped to each window)."""
    events = (
        trace.lazy()
        .filter(pl.col(Col.KIND).cast(pl.String).is_in(list(kinds)) & pl.col(Col.DUR_NS).is_not_null())
        .select(Col.TS_NS, (pl.col(Col.TS_NS) + pl.col(Col.DUR_NS)).alias("end"))
        .collect()
    )
    starts = events[Col.TS_NS].to_numpy().astype(np.int64)
    ends = events["end"].to_numpy().astype(np.int64)
    total = 0
    for window in windows:
        total += union_ns(np.clip(starts, window.start_ns, window.end_ns), np.clip(ends, window.start_ns, window.end_ns))
    return total
