"""What `prof.summary()`, `opscope run` and `opscope demo` show for a trace they just captured.

The kernel table is exactly `opscope.summary(opscope.load(path))`. A CPU-only capture has no GPU kernels, so the
per-CPU-operator table (`analysis.attribution.cpu_ops`, the cpu_op rows of `opscope ops`) comes with it, and the rendering shows that one instead, saying why.

Capture returns results; `report` (a layer above) renders them. So that `print(prof.summary())` still shows the
table, the package's top level hands report's text view in through `show_with`; capture never imports report.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from opscope.analysis.attribution.cpu_ops import CpuOpTable, cpu_busy_ns, cpu_op_table
from opscope.analysis.attribution.steps import step_stats
from opscope.analysis.base.linking import Linkage, link
from opscope.analysis.base.windows import step_windows
from opscope.analysis.kernels.summary import KernelSummary, SummaryOptions, kernel_summary
from opscope.loading import load
from opscope.model.trace import Trace
from opscope.tables import Tabular


@dataclass(frozen=True)
class CaptureSummary(Tabular):
    trace_path: str
    device: str  # what ran: "cpu" or "cuda:0 (NVIDIA ...)"
    steps: int  # ProfilerStep markers in the trace
    kernels: KernelSummary  # the `opscope summary` table
    cpu_ops: CpuOpTable  # per CPU operator (the rows shown when there is no GPU activity)

    @property
    def has_gpu_activity(self) -> bool:
        return self.kernels.gpu_calls > 0

    def _table_rows(self) -> list[dict[str, Any]]:
        """The rows `str(summary)` shows: kernels, or the CPU operators of a capture without GPU activity."""
        return self.kernels._table_rows() if self.has_gpu_activity else self.cpu_ops._table_rows()

    def _table_title(self) -> str:
        return f"CaptureSummary: {self.trace_path} ({self.device})"

    def __str__(self) -> str:
        if _text_view:
            return _text_view[0](self)
        return (
            f"CaptureSummary of {self.trace_path} ({self.device}; render it with opscope.report.capture_view)"
        )


_text_view: list[Callable[[CaptureSummary], str]] = []  # set once by the top-level package (`show_with`)


def show_with(view: Callable[[CaptureSummary], str]) -> None:
    """Make `str(summary)` use `view` (the top level passes `report.capture_view.capture_text`)."""
    _text_view[:] = [view]


def summarize(path: str | os.PathLike[str], device: str = "cpu", top: int = 30) -> CaptureSummary:
    trace = load(path)
    markers = sum(1 for w in step_windows(trace) if w.step is not None)
    return CaptureSummary(
        trace_path=str(path),
        device=device,
        steps=markers,
        kernels=kernel_summary(trace, SummaryOptions(top=top)),
        # operators and annotations, as `opscope ops` and the report rank CPU self time
        cpu_ops=cpu_op_table(trace, top, annotations=True),
    )


def utilization(trace: Trace, gpu: bool, linkage: Linkage | None = None) -> float | None:
    """Busy share of the profiled step time, the figure `opscope demo` and `opscope bench` report. On a GPU
    trace, the GPU utilization over the steps exactly as `opscope steps` measures it (`StepStats.busy_share`);
    on a CPU-only trace, the time with at least one CPU operator running / the steps' wall time, by the same
    window arithmetic (`attribution.steps.busy_ns`). None when the trace has no timed events."""
    linked = linkage or link(trace)
    if gpu:
        return step_stats(trace, linkage=linked).busy_share
    windows = step_windows(trace)
    wall_ns = sum(w.dur_ns for w in windows)
    return cpu_busy_ns(trace, windows, linked) / wall_ns if wall_ns else None
