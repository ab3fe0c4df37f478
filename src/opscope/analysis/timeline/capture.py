"""What kind of capture the analysed window is, before any idle figure is blamed on anyone (docs/advice.md,
"Capture type"): steady-state steps, a CUDA / HIP graph capture, compilation (torch.compile, JAX / XLA, Triton
autotuning), a warm-up step much longer than the others, or a whole-process capture with a long head or tail
(the GPU idle before its first and after its last work). The idle rules run on the steady part only (`steady`),
and a capture that is not steady state says what it is and how to profile the steady state.

The tests are names and shares, as data (the tables below), over the event table's name / kind / time columns:
one pass each, no per-row Python.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import polars as pl

from opscope.analysis.base import intervals
from opscope.analysis.base.names import matching, names_of
from opscope.analysis.base.window import STEPS, Window
from opscope.analysis.base.windows import StepWindow
from opscope.model.schema import Col, Kind
from opscope.model.trace import Trace

STEADY: Final = "steady_state"
GRAPH_CAPTURE: Final = "graph_capture"
COMPILATION: Final = "compilation"
WARM_UP: Final = "warm_up"
HEAD_TAIL: Final = "long_head_or_tail"

# Calls and Python frames that only a graph capture makes (CUDA / HIP runtime; torch.cuda.graphs).
CAPTURE_NAMES = (
    r"^(cuda|hip)Stream(Begin|End)Capture|^(cuda|hip)StreamGetCaptureInfo|^(cuda|hip)GraphInstantiate"
    r"|cuda/graphs\.py\(\d+\): capture_(begin|end)"
)
LAUNCH_NAMES = (
    r"^(cuda|hip)LaunchKernel|^(cuda|hip)ExtModuleLaunchKernel|^cuLaunchKernel|^hipModuleLaunchKernel"
)
CAPTURED_PER_KERNEL = 2.0  # a capture: at least this many launch calls per kernel that ran
# Work that compiles rather than runs: TorchDynamo / Inductor frames, Triton autotuning, XLA compilation.
COMPILE_NAMES = (
    r"torch/_dynamo/|torch/_inductor/|TorchDynamo|compile_fx|CachingAutotuner|benchmark_all_configs"
    r"|(?i:xlacompile|backendcompile|pjrt.*compile|compile_or_get_cached)"
)
COMPILE_SHARE = 0.25  # compilation covers at least this share of the window
WARM_UP_FACTOR = 3.0  # the first step at least this many times the median of the others
MIN_STEPS_FOR_WARM_UP = 3
HEAD_TAIL_SHARE = 0.5  # no step markers, and the head + tail are at least this share of the window

ADVICE: Final[dict[str, str]] = {
    GRAPH_CAPTURE: "This window records a CUDA / HIP graph being captured (launch calls recorded, few kernels "
    "run): its idle time is the capture, not the workload. Profile the replays instead: start the profiler "
    "after the warm-up and capture phase (torch.profiler.schedule(wait=..., warmup=..., active=...)).",
    COMPILATION: "Most of this window is compilation (torch.compile / XLA / Triton autotuning), which happens "
    "once: profile after it (schedule(wait, warmup, active) with warm-up steps that cover the compilation).",
    WARM_UP: "The first step is much longer than the others (warm-up: allocator, cuDNN autotuning, lazy "
    "initialisation); it is left out of the idle findings. Use schedule(wait, warmup, active) to skip it.",
    HEAD_TAIL: "The GPU is idle for most of this window before its first or after its last work (a "
    "whole-process capture): only the part between them is analysed for idle time. Profile the steps you care "
    "about (torch.profiler with a schedule, or nsys --capture-range).",
    STEADY: "",
}


@dataclass(frozen=True)
class Capture:
    kind: str  # one of the constants above
    detail: str  # the measured reason, for people
    head_ns: int  # GPU idle from the window's start to the first GPU work
    tail_ns: int  # GPU idle from the last GPU work to the window's end
    steady: tuple[
        tuple[int, int], ...
    ]  # the pieces the idle rules read (empty: none, the window is not steady)

    @property
    def advice(self) -> str:
        return ADVICE[self.kind]

    @property
    def steady_ns(self) -> int:
        return sum(hi - lo for lo, hi in self.steady)


def _count(trace: Trace, kinds: tuple[str, ...], pattern: str) -> int:
    """Events of `kinds` whose name matches `pattern`, counted from the trace's (kind, name) table."""
    return int(matching(trace, kinds, pattern)["count"].sum() or 0)


