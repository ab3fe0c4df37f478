"""What `prof.summary()`, `opscope run` and `opscope demo` show for a trace they just captured.

The kernel table is exactly `opscope.summary(opscope.load(path))`. A CPU-only capture has no GPU kernels, so the
per-CPU-operator table (`analysis.cpu_ops`) comes with it, and the rendering shows that one instead, saying why.

Capture returns results; `report` (a layer above) renders them. So that `print(prof.summary())` still shows the
table, the package's top level hands report's text view in through `show_with`; capture never imports report.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from opscope.analysis.busy import step_windows
from opscope.analysis.cpu_ops import CpuOpTable, cpu_op_table
from opscope.analysis.kernels.summary import KernelSummary, SummaryOptions, kernel_summary
from opscope.ingest import load


@dataclass(frozen=True)
class CaptureSummary:
    trace_path: str
    device: str  # what ran: "cpu" or "cuda:0 (NVIDIA ...)"
    steps: int  # ProfilerStep markers in the trace
    kernels: KernelSummary  # the `opscope summary` table
    cpu_ops: CpuOpTable  # per CPU operator (the rows shown when there is no GPU activity)

    @property
    def has_gpu_activity(self) -> bool:
        return self.kernels.gpu_calls > 0

    def __str__(self) -> str:
        if _text_view:
            return _text_view[0](self)
        return f"CaptureSummary of {self.trace_path} ({self.device}; render it with opscope.report.capture_view)"


_text_view: list[Callable[[CaptureSummary], str]] = []  # set once by the top-level package (`show_with`)


def show_with(view: Callable[[CaptureSummary], str]) -> None:
    """Make `str(summary)` use `view` (the top level passes `report.capture_view.capture_text`)."""
    _text_view[:] = [view]


def summarize(path: str | os.PathLike[str], device: str = "cpu", top: int = 30) -> CaptureSummary:
    trace = load(path)
    markers = sum(1 for w in step_windows(trace) if w.step is not None)
    return CaptureSummary(trace_path=str(path), device=device, steps=markers,
                          kernels=kernel_summary(trace, SummaryOptions(top=top)), cpu_ops=cpu_op_table(trace, top))
