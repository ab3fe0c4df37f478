"""Every result the HTML report of one trace shows, computed once: the link table and the GPU activity are built
once and shared by every analysis below, as `opscope analyze` shares them.

`trace_bundle(trace)` is the one place where a report's analyses run; the report (report/html/) receives the
`TraceBundle` and only lays it out, so a figure in the page is the figure of the command named beside it
(`SOURCES` in report/html/trace_report.py). Each field is the result of the analysis of the same name, with the
options its command uses; the few report-only derivations (GPU time per category inside each step, the category
of kernel-table rows that are not in the window, the CPU lanes of the timeline) are computed here too.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from opscope.analysis.attribution.cpu_ops import CpuOpTable, cpu_busy_per_window, cpu_op_table
from opscope.analysis.attribution.lines import LineOptions, SourceLines, source_lines
from opscope.analysis.attribution.stacks import LaunchStacks, launch_stacks
from opscope.analysis.attribution.steps import StepStats
from opscope.analysis.attribution.tree import OpTree, TreeOptions, op_trees
from opscope.analysis.base.linking import Linkage, link
from opscope.analysis.base.parallel import Beside
from opscope.analysis.base.stages import stage
from opscope.analysis.base.windows import StepWindow, overlap_pairs, select_windows
from opscope.analysis.critical_path.stats import CriticalPathStats, critical_path_stats
from opscope.analysis.efficiency.table import Efficiency, EfficiencyOptions, efficiency
from opscope.analysis.findings import Advice
from opscope.analysis.kernels.categories import CATEGORY, CategoryBreakdown, categories_of
from opscope.analysis.kernels.metrics import MetricsJoin, join_metrics
from opscope.analysis.kernels.summary import KernelSummary, SummaryOptions, kernel_summary
from opscope.analysis.memory.summary import MemoryOptions, MemoryStats, memory_stats
from opscope.analysis.overview import Analysis, AnalyzeOptions
from opscope.analysis.rules.advise import advise
from opscope.analysis.timeline.activity import Activity, TimelineOptions, gpu_activity
from opscope.analysis.timeline.busy import Timeline
from opscope.analysis.timeline.lanes import CpuLanes, cpu_lanes
from opscope.analysis.timeline.launch_delay import LaunchDelay, kernel_delays
from opscope.analysis.timeline.memcpy import MemcpyStats
from opscope.model.ncu import NcuMetrics
from opscope.model.schema import Col
from opscope.model.trace import Trace

FLAME_MIN_SHARE = 1 / 5000  # flame siblings lighter than this share of the total fold into "(N more)"
CRITICAL_PATH_STEPS = 64  # the report's critical-path panel: the first steps only (each needs its own graph)
MEMORY_TOP = 20  # top allocating ops and live blocks in the memory panel
EFFICIENCY_ROWS = 500  # efficiency rows in the report
CPU_ROWS = 30  # rows of the CPU operator table
LINES_ROWS = 200  # rows of the "By source" table (`opscope lines --top LINES_ROWS`)


@dataclass(frozen=True)
class BundleOptions:
    devices: tuple[int, ...] | None = None
    streams: tuple[int, ...] | None = None
    kernel_rows: int = 5_000  # kernel-table rows the report ships; their categories are computed here


@dataclass(frozen=True)
class TraceBundle:
    """The results behind one HTML report (see the module doc)."""

    trace: Trace
    options: BundleOptions
    linkage: Linkage
    activity: Activity  # the GPU activity of the selected devices and streams over the whole trace
    summary: KernelSummary  # `opscope summary --top 0`
    kernel_categories: dict[tuple[str | None, str | None], str]  # (raw name, kind) -> category, shipped rows
    tree: OpTree  # `opscope tree --depth 0`: module instances merged by type (Layer x24)
    instances: OpTree  # `--modules instances`: one node per instance
    timeline: Timeline
    categories: CategoryBreakdown
    steps: StepStats  # `opscope steps`
    step_categories: pl.DataFrame  # win (index into steps.rows), category, t (ns clipped to the step)
    step_cpu_busy: tuple[int, ...]  # per steps.rows window: ns with at least one CPU operator running
    kernel_delays: pl.DataFrame  # per measured kernel: the launch delay (`launch_delay.DELAY`), by row
    launch_delay: LaunchDelay
    memcpy: MemcpyStats
    advice: Advice | None  # `opscope advise`
    analysis: (
        Analysis  # `opscope analyze` with that advice: the figures of the report's brief (`opscope brief`)
    )
    critical_path: CriticalPathStats  # the first CRITICAL_PATH_STEPS steps
    memory: MemoryStats  # `opscope memory --top MEMORY_TOP`
    efficiency: (
        Efficiency  # `opscope efficiency --top EFFICIENCY_ROWS` (on CPU time when there is no GPU activity)
    )
    cpu_ops: CpuOpTable  # operators and annotations by CPU self time, as `opscope ops` ranks them
    cpu_lanes: CpuLanes  # the CPU side of the timeline over the analysed window
    lines: SourceLines  # `opscope lines --top LINES_ROWS`: GPU time by the user's source line
    stacks: LaunchStacks  # the Python stack of each launch (the timeline's kernel details)
    ncu: MetricsJoin | None = None  # an Nsight Compute export joined to the kernels (`report --metrics`)


# what the report computes beside its advice: the two op trees, the critical path of the first steps, the CPU
# lanes of the timeline and each step's CPU busy time
_Beside = tuple[tuple[OpTree, OpTree], CriticalPathStats, CpuLanes, tuple[StepWindow, ...], tuple[int, ...]]


def trace_bundle(
    trace: Trace, options: BundleOptions | None = None, ncu: NcuMetrics | None = None
) -> TraceBundle:
    """Every result of `trace`'s HTML report, each analysis run once over one link table and one activity;
    with `ncu`, its metrics joined to the trace's kernels (as `opscope kernels --metrics`)."""
    opts = options or BundleOptions()
    devices, streams = opts.devices, opts.streams
    linkage = link(trace)
    act = gpu_activity(trace, TimelineOptions(devices=devices, streams=streams), linkage)
    summary = kernel_summary(trace, SummaryOptions(top=0, devices=devices, streams=streams))
    # a trace without GPU activity (a CPU-only capture): the efficiency view measures the ops' CPU time
    basis = "gpu" if summary.gpu_calls else "cpu"
    flame = TreeOptions(depth=0, min_share=FLAME_MIN_SHARE, devices=devices, streams=streams)
    lo, hi = act.window.start_ns or 0, act.window.end_ns or 0

    # the two op trees (~0.5 s at x64) and the critical path's step graphs (~1.3 s) beside the advice: numpy and
    # polars that release the GIL. The trees first: they hold the most memory, and the advice's largest stage
    # (efficiency) comes last (issue 25: x64 7.1-7.4 -> 6.7-6.9 s, peak 1.30-1.38 -> 1.32-1.40 GB)
    # then the CPU lanes and the steps' CPU busy time (~0.7 s at x64), which came after the advice on this thread
    # alone: the thread beside is done with the path ~1 s before the advice (issue 25). Its steps are those of
    # the step table (`step_stats`: `select_windows` of every step), checked below
    def beside_advice() -> _Beside:
        windows = select_windows(trace, None)
        return (
            op_trees(trace, flame, linkage),
            critical_path_stats(
                trace, rules=(), top=0, linkage=linkage, max_windows=CRITICAL_PATH_STEPS, processes=False
            ),
            cpu_lanes(trace, act, lo, hi),
            windows,
            cpu_busy_per_window(trace, windows, linkage),
        )

    # not kept beside the trace cache on their own: the report keeps its whole page (cli/report.page_data), and
    # encoding and checking these (35 MB at x64) cost a first report ~0.45 s (issue 25)
    beside = Beside(beside_advice)
    analysis = advise(trace, AnalyzeOptions(devices=devices, streams=streams, predict=True), linkage, act)
    # the step table, the busy timeline and the copies are the analysis's own (same options, same activity):
    # computed once, shown in both the report's panels and its analysis payload (issue 25, item 3)
    steps = analysis.steps
    (tree, instances), critical_path, lanes, windows, cpu_busy = _waited(beside)
    table_windows = tuple(r.window for r in steps.rows)
    if windows != table_windows:  # not the step table's steps: its own
        cpu_busy = cpu_busy_per_window(trace, table_windows, linkage)
    return TraceBundle(
        trace=trace,
        options=opts,
        linkage=linkage,
        activity=act,
        summary=summary,
        kernel_categories=_kernel_categories(summary, act, opts.kernel_rows),
        tree=tree,
        instances=instances,
        timeline=analysis.timeline,
        categories=analysis.categories,  # `category_breakdown` of the same activity, computed there
        steps=steps,
        step_categories=_step_categories(act.events, steps),
        step_cpu_busy=cpu_busy,
        kernel_delays=kernel_delays(act)[0],
        launch_delay=analysis.launch_delay,  # `launch_delay` of the same activity (top 10), computed there
        memcpy=analysis.memcpy,
        advice=analysis.advice,
        analysis=analysis,
        critical_path=critical_path,
        memory=memory_stats(trace, MemoryOptions(top=MEMORY_TOP)),
        efficiency=efficiency(
            trace,
            EfficiencyOptions(top=EFFICIENCY_ROWS, devices=devices, streams=streams, basis=basis),
            linkage,
        ),
        cpu_ops=cpu_op_table(trace, top=CPU_ROWS, linkage=linkage, annotations=True),
        cpu_lanes=lanes,
        lines=source_lines(trace, LineOptions(top=LINES_ROWS, devices=devices, streams=streams), linkage),
        stacks=launch_stacks(trace, linkage),
        ncu=join_metrics(trace, ncu) if ncu is not None else None,
    )


