"""One trace's computed results -> the plain data of its HTML report (`opscope.report/1`): headline, kernels,
categories, steps, timeline, operator -> kernel flame graph, launch-delay histogram and memcpy table.

This module only lays out the results of the analyses, computed once in `analysis/bundle.py` (`trace_bundle`),
into JSON-ready dicts; the browser code in report/html/assets/*.js draws them, and tests
check these dicts against independent recomputations. Text that comes from the trace (kernel, op, file names)
lives once in `strings` and is referenced by index; the HTML writer escapes it for the <script> block and the
page puts it into the DOM as text only.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import polars as pl

from opscope.analysis.attribution.tree import OpTree, TreeNode
from opscope.analysis.base.linking import ROW
from opscope.analysis.bundle import TraceBundle
from opscope.analysis.kernels.categories import CATEGORY
from opscope.analysis.kernels.metrics import LaunchMetrics, MetricsJoin
from opscope.analysis.timeline.activity import LAUNCH_NAME, LAUNCH_OP
from opscope.analysis.timeline.launch_delay import DELAY
from opscope.model.schema import Col
from opscope.report import names
from opscope.report.advice_view import findings_data
from opscope.report.brief_view import brief_data
from opscope.report.html.cpu_lanes import cpu_lanes
from opscope.report.html.cpu_panel import cpu_panel
from opscope.report.html.critical_path_report import critical_path_panel
from opscope.report.html.efficiency_report import SOURCE as EFFICIENCY_SOURCE
from opscope.report.html.efficiency_report import efficiency_report
from opscope.report.html.findings_panel import findings_panel
from opscope.report.html.lines_panel import lines_panel, with_stacks
from opscope.report.html.memory_panel import memory_panel
from opscope.report.html.timeline_data import TimelineOptions as LaneOptions
from opscope.report.html.timeline_data import pack_timeline
from opscope.report.idle_view import page_rows, step_page_rows
from opscope.report.summary_view import summary_data

SCHEMA = "opscope.report/1"
DELAY_EDGES_US = (0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000)
SOURCES = {
    "headline": "analysis/base/window.py, analysis/timeline/busy.py, analysis/kernels/categories.py (as opscope analyze)",
    "kernels": "analysis/kernels/summary.py (as opscope summary), category from analysis/kernels/categories.py; "
    "with --metrics, Nsight Compute metrics from analysis/kernels/metrics.py (as opscope kernels --metrics)",
    "categories": "analysis/kernels/categories.py (as opscope analyze)",
    "steps": "analysis/attribution/steps.py (as opscope steps); category sums per step in analysis/bundle.py",
    "timeline": "analysis/timeline/activity.py (linking, categories) + report/html/timeline_data.py",
    "flame": "analysis/attribution/tree.py (as opscope tree; flame_instances as opscope tree --modules instances)",
    "launch_delay": "analysis/timeline/launch_delay.py (as opscope analyze)",
    "memcpy": "analysis/timeline/memcpy.py (as opscope analyze)",
    "brief": "report/brief_view.py over analyze's figures and advise's findings (as opscope brief)",
    "findings": "analysis/rules/ (as opscope advise; docs/advice.md)",
    "critical_path": "analysis/critical_path/ (as opscope critical-path) + report/html/critical_path_report.py",
    "memory": "analysis/memory/summary.py (as opscope memory) + report/html/memory_panel.py",
    "efficiency": EFFICIENCY_SOURCE,
    "lines": "analysis/attribution/lines.py (as opscope lines); stacks: analysis/attribution/stacks.py",
    "cpu": "analysis/attribution/cpu_ops.py (the CPU operators of opscope ops, as opscope run and demo print them)",
}
# The panels of the page, in its order (templates/trace.html.j2; a panel's section id is its key with "-" for
# "_"). A trace without GPU activity (a CPU-only capture) has no GPU panels: they would be empty.
PANELS = (
    "brief",
    "findings",
    "headline",
    "timeline",
    "lines",
    "cpu",
    "critical_path",
    "kernels",
    "categories",
    "steps",
    "flame",
    "efficiency",
    "launch_delay",
    "memcpy",
    "memory",
)
GPU_PANELS = frozenset({"timeline", "lines", "kernels", "categories", "flame", "launch_delay", "memcpy"})


@dataclass(frozen=True)
class ReportOptions:
    max_events: int = 200_000  # timeline rectangles shipped (see timeline_data.py)
    max_rows: int = 5_000  # kernel-table rows shipped (the heaviest); the rest summed in `kernels.rest`


class Strings:
    """The report's string table: each distinct text once, referenced by index."""

    def __init__(self) -> None:
        self.items: list[str] = []
        self._index: dict[str, int] = {}

    def __call__(self, text: str | None) -> int:
        key = text or ""
        found = self._index.get(key)
        if found is None:
            found = self._index[key] = len(self.items)
            self.items.append(key)
        return found


