"""`analyze`: every timeline analysis of one trace in one result, the data behind `opscope analyze`.

It links the trace once (`analysis.base.linking`), prepares the GPU activity once (analysis/timeline/activity.py) and hands
both to timeline, idle, categories, launch delay, memcpy, syncs, the operator table (`analysis.attribution.ops`) and the
step table (`analysis.attribution.steps`). With `steps` ("3-5"), the analysed window is the union of those steps' spans
and ops / steps are restricted as their own commands do.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import polars as pl

from opscope.analysis.attribution.ops import OpOptions, OpStats, op_stats
from opscope.analysis.attribution.steps import StepOptions, StepStats, step_stats
from opscope.analysis.base import intervals
from opscope.analysis.base.codetag import analysis_tag
from opscope.analysis.base.linking import Linkage, LinkStats, is_trace_link, link
from opscope.analysis.base.parallel import Beside
from opscope.analysis.base.stages import stage
from opscope.analysis.base.stored import kept_value
from opscope.analysis.base.windows import select_windows
from opscope.analysis.findings import Advice, RuleConfig
from opscope.analysis.kernels.categories import CATEGORY, CategoryBreakdown, category_breakdown
from opscope.analysis.kernels.gpu_arch import GpuIdentity, gpu_identity
from opscope.analysis.kernels.summary import duration_warning, without_duration
from opscope.analysis.memory.peaks import DevicePeak, peak_memory
from opscope.analysis.timeline.activity import Activity, TimelineOptions, gpu_activity
from opscope.analysis.timeline.busy import Timeline, timeline
from opscope.analysis.timeline.idle import IdleBreakdown, idle_breakdown
from opscope.analysis.timeline.launch_delay import LaunchDelay, launch_delay
from opscope.analysis.timeline.memcpy import MemcpyStats, memcpy_stats
from opscope.analysis.timeline.syncs import SyncStats, sync_calls, sync_stats
from opscope.model.schema import Col
from opscope.model.trace import Trace
from opscope.tables import Tabular, dataclass_rows


@dataclass(frozen=True)
class AnalyzeOptions:
    devices: tuple[int, ...] | None = None
    streams: tuple[int, ...] | None = None
    steps: str | None = None  # a --steps spec ("3", "3-5", "2,4"); None = the whole trace
    windows: tuple[tuple[int, int], ...] | None = (
        None  # explicit window pieces (API); overrides `steps`' spans
    )
    top: int = 10  # rows of the kernel, op, launch-delay and sync tables
    advise: bool = True  # `rules.advise.advise` runs the advice rules and fills `Analysis.advice`
    rules: RuleConfig | None = None  # threshold overrides (`--rules FILE`); None = the documented defaults
    # refine the findings' predicted savings with the critical-path what-if of their remedies (every view shows
    # the same findings: advise, analyze, report, diff, demo); false: the saving models' estimates alone
    predict: bool = True

    @property
    def whole_trace(self) -> bool:
        """No device, stream, step or window selection: the analyses of the whole trace (those kept beside the
        trace cache)."""
        return not (self.devices or self.streams or self.steps is not None or self.windows is not None)


@dataclass(frozen=True)
class KernelLine:
    name: str
    kind: str
    category: str
    calls: int
    total_ns: int
    share: float  # of the summed GPU time in the window


@dataclass(frozen=True)
class Analysis(Tabular):
    path: str
    device_names: tuple[str, ...]
    timeline: Timeline
    idle: IdleBreakdown
    categories: CategoryBreakdown
    kernels: tuple[KernelLine, ...]
    ops: OpStats
    launch_delay: LaunchDelay
    syncs: SyncStats
    memcpy: MemcpyStats
    steps: StepStats
    unattributed_share: (
        float  # of the selected GPU time, launched outside every CPU op (= ops.unattributed_share)
    )
    link: LinkStats
    options: AnalyzeOptions
    warnings: tuple[str, ...] = ()
    advice: Advice | None = None  # the advice rules' findings (docs/advice.md)
    memory_peaks: tuple[DevicePeak, ...] = ()  # per device with [memory] events (`opscope memory`'s peaks)
    gpu: GpuIdentity | None = None  # the GPU: from the device metadata, else inferred from kernel names

    def _table_rows(self) -> list[dict[str, Any]]:
        """The top kernels of the diagnosis (the other parts: `.ops`, `.steps`, ... have their own tables)."""
        return dataclass_rows(self.kernels)


def _kernels(clipped: pl.DataFrame, top: int) -> tuple[KernelLine, ...]:
    dur = pl.col(intervals.END) - pl.col(intervals.START)
    total = int(clipped.select(dur.sum()).item() or 0) if clipped.height else 0
    grouped = (
        clipped.group_by(Col.NAME, Col.KIND, CATEGORY)
        .agg(pl.len().alias("calls"), dur.sum().alias("total"))
        .sort(["total", Col.NAME], descending=[True, False])
    )
    grouped = grouped.head(top) if top > 0 else grouped
    return tuple(
        KernelLine(
            name=r[Col.NAME] or "",
            kind=r[Col.KIND],
            category=r[CATEGORY],
            calls=int(r["calls"]),
            total_ns=int(r["total"]),
            share=int(r["total"]) / total if total else 0.0,
        )
        for r in grouped.iter_rows(named=True)
    )


def prepare(
    trace: Trace,
    options: AnalyzeOptions | None = None,
    linkage: Linkage | None = None,
    activity: Activity | None = None,
) -> tuple[Linkage, Activity]:
    """The link table and the GPU activity of the analysed window, computed once and shared by `analysis_of`
    and the advice rules. `linkage`: `link(trace)` when the caller already has it; `activity`: the
    `gpu_activity` of the same devices and streams over the whole trace, when the caller already has it (it is
    not reused when steps select windows)."""
    opts = options or AnalyzeOptions()
    windows = _windows(trace, opts)
    linkage = linkage or link(trace)
    stage("GPU activity")
    act = (
        activity
        if activity is not None and windows is None
        else gpu_activity(
            trace, TimelineOptions(devices=opts.devices, streams=opts.streams, windows=windows), linkage
        )
    )
    return linkage, act


def _windows(trace: Trace, opts: AnalyzeOptions) -> tuple[tuple[int, int], ...] | None:
    if opts.windows is None and opts.steps is not None:
        return tuple((w.start_ns, w.end_ns) for w in select_windows(trace, opts.steps))
    return opts.windows


def analyze(
    trace: Trace,
    options: AnalyzeOptions | None = None,
    linkage: Linkage | None = None,
    activity: Activity | None = None,
) -> Analysis:
    """All timeline analyses of `trace` (see the module doc and docs/analysis-timeline.md), without the advice
    rules (`rules.advise.advise` adds them)."""
    opts = options or AnalyzeOptions()
    linkage, act = prepare(trace, opts, linkage, activity)
    return analysis_of(trace, opts, linkage, act)


_BusyIdle = tuple[
    Timeline, IdleBreakdown, CategoryBreakdown, tuple[KernelLine, ...], LaunchDelay, SyncStats, MemcpyStats
]


def _kept(
    trace: Trace, opts: AnalyzeOptions, linkage: Linkage, compute: Callable[[], _BusyIdle]
) -> _BusyIdle:
    """The busy / idle analyses of `analysis_of`: those of the whole trace (no device, stream, step or window
    selection) over the trace's own link table are kept beside the trace cache (`Trace.persisted`), so that
    `analyze`, `advise`, `report`, `diff` and `history add` on the same trace compute them once (issue 25).
    Their code spans the timeline rooms and the ground floor: the key's tag is that of the analysis sources."""
    if not opts.whole_trace or not is_trace_link(trace, linkage) or opts.top < 0:
        return compute()
    return cast(_BusyIdle, kept_value(trace, f"busy_idle-top{opts.top}", analysis_tag(), _BusyIdle, compute))


