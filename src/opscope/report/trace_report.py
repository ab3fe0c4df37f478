"""One trace -> the plain data of its HTML report (`opscope.report/1`): headline, kernels, categories, steps,
timeline, operator -> kernel flame graph, launch-delay histogram and memcpy table.

This module only gathers results of the analyses into JSON-ready dicts; the browser code in
report/assets/*.js draws them, and tests check these dicts against independent recomputations. Text that
comes from the trace (kernel, op, file names) lives once in `strings` and is referenced by index; the HTML
writer escapes it for the <script> block and the page puts it into the DOM as text only.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from opscope.analysis import intervals
from opscope.analysis.kernels import SummaryOptions, kernel_summary
from opscope.analysis.linking import Linkage, link, selected_gpu
from opscope.analysis.steps import StepOptions, step_stats
from opscope.analysis.tree import TreeNode, TreeOptions, op_tree
from opscope.analysis.windows import overlap_pairs
from opscope.model.schema import Col, Kind
from opscope.model.trace import Trace
from opscope.report import interim
from opscope.report.summary_view import summary_data
from opscope.report.timeline_data import TimelineOptions, pack_timeline

SCHEMA = "opscope.report/1"
CATEGORY = "category"
LAUNCH_TS = "launch_ts_ns"
LAUNCH_OP = "launch_op"
DELAY_EDGES_US = (0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000)
FLAME_MIN_SHARE = 1 / 5000  # flame nodes lighter than this share of the total fold into "(other)"


@dataclass(frozen=True)
class ReportOptions:
    devices: tuple[int, ...] | None = None
    streams: tuple[int, ...] | None = None
    max_events: int = 200_000  # timeline rectangles shipped (see timeline_data.py)


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


def report_events(trace: Trace, linkage: Linkage, options: ReportOptions) -> pl.DataFrame:
    """The selected GPU activity with what the views need: kind, name, device, stream, ts_ns, dur_ns,
    launch_ts_ns, launch_op (innermost op or annotation around the launch), from_graph, category."""
    gpu = selected_gpu(trace, linkage, options.devices, options.streams).select(
        pl.col(Col.KIND).cast(pl.String), pl.col(Col.NAME).cast(pl.String).fill_null(""), Col.DEVICE, Col.STREAM,
        Col.TS_NS, Col.DUR_NS, LAUNCH_TS, pl.col("op_name").cast(pl.String).alias(LAUNCH_OP), "from_graph")
    return interim.category_of(gpu)


def trace_report(trace: Trace, options: ReportOptions | None = None) -> dict[str, Any]:
    """The report payload of `trace` (see the module doc and docs/reports.md)."""
    opts = options or ReportOptions()
    strings = Strings()
    linkage = link(trace)
    events = report_events(trace, linkage, opts)
    window = interim.trace_window(trace, opts.devices, opts.streams)
    lo, hi = window if window else (0, 0)
    summary = kernel_summary(trace, SummaryOptions(top=0, devices=opts.devices, streams=opts.streams))
    tree = op_tree(trace, TreeOptions(depth=0, min_share=FLAME_MIN_SHARE, devices=opts.devices,
                                      streams=opts.streams), linkage)
    sources = {"headline": interim.SOURCE, "categories": interim.SOURCE + ": category = kind",
               "steps": "analysis/steps.py (windows, GPU busy) + category sums here",
               "launch_delay": interim.SOURCE + " on analysis/linking.py", "memcpy": interim.SOURCE,
               "kernels": "analysis/kernels.py", "timeline": "analysis/linking.py + report/timeline_data.py",
               "flame": "analysis/tree.py"}
    device_names = {d.id: d.name for d in trace.meta.devices}
    return {
        "schema": SCHEMA,
        "kind": "trace",
        "trace": {"path": trace.path, "format": trace.meta.format, "events": summary.events,
                  "kernels": summary.kernels, "devices": list(summary.devices), "rank": trace.meta.rank},
        "headline": _headline(events, lo, hi, device_names, summary.gpu_time_ns),
        "kernels": _kernels(summary_data(summary), events, strings),
        "categories": _categories(events),
        "steps": _steps(trace, events, linkage, opts),
        "timeline": _timeline(events, lo, hi, strings, device_names, opts),
        "flame": _flame(tree.root, tree.gpu_time_ns, strings),
        "launch_delay": _launch_delay(events),
        "memcpy": interim.memcpy_rows(trace, opts.devices, opts.streams),
        "sources": sources,
        "warnings": list(trace.meta.warnings),
        "strings": strings.items,
    }


def _headline(events: pl.DataFrame, lo: int, hi: int, names: dict[int, str], gpu_time_ns: int) -> dict[str, Any]:
    window_ns = hi - lo
    busy = interim.busy_by_device(events, lo, hi) if window_ns > 0 else {}
    devices = [
        {"device": d, "name": names.get(d) if d is not None else None, "busy_us": _us(b),
         "utilization": round(b / window_ns, 6) if window_ns else 0.0}
        for d, b in sorted(busy.items(), key=lambda kv: (kv[0] is None, kv[0] or 0))
    ]
    mean_util = sum(b / window_ns for b in busy.values()) / len(busy) if busy and window_ns else 0.0
    cats = _categories(events)
    return {
        "window_start_ns": lo,
        "window_us": _us(window_ns),
        "gpu_time_us": _us(gpu_time_ns),
        "busy_pct": round(mean_util * 100, 3),
        "idle_pct": round((1 - mean_util) * 100, 3) if devices else 100.0,
        "devices": devices,
        "top_category": cats[0]["category"] if cats else None,
        "top_category_share": cats[0]["share"] if cats else None,
    }


def _kernels(data: dict[str, Any], events: pl.DataFrame, strings: Strings) -> dict[str, Any]:
    cats = dict(events.group_by(Col.NAME, Col.KIND).agg(pl.col(CATEGORY).first()).select(
        pl.concat_str(Col.KIND, pl.lit("\x00"), Col.NAME), CATEGORY).iter_rows())
    rows = []
    for row in data["rows"]:
        category = cats.get(f"{row['kind']}\x00{row['name']}", row["kind"])
        rows.append({**row, "name": strings(row["name"]), CATEGORY: category})
    return {"totals": data["totals"], "rows": rows}


def _categories(events: pl.DataFrame) -> list[dict[str, Any]]:
    if events.height == 0:
        return []
    per = events.group_by(CATEGORY).agg(pl.len().alias("calls"), pl.col(Col.DUR_NS).sum().alias("t")).sort(
        ["t", CATEGORY], descending=[True, False])
    total = int(per["t"].sum() or 0)
    return [{"category": c, "calls": int(n), "total_us": _us(t), "share": round(t / total, 6) if total else 0.0}
            for c, n, t in per.iter_rows()]


def _steps(trace: Trace, events: pl.DataFrame, linkage: Linkage, opts: ReportOptions) -> list[dict[str, Any]]:
    """Per ProfilerStep#N: wall and GPU busy time from analysis/steps.py (busy: the mean over the devices),
    and the summed GPU time per category clipped to the step."""
    stats = step_stats(trace, StepOptions(devices=opts.devices, streams=opts.streams), linkage)
    if not stats.from_markers:
        return []
    chosen = tuple(r.window for r in stats.rows)
    start = events[Col.TS_NS].to_numpy()
    end = start + np.maximum(events[Col.DUR_NS].to_numpy(), 0)
    event, window = overlap_pairs(start, end, chosen)
    lo = np.array([w.start_ns for w in chosen], dtype=np.int64)[window]
    hi = np.array([w.end_ns for w in chosen], dtype=np.int64)[window]
    pieces = pl.DataFrame({"win": window, CATEGORY: events[CATEGORY].gather(event),
                           "t": np.minimum(end[event], hi) - np.maximum(start[event], lo)})
    per = pieces.group_by("win", CATEGORY).agg(pl.col("t").sum()).sort(CATEGORY)
    by_window: dict[int, dict[str, float | None]] = {}
    for win, category, t in per.iter_rows():
        by_window.setdefault(int(win), {})[category] = _us(t)
    out = []
    for i, row in enumerate(stats.rows):
        busy = [d.busy_ns for d in row.devices]
        out.append({"name": row.window.name, "start_ns": row.window.start_ns, "wall_us": _us(row.window.dur_ns),
                    "busy_us": _us(sum(busy) / len(busy) if busy else 0), "by_category": by_window.get(i, {})})
    return out


def _union(frame: pl.DataFrame) -> int:
    total = intervals.union_ns(frame) if frame.height else 0
    assert isinstance(total, int)
    return total


def _timeline(events: pl.DataFrame, lo: int, hi: int, strings: Strings, device_names: dict[int, str],
              opts: ReportOptions) -> dict[str, Any]:
    delay = pl.when(pl.col(LAUNCH_TS).is_not_null() & (pl.col(Col.KIND) == Kind.KERNEL) & ~pl.col("from_graph")).then(
        (pl.col(Col.TS_NS) - pl.col(LAUNCH_TS)).clip(lower_bound=0))
    frame = events.select(
        Col.DEVICE, Col.STREAM, Col.TS_NS, Col.DUR_NS, _ids(events, Col.NAME, strings).alias("name_id"),
        _ids(events, LAUNCH_OP, strings).fill_null(-1).alias("op_id"), delay.alias("delay_ns"),
        _ids(events, CATEGORY, strings).alias("cat_id"),
    )
    names: dict[int | None, str | None] = {d: n for d, n in device_names.items()}
    return pack_timeline(frame, lo, hi, strings, names, TimelineOptions(max_events=opts.max_events))


def _ids(frame: pl.DataFrame, column: str, strings: Strings) -> pl.Expr:
    """The string-table index of each value of `column` (null stays null); one lookup per distinct value."""
    mapping = {v: strings(v) for v in frame[column].drop_nulls().unique().sort().to_list()}
    return pl.col(column).replace_strict(mapping, default=None, return_dtype=pl.Int64)


def _flame(root: TreeNode, total: int, strings: Strings) -> dict[str, Any]:
    """The op tree (analysis/tree.py) as flat arrays: parent index, name, GPU ns; node 0 is the root."""
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


def _launch_delay(events: pl.DataFrame) -> dict[str, Any]:
    kernels = events.filter((pl.col(Col.KIND) == Kind.KERNEL) & pl.col(LAUNCH_TS).is_not_null()
                            & ~pl.col("from_graph"))
    delays = (kernels[Col.TS_NS] - kernels[LAUNCH_TS]).clip(lower_bound=0)
    if delays.len() == 0:
        return {"kernels": 0, "edges_us": list(DELAY_EDGES_US), "counts": [], "p50_us": None, "p95_us": None,
                "max_us": None, "mean_us": None}
    top = max(DELAY_EDGES_US[-1], int(delays.max()) // 1000 + 1)  # type: ignore[operator]
    edges = [*DELAY_EDGES_US, top] if top > DELAY_EDGES_US[-1] else list(DELAY_EDGES_US)
    us = delays.cast(pl.Float64) / 1e3
    counts = [int(((us >= a) & (us < b)).sum()) for a, b in itertools.pairwise(edges)]
    counts[-1] += int((us >= edges[-1]).sum())
    return {"kernels": delays.len(), "edges_us": edges, "counts": counts,
            "p50_us": _us(delays.quantile(0.5, "linear")), "p95_us": _us(delays.quantile(0.95, "linear")),
            "max_us": _us(delays.max()), "mean_us": _us(delays.mean())}  # type: ignore[arg-type]


__all__ = ["SCHEMA", "ReportOptions", "report_events", "trace_report"]