def _us(ns: float | None) -> float | None:
    return None if ns is None else round(ns / 1e3, 3)


def trace_report(bundle: TraceBundle, options: ReportOptions | None = None) -> dict[str, Any]:
    """The report payload of a trace's computed results (see the module doc and docs/reports.md)."""
    opts = options or ReportOptions()
    strings = Strings()
    trace, act, summary = bundle.trace, bundle.activity, bundle.summary
    device_names = {
        int(d): trace.meta.device_name(int(d)) for d in act.events[Col.DEVICE].drop_nulls().unique().to_list()
    }
    categories = _categories(bundle)
    panels = [p for p in PANELS if bundle.summary.gpu_calls or p not in GPU_PANELS]
    return {
        "schema": SCHEMA,
        "kind": "trace",
        "trace": {
            "path": trace.path,
            "format": trace.meta.format,
            "events": summary.events,
            "kernels": summary.kernels,
            "devices": list(summary.devices),
            "rank": trace.meta.rank,
        },
        "headline": _headline(bundle, device_names, categories),
        "kernels": _kernels(bundle, summary_data(summary), strings, opts.max_rows),
        "categories": categories,
        "steps": _steps(bundle),
        "timeline": _timeline(bundle, strings, device_names, opts),
        "flame": _flame(bundle.tree.root, bundle.tree.gpu_time_ns, strings),
        "flame_instances": _flame_instances(bundle.instances, bundle.tree, strings),
        "launch_delay": _launch_delay(bundle),
        "memcpy": _memcpy(bundle),
        "brief": brief_data(bundle.analysis, trace.meta)["lines"],  # the lines of opscope brief
        "findings": findings_data(bundle.advice),  # the same rows as opscope advise --format json
        # the same findings laid out for people, with timeline links (report/html/findings_panel.py)
        "findings_panel": findings_panel(bundle.advice, act.window.start_ns or 0, strings),
        "critical_path": critical_path_panel(bundle.critical_path, act.window.start_ns, strings),
        "memory": memory_panel(bundle.memory),
        "efficiency": efficiency_report(bundle.efficiency, strings),
        "cpu": cpu_panel(bundle.cpu_ops),  # the CPU operator view (report/html/cpu_panel.py)
        "idle_causes": page_rows(bundle.analysis),  # why the GPU was idle (report/idle_view.py)
        "idle_causes_steps": step_page_rows(bundle.analysis),  # the same, step by step
        "lines": lines_panel(bundle.lines, strings),  # "By source" (report/html/lines_panel.py)
        "diagnosis": [],  # plain-language findings, when the caller has them (opscope demo)
        "panels": panels,  # the panels the page shows; the others are hidden
        "sources": {p: SOURCES[p] for p in panels},  # "About this report": exactly the panels shown
        "warnings": list(trace.meta.warnings),
        "strings": strings.items,
    }


def _headline(
    bundle: TraceBundle, names: dict[int, str | None], cats: list[dict[str, Any]]
) -> dict[str, Any]:
    tl, act = bundle.timeline, bundle.activity
    devices = [
        {
            "device": d.device,
            "name": names.get(d.device) if d.device is not None else None,
            "busy_us": _us(d.busy_ns),
            "utilization": round(d.utilization, 6),
        }
        for d in tl.devices
    ]
    mean_util = sum(d.utilization for d in tl.devices) / len(tl.devices) if tl.devices else 0.0
    return {
        "window_start_ns": act.window.start_ns or 0,
        "window_us": _us(tl.window_ns),
        "gpu_time_us": _us(bundle.summary.gpu_time_ns),
        "busy_pct": round(mean_util * 100, 3),
        "idle_pct": round((1 - mean_util) * 100, 3) if tl.devices else 100.0,
        "devices": devices,
        "top_category": cats[0]["category"] if cats else None,
        "top_category_share": cats[0]["share"] if cats else None,
    }


CHART_NAME_WIDTH = 52  # characters of a kernel name on a chart axis


