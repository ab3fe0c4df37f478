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

from collections.abc import Sequence

import polars as pl

from opscope.analysis.timeline import intervals
from opscope.analysis.timeline.windows import STEP_NAME, StepWindow, step_windows
from opscope.model.schema import Col
from opscope.model.trace import Trace

# Step windows live in `analysis.timeline.windows` (shared with `opscope steps`, `ops --steps` and the timeline).
__all__ = ["StepWindow", "busy_ns", "step_windows"]


def busy_ns(trace: Trace, kinds: Sequence[str], windows: Sequence[StepWindow]) -> int:
    """Union length of the events of `kinds` inside `windows` (each event clipped to each window); the step
    markers themselves never count."""
    events = (
        trace.lazy()
        .filter(pl.col(Col.KIND).cast(pl.String).is_in(list(kinds)) & pl.col(Col.DUR_NS).is_not_null()
                & ~pl.col(Col.NAME).cast(pl.String).str.contains(STEP_NAME))  # old traces: markers are ops
        .select(pl.col(Col.TS_NS).alias(intervals.START), (pl.col(Col.TS_NS) + pl.col(Col.DUR_NS)).alias(intervals.END))
        .collect()
    )
    total = 0
    for window in windows:
        busy = intervals.union_ns(intervals.clip(events, window.start_ns, window.end_ns))
        assert isinstance(busy, int)
        total += busy
    return total
