"""Per-CPU-operator table: the view of `opscope ops` that `opscope.profile(...).summary()`, `opscope run` and
`opscope demo` show when a trace has no GPU activity (a CPU-only capture), so that the output still says where
the time went; and the CPU operators' busy time per step.

Nothing is computed twice: the rows are the `cpu_op` rows of `analysis.attribution.ops.op_stats` (calls, CPU
total, CPU self: one definition of self time, the vectorised nesting of `analysis.base.nesting`), and
busy time is `analysis.attribution.steps.busy_ns`, the busy time of `opscope steps`. Definitions
(docs/capture.md, docs/analysis-attribution.md):
- operators = the rows of `opscope ops` whose kind is cpu_op (category `cpu_op`, or `Operator` in 2021-schema
  traces), without the ProfilerStep#N markers that old traces file as operators.
- total, self = `ops`' CPU total and CPU self: self is the duration minus the durations of the direct child
  ops and user annotations on the same thread, clipped at 0.
- share = the op's self time / the self time of all the rows.
- with `annotations` (the HTML report's CPU panel): the user annotations too (`record_function` ranges,
  `ProfilerStep#*`), every row of `opscope ops` ranked by CPU self time as `ops`' CPU table ranks them, so the
  panel and the command name the same first row (issue 28: the panel left out an annotation `ops` ranked first).
- busy = per step window, the union of the cpu_op intervals cut to the window (overlapping threads count once).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from opscope.analysis.attribution.ops import OpOptions, op_stats
from opscope.analysis.attribution.steps import busy_ns
from opscope.analysis.base.linking import Linkage, link
from opscope.analysis.base.windows import STEP_ANY, STEP_NAME, StepWindow, names_matching
from opscope.model.schema import Col, Kind
from opscope.model.trace import Trace
from opscope.tables import Tabular, dataclass_rows


@dataclass(frozen=True)
class CpuOpRow:
    name: str
    kind: str  # cpu_op, or user_annotation with `annotations`
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
class CpuOpTable(Tabular):
    path: str
    ops: int  # cpu_op events with a duration
    threads: int
    self_total_ns: int
    rows: tuple[CpuOpRow, ...]  # by self time, largest first; the first `top`
    rest: CpuOpRest | None
    annotations: bool = False  # the rows include user annotations (`cpu_op_table(annotations=True)`)

    def _table_rows(self) -> list[dict[str, Any]]:
        return dataclass_rows(self.rows)


def _cpu_ops(linkage: Linkage) -> pl.DataFrame:
    """The cpu_op events that are operators (not step markers): pid, tid, ts_ns, dur_ns (>= 0)."""
    scopes = linkage.scopes.filter(pl.col(Col.KIND) == Kind.CPU_OP)
    markers = names_matching(scopes, Col.NAME, STEP_NAME)  # the pattern on distinct names, not on every op
    return scopes.filter(~pl.col(Col.NAME).is_in(markers)).select(
        Col.PID, Col.TID, Col.TS_NS, pl.col(Col.DUR_NS).clip(lower_bound=0)
    )


def cpu_op_table(
    trace: Trace, top: int = 30, linkage: Linkage | None = None, annotations: bool = False
) -> CpuOpTable:
    """The per-operator table of `trace` (see the module doc); `top=0` keeps every row; `annotations`: the
    user annotations too (the rows of `opscope ops`, ranked by CPU self time)."""
    linked = linkage or link(trace)
    stats = op_stats(trace, OpOptions(top=0), linked)
    ops = sorted(
        (r for r in stats.rows if annotations or (r.kind == Kind.CPU_OP and r.name != STEP_ANY)),
        key=lambda r: (-r.cpu_self_ns, r.name),
    )
    self_total = sum(r.cpu_self_ns for r in ops)
    denominator = self_total or 1
    rows = [
        CpuOpRow(
            name=r.name,
            kind=r.kind,
            calls=r.calls,
            total_ns=r.cpu_total_ns,
            self_ns=r.cpu_self_ns,
            avg_ns=r.cpu_total_ns / r.calls,
            share=r.cpu_self_ns / denominator,
        )
        for r in ops
    ]
    shown = rows if top <= 0 else rows[:top]
    hidden = rows[len(shown) :]
    rest = None
    if hidden:
        hidden_self = sum(r.self_ns for r in hidden)
        rest = CpuOpRest(
            rows=len(hidden),
            calls=sum(r.calls for r in hidden),
            self_ns=hidden_self,
            share=hidden_self / denominator,
        )
    threads = _cpu_ops(linked).select(Col.PID, Col.TID).unique().height
    return CpuOpTable(
        path=trace.path,
        ops=sum(r.calls for r in rows),
        threads=threads,
        self_total_ns=self_total,
        rows=tuple(shown),
        rest=rest,
        annotations=annotations,
    )


def cpu_busy_ns(trace: Trace, windows: tuple[StepWindow, ...], linkage: Linkage | None = None) -> int:
    """Time with at least one CPU operator running, per window, summed over the windows (`steps.busy_ns`)."""
    return sum(cpu_busy_per_window(trace, windows, linkage))


def cpu_busy_per_window(
    trace: Trace, windows: tuple[StepWindow, ...], linkage: Linkage | None = None
) -> tuple[int, ...]:
    """Time with at least one CPU operator running in each window (`steps.busy_ns`), in the windows' order."""
    busy = busy_ns(_cpu_ops(linkage or link(trace)), windows)
    return tuple(busy.get((i,), 0) for i in range(len(windows)))