def _waited(beside: Beside[_Beside]) -> _Beside:
    stage("op trees and the critical path of the first steps")
    return beside.result()


def _kernel_categories(
    summary: KernelSummary, act: Activity, rows: int
) -> dict[tuple[str | None, str | None], str]:
    """The category of each of the first `rows` kernel-table rows: taken from the activity's events, which
    already carry it (each distinct name classified once); rows outside them are classified together."""
    known: dict[tuple[str | None, str | None], str] = dict(
        ((n, k), c)
        for n, k, c in act.events.select(
            pl.col(Col.NAME).cast(pl.String), pl.col(Col.KIND).cast(pl.String), CATEGORY
        )
        .unique()
        .iter_rows()
    )
    shipped = [(r.raw_name if r.raw_name is not None else r.name, r.kind) for r in summary.rows[:rows]]
    missing = [key for key in shipped if key not in known]
    if missing:
        known.update(categories_of(missing))
    return {key: known[key] for key in shipped}


def _step_categories(events: pl.DataFrame, stats: StepStats) -> pl.DataFrame:
    """The summed GPU time per category clipped to each step window (win: index into `stats.rows`)."""
    empty = pl.DataFrame(schema={"win": pl.Int64, CATEGORY: pl.String, "t": pl.Int64})
    if not stats.from_markers or not stats.rows:
        return empty
    chosen = tuple(r.window for r in stats.rows)
    start = events[Col.TS_NS].to_numpy()
    end = start + np.maximum(events[Col.DUR_NS].to_numpy(), 0)
    event, window = overlap_pairs(start, end, chosen)
    lo = np.array([w.start_ns for w in chosen], dtype=np.int64)[window]
    hi = np.array([w.end_ns for w in chosen], dtype=np.int64)[window]
    pieces = pl.DataFrame(
        {
            "win": window,
            CATEGORY: events[CATEGORY].gather(event),
            "t": np.minimum(end[event], hi) - np.maximum(start[event], lo),
        }
    )
    return pieces.group_by("win", CATEGORY).agg(pl.col("t").sum()).sort(CATEGORY)