def _compile_ns(trace: Trace, window: Window) -> int:
    """The time compilation events cover inside the window (their union)."""
    kinds = [Kind.CPU_OP, Kind.USER_ANNOTATION, Kind.PYTHON]
    names = names_of(trace, kinds, COMPILE_NAMES)
    if not names:  # most traces: no scan of the events at all
        return 0
    spans = (
        trace.lazy()
        .filter(pl.col(Col.KIND).is_in(kinds))
        .filter(pl.col(Col.NAME).is_in(names))
        .select(
            pl.col(Col.TS_NS).alias(intervals.START),
            (pl.col(Col.TS_NS) + pl.col(Col.DUR_NS)).alias(intervals.END),
        )
        .collect()
    )
    if spans.height == 0:
        return 0
    pieces = [intervals.clip(spans, lo, hi) for lo, hi in window.bounds]
    return int(intervals.union_ns(pl.concat([p.collect() for p in pieces])))  # type: ignore[arg-type]


def classify(
    trace: Trace, window: Window, gpu: pl.DataFrame, steps: tuple[StepWindow, ...], kernels: int
) -> Capture:
    """`gpu`: the GPU activity cut to the window (start_ns, end_ns); `steps`: the ProfilerStep windows analysed;
    `kernels`: the kernels that ran in the window."""
    total = window.total_ns
    first = int(gpu[intervals.START].min() or 0) if gpu.height else None  # type: ignore[arg-type]
    last = int(gpu[intervals.END].max() or 0) if gpu.height else None  # type: ignore[arg-type]
    head = first - window.start_ns if first is not None and window.start_ns is not None else 0
    tail = window.end_ns - last if last is not None and window.end_ns is not None else 0
    if _count(trace, (Kind.RUNTIME, Kind.DRIVER, Kind.PYTHON), CAPTURE_NAMES):
        launches = _count(trace, (Kind.RUNTIME, Kind.DRIVER), LAUNCH_NAMES)
        if launches >= CAPTURED_PER_KERNEL * max(kernels, 1):
            detail = f"graph capture calls, {launches:,} launch calls for {kernels:,} kernels that ran"
            return Capture(GRAPH_CAPTURE, detail, head, tail, ())
    compiled = _compile_ns(trace, window)
    if total > 0 and compiled >= COMPILE_SHARE * total:
        detail = f"compilation covers {compiled / total * 100:.0f}% of the window"
        return Capture(COMPILATION, detail, head, tail, ())
    if window.source == STEPS:  # the user chose the steps: they are the steady part
        return Capture(STEADY, "the chosen steps", head, tail, window.bounds)
    if steps:
        durations = sorted(w.dur_ns for w in steps[1:])
        median = durations[len(durations) // 2] if durations else 0
        if len(steps) >= MIN_STEPS_FOR_WARM_UP and median > 0 and steps[0].dur_ns >= WARM_UP_FACTOR * median:
            detail = f"the first step takes {steps[0].dur_ns / median:.1f}x the median of the others"
            return Capture(WARM_UP, detail, head, tail, _merged(steps[1:]))
        return Capture(STEADY, f"{len(steps)} steps", head, tail, _merged(steps))
    if first is None or last is None or last <= first:
        return Capture(STEADY, "no GPU work", head, tail, window.bounds)
    steady = tuple(
        (max(lo, first), min(hi, last)) for lo, hi in window.bounds if min(hi, last) > max(lo, first)
    )
    if total > 0 and head + tail >= HEAD_TAIL_SHARE * total:
        detail = f"the GPU idles {head / 1e6:,.3f} ms before its first work and {tail / 1e6:,.3f} ms after its last"
        return Capture(HEAD_TAIL, detail, head, tail, steady)
    return Capture(STEADY, "no step markers: from the first to the last GPU work", head, tail, steady)


def _merged(steps: tuple[StepWindow, ...]) -> tuple[tuple[int, int], ...]:
    frame = pl.DataFrame(
        {intervals.START: [w.start_ns for w in steps], intervals.END: [w.end_ns for w in steps]},
        schema={intervals.START: pl.Int64, intervals.END: pl.Int64},
    )
    merged = intervals.merge(frame)
    return tuple(zip(merged[intervals.START].to_list(), merged[intervals.END].to_list(), strict=True))
