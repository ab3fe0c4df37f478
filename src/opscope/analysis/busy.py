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

import polars as pl

from opscope.analysis import intervals
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


def busy_ns(trace: Trace, kinds: Sequence[str], windows: Sequence[StepWindow]) -> int:
    """Union length of the events of `kinds` inside `windows` (each event clipped to each window); the step
    markers themselves never count."""
    events = (
        trace.lazy()
        .filter(pl.col(Col.KIND).cast(pl.String).is_in(list(kinds)) & pl.col(Col.DUR_NS).is_not_null()
                & ~pl.col(Col.NAME).cast(pl.String).str.contains(STEP_NAME.pattern))  # old traces: markers are ops
        .select(pl.col(Col.TS_NS).alias(intervals.START), (pl.col(Col.TS_NS) + pl.col(Col.DUR_NS)).alias(intervals.END))
        .collect()
    )
    total = 0
    for window in windows:
        busy = intervals.union_ns(intervals.clip(events, window.start_ns, window.end_ns))
        assert isinstance(busy, int)
        total += busy
    return total
