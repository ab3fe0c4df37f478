"""Per-CPU-operator time table: one row per operator name (cpu_op events), with calls, total and self time.

This is the minimal table that `opscope.profile(...).summary()`, `opscope run` and `opscope demo` show when a
trace has no GPU activity (a CPU-only capture), so that the output still says where the time went. The full
operator attribution (GPU time per op, shapes, hierarchy) is the `ops` analysis; this module stays small.

Definitions (also in docs/capture.md):
- operators = complete cpu_op events (category `cpu_op`, or `Operator` in 2021-schema traces), except the
  `ProfilerStep#N` step markers that old traces file as operators.
- total = sum of the durations of the op's events (inclusive: nested ops count inside their parents too).
- self = total minus the time of the cpu_op events directly nested inside it on the same thread (a child that
  overruns its parent is clipped to the parent's end; of two events with the same start and duration, the one
  earlier in the file is the parent). Summed over all ops, self time counts every instant of
  operator time on a thread once.
- share = the op's self time / the self time of all cpu_op events in the trace.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from opscope.analysis.timeline.windows import STEP_NAME
from opscope.model.schema import Col, Kind
from opscope.model.trace import Trace


@dataclass(frozen=True)
class CpuOpRow:
    name: str
    calls: int
    total_ns: int
    self_ns: int
    avg_ns: float  # total / calls
    share: float  # self / all self time


@dataclass(frozen=True)
class CpuOpRest:
    rows: int
    calls: int
    self_ns: int
    share: float


@dataclass(frozen=True)
class CpuOpTable:
    path: str
    ops: int  # cpu_op events with a duration
    threads: int
    self_total_ns: int
    rows: tuple[CpuOpRow, ...]  # by self time, largest first; the first `top`
    rest: CpuOpRest | None


def self_times(frame: pl.DataFrame) -> list[int]:
    """Self time of each row of `frame` (columns pid, tid, ts_ns, dur_ns), in the frame's row order.

    One sweep per thread over events sorted by start (longer first at equal start), with a stack of open
    events: each event's time is taken off its innermost open ancestor.
    """
    order = frame.with_row_index("_row").sort([Col.PID, Col.TID, Col.TS_NS, Col.DUR_NS, "_row"],
                                               descending=[False, False, False, True, False])
    self_ns = [0] * frame.height
    stack: list[tuple[int, int]] = []  # (row, end_ns)
    thread = None
    for row, pid, tid, ts, dur in order.select("_row", Col.PID, Col.TID, Col.TS_NS, Col.DUR_NS).iter_rows():
        if (pid, tid) != thread:
            thread, stack = (pid, tid), []
        end = ts + dur
        while stack and stack[-1][1] <= ts:
            stack.pop()
        self_ns[row] += dur
        if stack:
            parent, parent_end = stack[-1]
            self_ns[parent] -= min(end, parent_end) - ts
        stack.append((row, end))
    return self_ns


def cpu_op_table(trace: Trace, top: int = 30) -> CpuOpTable:
    """The per-operator table of `trace` (see the module doc for definitions); `top=0` keeps every row."""
    ops = (
        trace.lazy()
        .filter((pl.col(Col.KIND).cast(pl.String) == Kind.CPU_OP) & pl.col(Col.DUR_NS).is_not_null()
                & ~pl.col(Col.NAME).cast(pl.String).str.contains(STEP_NAME))  # 2021 traces: step markers are ops
        .select(pl.col(Col.NAME).cast(pl.String), pl.col(Col.PID).cast(pl.String), pl.col(Col.TID).cast(pl.String),
                Col.TS_NS, Col.DUR_NS)
        .collect()
    )
    ops = ops.with_columns(pl.Series("self_ns", self_times(ops), dtype=pl.Int64))
    grouped = (
        ops.group_by(Col.NAME)
        .agg(pl.len().alias("calls"), pl.col(Col.DUR_NS).sum().alias("total"), pl.col("self_ns").sum().alias("self"))
        .sort(["self", Col.NAME], descending=[True, False])
    )
    self_total = int(ops["self_ns"].sum() or 0)
    denominator = self_total or 1
    rows = [
        CpuOpRow(name=r[Col.NAME] or "", calls=int(r["calls"]), total_ns=int(r["total"]), self_ns=int(r["self"]),
                 avg_ns=int(r["total"]) / int(r["calls"]), share=int(r["self"]) / denominator)
        for r in grouped.iter_rows(named=True)
    ]
    shown = rows if top <= 0 else rows[:top]
    hidden = rows[len(shown):]
    rest = None
    if hidden:
        hidden_self = sum(r.self_ns for r in hidden)
        rest = CpuOpRest(rows=len(hidden), calls=sum(r.calls for r in hidden), self_ns=hidden_self,
                         share=hidden_self / denominator)
    threads = ops.select(Col.PID, Col.TID).unique().height
    return CpuOpTable(path=trace.path, ops=ops.height, threads=threads, self_total_ns=self_total,
                      rows=tuple(shown), rest=rest)
