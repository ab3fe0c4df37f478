"""opscope: where does the GPU time go, operator by operator, kernel by kernel.

The public API is small::

    trace = opscope.load("trace.pt.trace.json.gz")     # Trace: events as a polars DataFrame + metadata
    table = opscope.summary(trace, top=20)              # KernelSummary: the `opscope summary` rows
    report = opscope.analyze(trace)                     # Analysis: the `opscope analyze` diagnosis

    with opscope.profile(steps=3) as prof:              # capture (needs the torch extra): first 3 steps
        for batch in loader:
            train_step(batch)
            prof.step()
    print(prof.summary())

`profile`, `annotate`, `step`, `measure_overhead` and `compare_strategies` live in `opscope.capture`, which
imports torch only when they run, so `import opscope` works without torch.
"""

from __future__ import annotations

__version__ = "0.1.0"

import logging

from opscope.analysis.kernels import KernelRow, KernelSummary, SummaryOptions, kernel_summary
from opscope.analysis.overview import Analysis, AnalyzeOptions
from opscope.analysis.overview import analyze as _analyze
from opscope.errors import InputError, OpscopeError, UsageError
from opscope.loading import load
from opscope.model import Trace, TraceMeta
from opscope.model.schema import GPU_KINDS
from opscope.untrusted import install_log_filter

# Log records quote paths and names from traces: the filter writes their control characters as visible escapes,
# whatever handler the application or the CLI attaches.
install_log_filter(logging.getLogger("opscope"))

_CAPTURE = ("annotate", "compare_strategies", "measure_overhead", "profile", "step")


def __getattr__(name: str) -> object:
    """The capture API is imported on first use: most users of opscope analyse traces and never capture."""
    if name in _CAPTURE:
        from opscope import capture

        return getattr(capture, name)
    raise AttributeError(f"module 'opscope' has no attribute {name!r}")


def summary(
    trace: Trace,
    *,
    top: int = 30,
    kinds: tuple[str, ...] = GPU_KINDS,
    name_filter: str | None = None,
    devices: tuple[int, ...] | None = None,
    streams: tuple[int, ...] | None = None,
) -> KernelSummary:
    """The per-kernel table, with the same rows as `opscope summary` (top=0 for all rows)."""
    return kernel_summary(trace, SummaryOptions(top=top, kinds=kinds, name_filter=name_filter, devices=devices,
                                                streams=streams))


def analyze(
    trace: Trace,
    *,
    devices: tuple[int, ...] | None = None,
    streams: tuple[int, ...] | None = None,
    steps: str | None = None,
    windows: tuple[tuple[int, int], ...] | None = None,
    top: int = 10,
) -> Analysis:
    """Busy / idle and why, categories, launch delay, syncs, memcpy, top kernels and ops: `opscope analyze`.
    `steps`: a --steps spec ("3-5"); `windows`: explicit (start_ns, end_ns) pieces to analyse instead."""
    return _analyze(trace, AnalyzeOptions(devices=devices, streams=streams, steps=steps, windows=windows, top=top))


__all__ = [
    "Analysis",
    "AnalyzeOptions",
    "InputError",
    "KernelRow",
    "KernelSummary",
    "OpscopeError",
    "SummaryOptions",
    "Trace",
    "TraceMeta",
    "UsageError",
    "__version__",
    "analyze",
    "annotate",
    "compare_strategies",
    "load",
    "measure_overhead",
    "profile",
    "step",
    "summary",
]
