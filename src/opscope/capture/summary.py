"""What `prof.summary()`, `opscope run` and `opscope demo` show for a trace they just captured.

The kernel table is exactly `opscope.summary(opscope.load(path))`. A CPU-only capture has no GPU kernels, so the
per-CPU-operator table (`analysis.cpu_ops`) comes with it, and the rendering shows that one instead, saying why.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from opscope.analysis.busy import step_windows
from opscope.analysis.cpu_ops import CpuOpTable, cpu_op_table
from opscope.analysis.kernels import KernelSummary, SummaryOptions, kernel_summary
from opscope.loading import load
from opscope.report.document import Document


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

    def document(self) -> Document:
        from opscope.report.capture_view import capture_document

        return capture_document(self)

    def __str__(self) -> str:
        from opscope.report import RenderOptions, render

        return render(self.document(), "table", RenderOptions(width=100))


def summarize(path: str | os.PathLike[str], device: str = "cpu", top: int = 30) -> CaptureSummary:
    trace = load(path)
    markers = sum(1 for w in step_windows(trace) if w.step is not None)
    return CaptureSummary(trace_path=str(path), device=device, steps=markers,
                          kernels=kernel_summary(trace, SummaryOptions(top=top)), cpu_ops=cpu_op_table(trace, top))
