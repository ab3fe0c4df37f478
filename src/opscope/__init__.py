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

    with opscope.profile_jax("logs") as jprof:          # JAX (the jax extra): jax.profiler.trace
        train_step(batch)
    trace = jprof.load()                                # its .xplane.pb, HLO ops and modules included
    rows = opscope.lines(trace).rows                    # GPU time by the line of your code (with_stack)
Every command's result is a function here (`summary`, `analyze`, `advise`, `ops`, `tree`, `steps`, `lines`,
`kernels`, `efficiency`, `memory`, `critical_path`, `diff`, `ranks`, `link`), and every result has `.to_polars()`
and `.to_pandas()` (text columns as `pl.String`), a compact table as its Jupyter view, and `print(result)` shows
the command's terminal table (`opscope.tables.Tabular`).

`profile`, `annotate`, `step`, `measure_overhead` and `compare_strategies` live in `opscope.capture`, which
imports torch only when they run, so `import opscope` works without torch.
"""

from __future__ import annotations

import importlib
import logging
import os
from typing import TYPE_CHECKING

from opscope._version import __version__
from opscope.errors import InputError, OpscopeError, UsageError
from opscope.tables import TEXT_WIDTH, set_text_renderer
from opscope.untrusted import install_log_filter

# Log records quote paths and names from traces: the filter writes their control characters as visible escapes,
# whatever handler the application or the CLI attaches.
install_log_filter(logging.getLogger("opscope"))

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path

    from opscope.analysis.advised import Advised
    from opscope.analysis.attribution.lines import SourceLines
    from opscope.analysis.attribution.ops import OpStats
    from opscope.analysis.attribution.steps import StepStats
    from opscope.analysis.attribution.tree import OpTree
    from opscope.analysis.base.linking import Linkage
    from opscope.analysis.compare.diff import TraceDiff
    from opscope.analysis.compare.ranks import RanksReport
    from opscope.analysis.critical_path.stats import CriticalPathStats
    from opscope.analysis.efficiency.table import Efficiency, EfficiencyRow
    from opscope.analysis.kernels.launch_config import LaunchReport
    from opscope.analysis.kernels.summary import KernelRow, KernelSummary, SummaryOptions
    from opscope.analysis.memory.summary import MemoryStats
    from opscope.analysis.overview import Analysis, AnalyzeOptions
    from opscope.analysis.validity import Validity
    from opscope.history.api import History
    from opscope.ingest.progress import ProgressCallback
    from opscope.model import Trace, TraceMeta
    from opscope.report.document import Document

# Everything else is imported on first use, so that `import opscope` (and the CLI's start-up, `--help`,
# `formats`) does not pay for polars and pyarrow: name -> module that defines it.
_LAZY = {
    "Advised": "opscope.analysis.advised",
    "CriticalPathStats": "opscope.analysis.critical_path.stats",
    "LaunchReport": "opscope.analysis.kernels.launch_config",
    "MemoryStats": "opscope.analysis.memory.summary",
    "Efficiency": "opscope.analysis.efficiency.table",
    "EfficiencyRow": "opscope.analysis.efficiency.table",
    "KernelRow": "opscope.analysis.kernels.summary",
    "KernelSummary": "opscope.analysis.kernels.summary",
    "SummaryOptions": "opscope.analysis.kernels.summary",
    "Analysis": "opscope.analysis.overview",
    "AnalyzeOptions": "opscope.analysis.overview",
    "Validity": "opscope.analysis.validity",
    "History": "opscope.history.api",
    "Linkage": "opscope.analysis.base.linking",
    "OpStats": "opscope.analysis.attribution.ops",
    "SourceLines": "opscope.analysis.attribution.lines",
    "StepStats": "opscope.analysis.attribution.steps",
    "OpTree": "opscope.analysis.attribution.tree",
    "TraceDiff": "opscope.analysis.compare.diff",
    "RanksReport": "opscope.analysis.compare.ranks",
    "Tabular": "opscope.tables",
    "Trace": "opscope.model",
    "TraceMeta": "opscope.model",
    # the capture API: most users of opscope analyse traces and never capture (and it needs torch)
    "annotate": "opscope.capture",
    "compare_strategies": "opscope.capture",
    "measure_overhead": "opscope.capture",
    "profile": "opscope.capture",
    "profile_jax": "opscope.capture.jax_profile",  # JAX: jax.profiler.trace, read back as an xplane
    "step": "opscope.capture",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'opscope' has no attribute {name!r}")
    import importlib

    if module == "opscope.capture":
        from opscope.capture.summary import show_with
        from opscope.report.capture_view import capture_text

        show_with(capture_text)  # capture returns results, report renders them: wired here, above both
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def load(
    path: str | os.PathLike[str] | None = None,
    *,
    cache: bool = True,
    strict: bool = False,
    progress: ProgressCallback | None = None,
    repair: Sequence[str] | str | None = None,
) -> Trace:
    """Read a trace (a file, a folder's newest trace, or with `None` the default log folder: $PROFILER_LOG_DIR,
    else ./trace_logs) into a `Trace` (`opscope.loading.load`: `cache`, `strict`, `progress`). `repair`:
    read it repaired, as `--repair` does: `("overlaps",)` cuts GPU work that runs past the next work on its
    stream to that start (docs/validity.md); the trace then says so (`trace.meta.repairs`,
    `opscope.validity(trace).repaired`). Raises `OpscopeError` (an unknown repair: `UsageError`)."""
    from opscope.analysis.validity import repaired
    from opscope.analysis.validity.repair import repair_names
    from opscope.loading import load as _load

    wanted = repair_names(repair)
    trace = _load(path, cache=cache, strict=strict, progress=progress)
    return repaired(trace, wanted) if wanted else trace


def validity(trace: Trace) -> Validity:
    """What would make the trace's figures wrong, checked once per trace (docs/validity.md): `.checks` (each
    with `check`, `severity`, `events`, `gpu_time_ns`, `share`, `message`, `examples`, `detail`),
    `.banners()` (the lines every view shows), `.data()` (the JSON `validity` list), `.repaired`."""
    from opscope.analysis.validity import validity as _validity

    return _validity(trace)


def summary(
    trace: Trace,
    *,
    top: int = 30,
    kinds: tuple[str, ...] | None = None,
    name_filter: str | None = None,
    devices: tuple[int, ...] | None = None,
    streams: tuple[int, ...] | None = None,
    steps: str | None = None,
) -> KernelSummary:
    """The per-kernel table, with the same rows as `opscope summary` (top=0 for all rows); `steps`: a --steps
    spec ("3-5")."""
    from opscope.analysis.kernels.summary import SummaryOptions, kernel_summary
    from opscope.model.schema import GPU_KINDS

    if kinds is None:
        kinds = GPU_KINDS
    return kernel_summary(
        trace,
        SummaryOptions(
            top=top, kinds=kinds, name_filter=name_filter, devices=devices, streams=streams, steps=steps
        ),
    )


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
    from opscope.analysis.overview import AnalyzeOptions
    from opscope.analysis.rules.advise import advise as _advise

    return _advise(
        trace, AnalyzeOptions(devices=devices, streams=streams, steps=steps, windows=windows, top=top)
    )


def efficiency(
    trace: Trace,
    *,
    by_shape: bool = True,
    top: int = 0,
    peak_tflops: float | None = None,
    peak_tbps: float | None = None,
) -> Efficiency:
    """FLOP/s, bytes/s and percent of peak per op (and shape): `opscope efficiency`. `.rows`, `.unsized`,
    `.to_polars()`, `.to_pandas()`; definitions in docs/efficiency.md."""
    from opscope.analysis.efficiency.table import EfficiencyOptions
    from opscope.analysis.efficiency.table import efficiency as _efficiency

    return _efficiency(
        trace, EfficiencyOptions(by_shape=by_shape, top=top, peak_tflops=peak_tflops, peak_tbps=peak_tbps)
    )


def advise(
    trace: Trace,
    *,
    devices: tuple[int, ...] | None = None,
    streams: tuple[int, ...] | None = None,
    steps: str | None = None,
) -> Advised:
    """What to fix first: `opscope advise`'s findings, largest predicted saving first (`.advice.findings` with
    their evidence; `.analysis`: the figures behind them, as `opscope.analyze`)."""
    from opscope.analysis.advised import Advised
    from opscope.analysis.overview import AnalyzeOptions
    from opscope.analysis.rules.advise import advise as _advise

    return Advised(_advise(trace, AnalyzeOptions(devices=devices, streams=streams, steps=steps)))


def memory(
    trace: Trace, *, devices: tuple[str, ...] | None = None, steps: str | None = None, top: int = 20
) -> MemoryStats:
    """Peaks, who allocates, what stays live, per step: `opscope memory` (`devices`: names such as "cuda:0";
    top=0 for every operator row). Definitions: docs/memory.md."""
    from opscope.analysis.memory.summary import MemoryOptions, memory_stats

    return memory_stats(trace, MemoryOptions(devices=devices, steps=steps, top=top))


def critical_path(
    trace: Trace, *, steps: str | None = None, what_if: Sequence[str] = (), top: int = 10
) -> CriticalPathStats:
    """The chain of dependent work that bounds each step: `opscope critical-path` (`what_if`: 'REGEX:FACTOR'
    specs; top=0 for every event on the path). Definitions: docs/critical-path.md."""
    from opscope.analysis.base.linking import link
    from opscope.analysis.critical_path.host_frames import with_host_frames
    from opscope.analysis.critical_path.path import WhatIf
    from opscope.analysis.critical_path.stats import critical_path_stats

    rules = [WhatIf.parse(spec) for spec in what_if]
    linkage = link(trace)
    return with_host_frames(
        trace, linkage, critical_path_stats(trace, steps, rules, top=top, linkage=linkage)
    )


def kernels(trace: Trace, *, top: int = 30, name_filter: str | None = None) -> LaunchReport:
    """Per-kernel launch configuration and theoretical occupancy: `opscope kernels` (top=0 for all rows)."""
    from opscope.analysis.kernels.launch_config import LaunchOptions, launch_config

    return launch_config(trace, LaunchOptions(top=top, name_filter=name_filter))


def _render_text(result: object) -> str | None:
    """The terminal table of `result`, as its command prints it (wired into `opscope.tables`: results are
    computed below `report`, rendered by it)."""
    from opscope.report.render import RenderOptions, render

    document = _document(result)
    return None if document is None else render(document, "table", RenderOptions(width=TEXT_WIDTH))


# result class -> (its view module, the function that makes its Document): imported only when printed
_VIEWS = {
    "KernelSummary": ("summary_view", "summary_document"),
    "OpStats": ("ops_view", "ops_document"),
    "StepStats": ("steps_view", "steps_document"),
    "OpTree": ("tree_view", "tree_document"),
    "Efficiency": ("efficiency_view", "efficiency_document"),
    "MemoryStats": ("memory_view", "memory_document"),
    "CriticalPathStats": ("critical_path_view", "critical_path_document"),
    "SourceLines": ("lines_view", "lines_document"),
    "LaunchReport": ("kernels_view", "kernels_document"),
    "TraceDiff": ("diff_view", "diff_document"),
    "RanksReport": ("ranks_view", "ranks_document"),
}


def _document(result: object) -> Document | None:
    name = type(result).__name__
    if name == "Analysis":
        from opscope.report.analyze_view import analyze_document
        from opscope.report.memory_brief import with_peaks

        return with_peaks(analyze_document(result), result.memory_peaks)  # type: ignore[arg-type,attr-defined]
    if name == "Advised":
        from opscope.report.advice_view import advise_document

        return advise_document(result.analysis)  # type: ignore[attr-defined]
    if name not in _VIEWS:
        return None
    module, function = _VIEWS[name]
    make: Callable[[object], Document] = getattr(
        importlib.import_module(f"opscope.report.{module}"), function
    )
    return make(result)


set_text_renderer(_render_text)


def _trace(trace: Trace | str | Path) -> Trace:
    from opscope.model import Trace

    return trace if isinstance(trace, Trace) else load(trace)


def ops(
    trace: Trace,
    *,
    top: int = 30,
    by_shape: bool = False,
    devices: tuple[int, ...] | None = None,
    streams: tuple[int, ...] | None = None,
    steps: str | None = None,
) -> OpStats:
    """The per-operator table of `opscope ops` (top=0 for all rows)."""
    from opscope.analysis.attribution.ops import OpOptions, op_stats

    return op_stats(
        trace, OpOptions(by_shape=by_shape, top=top, devices=devices, streams=streams, steps=steps)
    )


def tree(
    trace: Trace,
    *,
    depth: int = 4,
    min_share: float = 0.05,
    python: str = "modules",
    devices: tuple[int, ...] | None = None,
    streams: tuple[int, ...] | None = None,
    steps: str | None = None,
) -> OpTree:
    """The GPU-time hierarchy of `opscope tree` (module -> op -> kernel); depth=0 for all levels."""
    from opscope.analysis.attribution.tree import TreeOptions, op_tree

    return op_tree(
        trace,
        TreeOptions(
            depth=depth, min_share=min_share, python=python, devices=devices, streams=streams, steps=steps
        ),
    )


def steps(
    trace: Trace,
    *,
    devices: tuple[int, ...] | None = None,
    streams: tuple[int, ...] | None = None,
    select: str | None = None,
) -> StepStats:
    """Per-step, per-device figures of `opscope steps`; `select`: a --steps spec ("3-5")."""
    from opscope.analysis.attribution.steps import StepOptions, step_stats

    return step_stats(trace, StepOptions(devices=devices, streams=streams, steps=select))


def lines(
    trace: Trace,
    *,
    top: int = 30,
    depth: int = 1,
    keep: Sequence[str] = (),
    skip_prefixes: Sequence[str] = (),
    devices: tuple[int, ...] | None = None,
    streams: tuple[int, ...] | None = None,
    steps: str | None = None,
) -> SourceLines:
    """GPU time by the line of the user's code that launched it, as `opscope lines` (top=0 for all rows;
    `keep`: framework groups counted as the user's code, "torch", "stdlib", "builtins", "compiled")."""
    from opscope.analysis.attribution.frames import FrameFilter
    from opscope.analysis.attribution.lines import LineOptions, source_lines

    frames = FrameFilter(keep=tuple(keep), skip_prefixes=tuple(skip_prefixes))
    return source_lines(
        trace,
        LineOptions(top=top, depth=depth, frames=frames, devices=devices, streams=streams, steps=steps),
    )