def _kernels(bundle: TraceBundle, data: dict[str, Any], strings: Strings, max_rows: int) -> dict[str, Any]:
    """The kernel table, each row with its category (the bundle's `kernel_categories`).

    A page cannot hold 300,000 table rows (76 MB, a browser that stops answering): beyond `max_rows` only the
    heaviest rows travel, and `rest` accounts for the others (rows, calls, time, share) so that the page can say
    what it left out; `full` names the files with every row when the CLI writes them beside the page."""
    known = bundle.kernel_categories
    shipped, left = data["rows"][:max_rows], data["rows"][max_rows:]  # heaviest first (as `summary`)
    short = names.shorten_all([row["name"] for row in shipped], CHART_NAME_WIDTH)  # the terminal's shortening
    join = bundle.ncu
    rows = [
        {
            **row,
            "name": strings(row["name"]),
            "raw_name": strings(row["raw_name"]),
            "short_name": strings(s),
            CATEGORY: known[(row["raw_name"], row["kind"])],
            **({"ncu": _ncu_row(join.by_name.get(row["raw_name"]))} if join is not None else {}),
        }
        for row, s in zip(shipped, short, strict=True)
    ]
    rest = None
    if left:
        rest = {
            "rows": len(left),
            "calls": sum(r["calls"] for r in left),
            "total_us": round(sum(r["total_us"] for r in left), 3),
            "share": round(sum(r["share"] for r in left), 6),
        }
    return {
        "totals": data["totals"],
        "rows": rows,
        "rows_total": len(data["rows"]),
        "rest": rest,
        "full": None,
        "ncu": _ncu_join(join),
    }


NCU_ROW_METRICS = (
    "sm_throughput_pct",
    "memory_throughput_pct",
    "dram_throughput_pct",
    "achieved_occupancy_pct",
    "theoretical_occupancy_pct",
    "l1_hit_rate_pct",
    "l2_hit_rate_pct",
)


def _ncu_row(found: LaunchMetrics | None) -> dict[str, Any] | None:
    """A kernel row's joined Nsight Compute metrics (means over its paired launches), as `kernels --metrics`."""
    if found is None:
        return None
    values = {
        k: None if found.values.get(k) is None else round(found.values[k] or 0.0, 3) for k in NCU_ROW_METRICS
    }
    return {
        "launches": found.launches,
        **values,
        "bound": found.bound,
        "occupancy_limiter": found.occupancy_limiter,
        "flags": list(found.flags),
    }


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _ncu_join(join: MetricsJoin | None) -> dict[str, Any] | None:
    if join is None:
        return None
    return {
        "path": join.path,
        "layout": join.layout,
        "profiled_launches": join.profiled_launches,
        "matched_launches": join.matched_launches,
        "unmatched_kernels": list(join.unmatched_kernels),
    }


def _categories(bundle: TraceBundle) -> list[dict[str, Any]]:
    breakdown = bundle.categories
    return [
        {
            "category": r.category,
            "calls": r.calls,
            "total_us": _us(r.total_ns),
            "busy_us": _us(r.busy_ns),
            "share": round(r.share, 6),
        }
        for r in breakdown.rows
    ]


def _steps(bundle: TraceBundle) -> list[dict[str, Any]]:
    """Per ProfilerStep#N: wall and GPU busy time from analysis/attribution/steps.py (busy: the mean over the devices),
    the summed GPU time per category clipped to the step (the bundle's `step_categories`), and the time with at
    least one CPU operator running (the bundle's `step_cpu_busy`, what `opscope demo` reports on a CPU)."""
    stats = bundle.steps
    if not stats.from_markers:
        return []
    by_window: dict[int, dict[str, float | None]] = {}
    for window_index, category, t in bundle.step_categories.iter_rows():
        by_window.setdefault(int(window_index), {})[category] = _us(t)
    out = []
    for i, row in enumerate(stats.rows):
        busy = [d.busy_ns for d in row.devices]
        out.append(
            {
                "name": row.window.name,
                "start_ns": row.window.start_ns,
                "wall_us": _us(row.window.dur_ns),
                "busy_us": _us(sum(busy) / len(busy) if busy else 0),
                "by_category": by_window.get(i, {}),
                "cpu_busy_us": _us(bundle.step_cpu_busy[i]),
            }
        )
    return out


def _ids(frame: pl.DataFrame, column: str, strings: Strings) -> pl.Expr:
    """The string-table index of each value of `column` (null stays null); one lookup per distinct value."""
    mapping = {v: strings(v) for v in frame[column].drop_nulls().unique().sort().to_list()}
    return pl.col(column).replace_strict(mapping, default=None, return_dtype=pl.Int64)


