"""`analyze`: every timeline analysis of one trace in one result, the data behind `opscope analyze`.

It prepares the GPU activity once (analysis/activity.py) and hands it to timeline, idle, categories, launch
delay, memcpy and syncs, then adds the top kernels, the ops that launched the most GPU time and the steps.

Until the operator and step analyses of the linking work (analysis/ops.py, analysis/steps.py) are merged,
`ops` and `steps` are computed here in a simpler form, documented in docs/analysis-timeline.md:
- ops: GPU time per launching op (the innermost CPU op or annotation around each launch call), self time
  only: a kernel counts for the op that directly contains its launch, not for that op's parents.
- steps: one row per CPU-side ProfilerStep#N event (user annotation, or cpu_op in 2021 traces): its wall time
  and the GPU busy time inside it.
- unattributed_share: GPU time whose launch call is missing or lies outside every CPU op, over all GPU time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import polars as pl

from opscope.analysis import intervals
from opscope.analysis import window as win
from opscope.analysis.activity import LAUNCH_OP, Activity, TimelineOptions, gpu_activity, with_launch_ops
from opscope.analysis.categories import CATEGORY, CategoryBreakdown, category_breakdown
from opscope.analysis.idle import IdleBreakdown, idle_breakdown
from opscope.analysis.launch_delay import LaunchDelay, launch_delay
from opscope.analysis.launches import LAUNCH_TS
from opscope.analysis.memcpy import MemcpyStats, memcpy_stats
from opscope.analysis.syncs import NO_OP, SyncStats, cpu_spans, sync_calls, sync_stats
from opscope.analysis.timeline import Timeline, timeline
from opscope.model.schema import Col, Kind
from opscope.model.trace import Trace

STEP_PATTERN = re.compile(r"^ProfilerStep#(\d+)$")


@dataclass(frozen=True)
class AnalyzeOptions:
    devices: tuple[int, ...] | None = None
    streams: tuple[int, ...] | None = None
    windows: tuple[tuple[int, int], ...] | None = None  # e.g. the chosen steps' spans; None = whole trace
    top: int = 10  # rows of the kernel, op, launch-delay and sync tables


@dataclass(frozen=True)
class KernelLine:
    name: str
    kind: str
    category: str
    calls: int
    total_ns: int
    share: float  # of the summed GPU time in the window


@dataclass(frozen=True)
class OpLine:
    name: str
    kernels: int
    gpu_time_ns: int
    share: float


@dataclass(frozen=True)
class StepLine:
    name: str
    start_ns: int
    wall_ns: int
    busy_ns: int  # union of GPU activity (all selected devices) inside the step


@dataclass(frozen=True)
class Analysis:
    path: str
    device_names: tuple[str, ...]
    timeline: Timeline
    idle: IdleBreakdown
    categories: CategoryBreakdown
    kernels: tuple[KernelLine, ...]
    ops: tuple[OpLine, ...]
    launch_delay: LaunchDelay
    syncs: SyncStats
    memcpy: MemcpyStats
    steps: tuple[StepLine, ...]
    unattributed_share: float
    gpu_events: int
    linked: int
    missing_launch: int
    duplicate_ids: int
    options: AnalyzeOptions
    warnings: tuple[str, ...] = ()


def _kernels(clipped: pl.DataFrame, top: int) -> tuple[KernelLine, ...]:
    dur = pl.col(intervals.END) - pl.col(intervals.START)
    total = int(clipped.select(dur.sum()).item() or 0) if clipped.height else 0
    grouped = (
        clipped.group_by(Col.NAME, Col.KIND, CATEGORY).agg(pl.len().alias("calls"), dur.sum().alias("total"))
        .sort(["total", Col.NAME], descending=[True, False])
    )
    grouped = grouped.head(top) if top > 0 else grouped
    return tuple(KernelLine(name=r[Col.NAME] or "", kind=r[Col.KIND], category=r[CATEGORY], calls=int(r["calls"]),
                            total_ns=int(r["total"]), share=int(r["total"]) / total if total else 0.0)
                 for r in grouped.iter_rows(named=True))


def _ops(act: Activity, top: int) -> tuple[tuple[OpLine, ...], float]:
    """GPU time per launching op (self), and the unattributed share (see the module doc)."""
    events = act.events.filter(win.starts_inside(act.window, Col.TS_NS))
    total = int(events[Col.DUR_NS].sum() or 0)
    if total == 0:
        return (), 0.0
    linked = events.filter(pl.col(LAUNCH_TS).is_not_null()).with_columns(
        pl.col(LAUNCH_OP).fill_null(NO_OP).alias("op"))
    per = linked.group_by("op").agg(pl.len().alias("n"), pl.col(Col.DUR_NS).sum().alias("t"))
    attributed = int(per.filter(pl.col("op") != NO_OP)["t"].sum() or 0)
    per = per.filter(pl.col("op") != NO_OP).sort(["t", "op"], descending=[True, False])
    per = per.head(top) if top > 0 else per
    rows = tuple(OpLine(name=r["op"], kernels=int(r["n"]), gpu_time_ns=int(r["t"]), share=int(r["t"]) / total)
                 for r in per.iter_rows(named=True))
    return rows, (total - attributed) / total


def _steps(trace: Trace, act: Activity) -> tuple[StepLine, ...]:
    marks = (
        trace.lazy().filter(pl.col(Col.KIND).cast(pl.String).is_in([Kind.USER_ANNOTATION, Kind.CPU_OP])
                            & pl.col(Col.NAME).cast(pl.String).str.contains(STEP_PATTERN.pattern))
        .select(pl.col(Col.NAME).cast(pl.String), Col.TS_NS, Col.DUR_NS).drop_nulls().sort(Col.TS_NS).collect()
    )
    if marks.height == 0:
        return ()
    # One piece per step, not merged (adjacent steps touch): the piece index is the step's row.
    pieces = win.Window(bounds=tuple((s, s + max(d, 0)) for s, d in zip(marks[Col.TS_NS], marks[Col.DUR_NS])))
    inside = win.restrict(act.events, pieces)
    busy = intervals.union_ns(inside, by=[win.PIECE]) if inside.height else None
    per_step = dict(busy.iter_rows()) if isinstance(busy, pl.DataFrame) else {}
    return tuple(StepLine(name=name, start_ns=start, wall_ns=max(dur, 0), busy_ns=int(per_step.get(i, 0)))
                 for i, (name, start, dur) in enumerate(marks.iter_rows()))


def analyze(trace: Trace, options: AnalyzeOptions | None = None) -> Analysis:
    """All timeline analyses of `trace` (see the module doc and docs/analysis-timeline.md)."""
    opts = options or AnalyzeOptions()
    act = gpu_activity(trace, TimelineOptions(devices=opts.devices, streams=opts.streams, windows=opts.windows))
    spans, syncs = cpu_spans(trace), sync_calls(trace)
    act = with_launch_ops(trace, act, spans)
    clipped = act.clipped()
    ops, unattributed = _ops(act, opts.top)
    used = set(clipped[Col.DEVICE].drop_nulls().to_list())
    names = tuple(d.name for d in trace.meta.devices if not used or d.id in used)
    warnings = list(trace.meta.warnings)
    if act.negative_durations:
        warnings.append(f"{act.negative_durations:,} GPU events with a negative duration were left out")
    return Analysis(
        path=trace.path, device_names=names, timeline=timeline(trace, activity=act),
        idle=idle_breakdown(trace, activity=act, syncs=syncs), categories=category_breakdown(clipped),
        kernels=_kernels(clipped, opts.top), ops=ops, launch_delay=launch_delay(trace, activity=act, top=opts.top),
        syncs=sync_stats(trace, act.window, spans, syncs), memcpy=memcpy_stats(trace, activity=act), steps=_steps(trace, act),
        unattributed_share=unattributed, gpu_events=act.launches.gpu_events, linked=act.launches.linked,
        missing_launch=act.launches.missing, duplicate_ids=act.launches.duplicate_ids, options=opts,
        warnings=tuple(warnings),
    )
