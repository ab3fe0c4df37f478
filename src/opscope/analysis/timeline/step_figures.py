"""Per-step host figures a long run is watched on (`opscope drift`, docs/drift.md), over the ProfilerStep windows:

- host time outside ops: on each thread that holds ProfilerStep markers, the step's wall time not covered by any
  operator or annotation of that thread (cpu_op, user_annotation; the ProfilerStep marker itself left out). The
  Python between the ops: a list walked every step, bookkeeping, logging.
- DataLoader wait: the summed durations of the DataLoader `__next__` calls starting inside a step (the names the
  `dataloader_bound` rule uses).
- allocations: the allocator's `[memory]` records with a positive size inside a step (a profile_memory trace;
  CPU and GPU alike): how often the step asks for memory.
- allocator calls: the runtime's allocation calls inside a step (cudaMalloc / cudaFree / hipMalloc / cuMemAlloc
  ...): the caching allocator going back to the driver.

Each is a total over the steps; the caller divides by the step count. One sorted search per event against the
windows (`intervals.inside_any`) and one union per thread per window (`intervals.covered_per_window`): linear in
the trace, no join of events with windows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from opscope.analysis.base import intervals
from opscope.analysis.base.windows import STEP_NAME, StepWindow, names_matching
from opscope.analysis.timeline.gap_causes import DATALOADER_PATTERN
from opscope.model.schema import Col, Kind
from opscope.model.trace import Trace

# the runtime's allocation calls (also the `host_bound` rule's allocator churn: rules/host.py)
ALLOCATOR_CALL = r"^(cuda|hip)(Free|Malloc)\w*$|^cuMem(Free|Alloc)\w*$|^hipExtMalloc"


@dataclass(frozen=True)
class StepFigures:
    steps: int
    host_outside_ops_ns: int
    dataloader_ns: int
    allocations: int
    allocator_calls: int


def step_figures(trace: Trace, windows: tuple[StepWindow, ...]) -> StepFigures:
    """The totals above over `windows` (ProfilerStep windows; none: all zero)."""
    if not windows:
        return StepFigures(0, 0, 0, 0, 0)
    bounds = [(w.start_ns, w.end_ns) for w in windows]
    name = pl.col(Col.NAME).cast(pl.String)
    host = (
        trace.lazy()
        .filter(pl.col(Col.KIND).cast(pl.String).is_in([Kind.CPU_OP, Kind.USER_ANNOTATION, Kind.RUNTIME]))
        .select(
            pl.col(Col.KIND).cast(pl.String).alias("kind"),
            name.fill_null("").alias("name"),
            pl.col(Col.PID).cast(pl.String).fill_null("").alias("pid"),
            pl.col(Col.TID).cast(pl.String).fill_null("").alias("tid"),
            Col.TS_NS,
            pl.col(Col.DUR_NS).fill_null(0),
        )
        .collect()
    )
    if host.height == 0:
        return StepFigures(len(windows), 0, 0, 0, _allocations(trace, bounds))
    start = host[Col.TS_NS]
    inside = intervals.inside_any(start, start + 1, bounds)
    runtime = host["kind"] == Kind.RUNTIME
    allocator_calls = int((inside & runtime & host["name"].str.contains(ALLOCATOR_CALL)).sum())
    loads = names_matching(host, "name", DATALOADER_PATTERN)
    dataloader_ns = int(host.filter(inside & host["name"].is_in(loads))[Col.DUR_NS].sum() or 0)
    return StepFigures(
        steps=len(windows),
        host_outside_ops_ns=_outside_ops(host.filter(~runtime), windows),
        dataloader_ns=dataloader_ns,
        allocations=_allocations(trace, bounds),
        allocator_calls=allocator_calls,
    )


def _outside_ops(ops: pl.DataFrame, windows: tuple[StepWindow, ...]) -> int:
    """Wall time of the steps on their marker threads not covered by the threads' other ops and annotations."""
    marker = ops["name"].str.contains(STEP_NAME)
    threads = ops.filter(marker).select("pid", "tid").unique(maintain_order=True)
    if threads.height == 0:
        return 0
    work = ops.filter(~marker).join(threads.with_row_index("group"), on=["pid", "tid"], how="inner")
    lo = np.array([w.start_ns for w in windows], dtype=np.int64)
    hi = np.array([w.end_ns for w in windows], dtype=np.int64)
    ts = work[Col.TS_NS].to_numpy().astype(np.int64)
    ends = ts + work[Col.DUR_NS].to_numpy().astype(np.int64)
    group = work["group"].to_numpy().astype(np.int64)
    covered = intervals.covered_per_window(ts, ends, group, threads.height, lo, hi)
    if covered is None:  # the threads' time axes do not fit side by side in int64: one thread at a time
        parts = []
        for g in range(threads.height):
            mine = group == g
            part = intervals.covered_per_window(ts[mine], ends[mine], group[mine] * 0, 1, lo, hi)
            parts.append(part[:, 0] if part is not None else np.zeros(len(lo), dtype=np.int64))
        covered = np.stack(parts, axis=1)
    # a window's marker thread: the one that covers most of it is the step's own; the others add nothing
    wall = hi - lo
    return int(np.maximum(wall - covered.max(axis=1), 0).sum())


def _allocations(trace: Trace, bounds: list[tuple[int, int]]) -> int:
    mem = (
        trace.lazy()
        .filter((pl.col(Col.NAME).cast(pl.String) == "[memory]") & (pl.col(Col.MEM_BYTES) > 0))
        .select(Col.TS_NS)
        .collect()
    )
    if mem.height == 0:
        return 0
    return int(intervals.inside_any(mem[Col.TS_NS], mem[Col.TS_NS] + 1, bounds).sum())