def diff(
    base: Trace | str | Path,
    new: Trace | str | Path,
    *,
    per_step: bool | None = None,
    by_shape: bool = False,
    key_ops: tuple[str, ...] = (),
) -> TraceDiff:
    """What changed from `base` to `new` (traces or paths), as `opscope diff`."""
    from opscope.analysis.compare.diff import DiffOptions, diff_traces

    return diff_traces(
        _trace(base), _trace(new), DiffOptions(per_step=per_step, by_shape=by_shape, key_ops=key_ops)
    )


def ranks(traces: Sequence[Trace | str | Path], *, top: int = 10, threshold: float = 0.30) -> RanksReport:
    """One trace per rank of a job (traces or paths), compared rank by rank, as `opscope ranks`."""
    from opscope.analysis.compare.ranks import RanksOptions, compare_ranks, rank_partial

    return compare_ranks(
        [rank_partial(_trace(t)) for t in traces], RanksOptions(top=top, threshold=threshold)
    )


def link(trace: Trace) -> Linkage:
    """The kernel-to-operator table: every GPU event with its launch call, innermost operator and call stack
    (`.to_polars()`: one row per GPU event; `.scopes`: the CPU ops; `.stats`: what could not be linked).
    Columns: docs/analysis-attribution.md."""
    from opscope.analysis.base.linking import link as _link

    return _link(trace)


__all__ = [
    "Advised",
    "Analysis",
    "AnalyzeOptions",
    "CriticalPathStats",
    "Efficiency",
    "EfficiencyRow",
    "History",
    "InputError",
    "KernelRow",
    "KernelSummary",
    "LaunchReport",
    "Linkage",
    "MemoryStats",
    "OpStats",
    "OpTree",
    "OpscopeError",
    "RanksReport",
    "SourceLines",
    "StepStats",
    "SummaryOptions",
    "Tabular",
    "Trace",
    "TraceDiff",
    "TraceMeta",
    "UsageError",
    "Validity",
    "__version__",
    "advise",
    "analyze",
    "annotate",
    "compare_strategies",
    "critical_path",
    "diff",
    "efficiency",
    "kernels",
    "lines",
    "link",
    "load",
    "measure_overhead",
    "memory",
    "ops",
    "profile",
    "profile_jax",
    "ranks",
    "step",
    "steps",
    "summary",
    "tree",
    "validity",
]