def analysis_of(trace: Trace, opts: AnalyzeOptions, linkage: Linkage, act: Activity) -> Analysis:
    """The `Analysis` of `trace` over a prepared link table and GPU activity (`prepare`)."""
    stage("operators and steps")
    syncs = sync_calls(trace)
    clipped = act.clipped()

    # the busy / idle analyses beside the op and step tables: polars and numpy, which release the GIL (issue 25:
    # x4 analyze ~0.70 -> ~0.65 s, x64 advise ~4.6 -> ~4.2 s, +20-60 MB); in the report, whose trees already run
    # beside its advice, they run here (`Beside`: one at a time)
    def busy_idle() -> _BusyIdle:
        return (
            timeline(trace, activity=act),
            idle_breakdown(
                trace,
                activity=act,
                syncs=syncs,
                steps=tuple(w for w in select_windows(trace, opts.steps) if w.step is not None),
            ),
            category_breakdown(clipped),
            _kernels(clipped, opts.top),
            launch_delay(trace, activity=act, top=opts.top),
            sync_stats(trace, act.window, linkage, syncs),
            memcpy_stats(trace, activity=act),
        )

    beside = Beside(lambda: _kept(trace, opts, linkage, busy_idle), name="opscope-timeline")
    ops = op_stats(
        trace, OpOptions(top=opts.top, devices=opts.devices, streams=opts.streams, steps=opts.steps), linkage
    )
    steps = step_stats(
        trace, StepOptions(devices=opts.devices, streams=opts.streams, steps=opts.steps), linkage
    )
    used = set(clipped[Col.DEVICE].drop_nulls().to_list())
    names = trace.meta.used_device_names(int(d) for d in used)
    gpu = gpu_identity(trace)
    warnings = [
        *trace.meta.warnings,
        *duration_warning(without_duration(trace)),
        *([gpu.note] if gpu.note else []),
    ]
    stage("busy and idle time, launch delay, syncs, copies")
    busy, idle, categories, kernels, delay, syncs_seen, copies = beside.result()
    return Analysis(
        path=trace.path,
        device_names=names,
        timeline=busy,
        idle=idle,
        categories=categories,
        kernels=kernels,
        ops=ops,
        launch_delay=delay,
        syncs=syncs_seen,
        memcpy=copies,
        steps=steps,
        unattributed_share=ops.unattributed_share,
        link=linkage.stats,
        options=opts,
        warnings=tuple(warnings),
        memory_peaks=peak_memory(trace, opts.steps),
        gpu=gpu,
    )
