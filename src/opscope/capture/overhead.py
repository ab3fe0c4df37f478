"""Tracing overhead: how much `opscope.profile` slows the workload it measures, so users know how far to trust
a trace.

The same workload runs untraced and traced, in interleaved pairs (the order alternates between pairs, so slow
drift of clocks or thermals hits both sides evenly), after warm-up runs that are discarded: `warmup` untraced
runs, then one traced run (the profiler library initialises itself once per process). Each run is timed with
`perf_counter`, bracketed by `torch.cuda.synchronize` on a GPU. The traced time covers the workload only;
starting the profiler and processing its events afterwards are reported apart (`finalize_s`).
Intrusion of pair i = traced_i / untraced_i - 1; the result gives its median, quartiles and range.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from typing import Any

from opscope.capture._torch import describe_device, pick_device
from opscope.capture.profiler import Profile, ProfileOptions
from opscope.capture.timing import Spread, time_call, timing_method
from opscope.errors import UsageError


@dataclass(frozen=True)
class OverheadResult:
    device: str
    timing: str  # how runs were timed
    capture: str  # the schedule traced runs used
    warmup: int
    untraced_s: tuple[float, ...]
    traced_s: tuple[float, ...]  # the workload under the profiler (start-up and finalisation excluded)
    finalize_s: tuple[float, ...]  # stopping the profiler and processing its events, after each traced run
    warnings: tuple[str, ...] = ()

    @property
    def repeats(self) -> int:
        return len(self.untraced_s)

    @property
    def untraced(self) -> Spread:
        return Spread.of(self.untraced_s)

    @property
    def traced(self) -> Spread:
        return Spread.of(self.traced_s)

    @property
    def intrusion(self) -> Spread:
        """traced_i / untraced_i - 1 over the pairs (0.12 = 12% slower when traced)."""
        return Spread.of([t / u - 1.0 for t, u in zip(self.traced_s, self.untraced_s, strict=True) if u > 0])

    @property
    def noisy(self) -> bool:
        """The untraced runs alone vary (IQR) more than the measured intrusion: the figure is mostly noise."""
        return self.untraced.relative_iqr > abs(self.intrusion.median)


def measure_overhead(
    fn: Callable[[], Any],
    *,
    repeats: int = 5,
    warmup: int = 1,
    options: ProfileOptions | None = None,
    device: str | None = None,
    step_marks: Callable[[Profile], AbstractContextManager[Any]] | None = None,
) -> OverheadResult:
    """Run `fn` untraced and traced (`options`, default: the whole call traced) and compare the times.
    `step_marks(prof)`, a context manager opened around each traced run, marks steps the way the profiled run
    does (`opscope run` passes its optimizer-step hook), so a step schedule sees the same steps in both."""
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise UsageError(f"repeats must be a positive number, got {repeats!r}")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise UsageError(f"warmup must be 0 or more, got {warmup!r}")
    chosen = pick_device(device)
    traced_options = replace(options or ProfileOptions(), save=False)
    warnings: list[str] = []

    def traced() -> tuple[float, float]:
        prof = Profile(traced_options)
        prof.log_warnings = False
        with step_marks(prof) if step_marks is not None else contextlib.nullcontext(), prof:
            elapsed = time_call(fn, chosen)
            stop_from = time.perf_counter()
        finalize = time.perf_counter() - stop_from
        warnings.extend(w for w in prof.warnings if w not in warnings)
        return elapsed, finalize

    for _ in range(warmup):
        time_call(fn, chosen)
    traced()
    untraced_s, traced_s, finalize_s = [], [], []
    for pair in range(repeats):
        if pair % 2:
            elapsed, finalize = traced()
            untraced_s.append(time_call(fn, chosen))
        else:
            untraced_s.append(time_call(fn, chosen))
            elapsed, finalize = traced()
        traced_s.append(elapsed)
        finalize_s.append(finalize)
    return OverheadResult(
        device=describe_device(chosen),
        timing=timing_method(chosen),
        capture=traced_options.schedule.describe(),
        warmup=warmup,
        untraced_s=tuple(untraced_s),
        traced_s=tuple(traced_s),
        finalize_s=tuple(finalize_s),
        warnings=tuple(warnings),
    )