def _timeline(
    bundle: TraceBundle, strings: Strings, device_names: dict[int, str | None], opts: ReportOptions
) -> dict[str, Any]:
    """Every selected GPU event with its launch op and launch delay (analysis/timeline/launch_delay.py's measure)."""
    act, measured = bundle.activity, bundle.kernel_delays
    events = act.events.join(measured.select(ROW, DELAY), on=ROW, how="left", maintain_order="left")
    events, python = with_stacks(events, bundle.stacks, strings)
    frame = events.select(
        Col.DEVICE,
        Col.STREAM,
        Col.TS_NS,
        Col.DUR_NS,
        _ids(events, Col.NAME, strings).alias("name_id"),
        _ids(events, LAUNCH_OP, strings).fill_null(-1).alias("op_id"),
        pl.col(DELAY).alias("delay_ns"),
        _ids(events, CATEGORY, strings).alias("cat_id"),
        _ids(events, LAUNCH_NAME, strings).fill_null(-1).alias("launch_id"),
        "py",
    )
    lo, hi = act.window.start_ns or 0, act.window.end_ns or 0
    names: dict[int | None, str | None] = {d: n for d, n in device_names.items()}
    packed = pack_timeline(frame, lo, hi, strings, names, LaneOptions(max_events=opts.max_events))
    packed["python"] = python  # the Python stacks of the launches (report/html/lines_panel.py)
    packed["cpu"] = cpu_lanes(
        bundle.cpu_lanes, lo, strings
    )  # CPU lanes and idle causes (report/html/cpu_lanes.py)
    return packed


def _flame(root: TreeNode, total: int, strings: Strings) -> dict[str, Any]:
    """The op tree (analysis/attribution/tree.py) as flat arrays: parent index, name, GPU ns; node 0 is the root."""
    parent: list[int] = []
    name_ids: list[int] = []
    value: list[int] = []
    stack: list[tuple[TreeNode, int]] = [(root, -1)]
    while stack:
        node, up = stack.pop()
        index = len(parent)
        parent.append(up)
        name_ids.append(strings(node.name))
        value.append(node.gpu_ns)
        stack.extend((child, index) for child in reversed(node.children))
    return {"parent": parent, "name": name_ids, "value": value, "total_ns": total}


def _flame_instances(instances: OpTree, types: OpTree, strings: Strings) -> dict[str, Any] | None:
    """The instance view of the flame graph (`opscope tree --modules instances`), bounded as `flame`; None when
    it equals the type view (no module type repeats), so the page does not carry the same tree twice."""
    if instances.root == types.root:
        return None
    return _flame(instances.root, instances.gpu_time_ns, strings)


def _launch_delay(bundle: TraceBundle) -> dict[str, Any]:
    """analysis/timeline/launch_delay.py's figures plus a histogram of the same per-kernel delays."""
    stats = bundle.launch_delay
    delays = bundle.kernel_delays[DELAY]
    out: dict[str, Any] = {
        "kernels": stats.kernels,
        "p50_us": _us(stats.p50_ns),
        "p95_us": _us(stats.p95_ns),
        "max_us": _us(stats.max_ns),
        "mean_us": _us(stats.mean_ns),
        "missing_launch": stats.missing_launch,
        "graph_kernels": stats.graph_kernels,
        "edges_us": list(DELAY_EDGES_US),
        "counts": [],
    }
    if delays.len() == 0:
        return out
    top = int(delays.max()) // 1000 + 1  # type: ignore[arg-type]
    edges = [*DELAY_EDGES_US, top] if top > DELAY_EDGES_US[-1] else list(DELAY_EDGES_US)
    us = delays.cast(pl.Float64) / 1e3
    counts = [int(((us >= a) & (us < b)).sum()) for a, b in itertools.pairwise(edges)]
    counts[-1] += int((us >= edges[-1]).sum())
    out.update(edges_us=edges, counts=counts)
    return out


def _memcpy(bundle: TraceBundle) -> list[dict[str, Any]]:
    stats = bundle.memcpy
    return [
        {
            "direction": r.direction,
            "host_memory": r.host_memory,
            "calls": r.calls,
            "bytes": r.bytes,
            "calls_without_bytes": r.calls_without_bytes,
            "total_us": _us(r.total_ns),
            "busy_us": _us(r.busy_ns),
            "bandwidth_gbps": None if r.bandwidth_gbps is None else round(r.bandwidth_gbps, 3),
            "share": round(r.share, 6),
        }
        for r in stats.rows
    ]


__all__ = ["SCHEMA", "ReportOptions", "trace_report"]
