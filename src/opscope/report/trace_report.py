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

import polars as pl

from opscope.analysis import intervals
from opscope.analysis.kernels import SummaryOptions, kernel_summary
from opscope.analysis.stacks import LAUNCH_OP, LAUNCH_TS, NODE, GpuStacks, StackOptions, gpu_stacks
from opscope.model.schema import Col, Kind
from opscope.model.trace import Trace
from opscope.report import interim
from opscope.report.summary_view import summary_data
from opscope.report.timeline_data import TimelineOptions, pack_timeline

SCHEMA = "opscope.report/1"
CATEGORY = "category"
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


def trace_report(trace: Trace, options: ReportOptions | None = None) -> dict[str, Any]:
    """The report payload of `trace` (see the module doc and docs/reports.md)."""
    opts = options or ReportOptions()
    strings = Strings()
    stacks = gpu_stacks(trace, StackOptions(devices=opts.devices, streams=opts.streams))
    events = interim.category_of(stacks.events)
    window = interim.trace_window(trace, opts.devices, opts.streams)
    lo, hi = window if window else (0, 0)
    summary = kernel_summary(trace, SummaryOptions(top=0, devices=opts.devices, streams=opts.streams))
    sources = {"headline": interim.SOURCE, "categories": interim.SOURCE + ": category = kind",
               "steps": interim.SOURCE, "launch_delay": interim.SOURCE, "memcpy": interim.SOURCE,
               "kernels": "analysis/kernels.py", "timeline": "analysis/stacks.py + report/timeline_data.py",
               "flame": "analysis/stacks.py"}
    device_names = {d.id: d.name for d in trace.meta.devices}
    return {
        "schema": SCHEMA,
        "kind": "trace",
        "trace": {"path": trace.path, "format": trace.meta.format, "events": summary.events,
                  "kernels": summary.kernels, "devices": list(summary.devices), "rank": trace.meta.rank},
        "headline": _headline(events, lo, hi, device_names, summary.gpu_time_ns),
        "kernels": _kernels(summary_data(summary), events, strings),
        "categories": _categories(events),
        "steps": _steps(trace, events),
        "timeline": _timeline(events, stacks, lo, hi, strings, device_names, opts),
        "flame": _flame(stacks, strings),
        "launch_delay": _launch_delay(events),
        "memcpy": interim.memcpy_rows(events),
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


def _steps(trace: Trace, events: pl.DataFrame) -> list[dict[str, Any]]:
    spans = interim.step_spans(trace)
    if spans.height == 0:
        return []
    gpu = interim.with_interval(events)
    out = []
    for name, _step, ts, dur in spans.iter_rows():
        inside = intervals.clip(gpu, ts, ts + max(dur, 0)).collect()
        per = inside.group_by(CATEGORY).agg((pl.col(intervals.END) - pl.col(intervals.START)).sum().alias("t"))
        out.append({"name": name, "start_ns": ts, "wall_us": _us(dur),
                    "busy_us": _us(_union(inside)),
                    "by_category": {c: _us(t) for c, t in per.sort(CATEGORY).iter_rows()}})
    return out


def _union(frame: pl.DataFrame) -> int:
    total = intervals.union_ns(frame) if frame.height else 0
    assert isinstance(total, int)
    return total


def _timeline(events: pl.DataFrame, stacks: GpuStacks, lo: int, hi: int, strings: Strings,
              device_names: dict[int, str], opts: ReportOptions) -> dict[str, Any]:
    delay = pl.when(pl.col(LAUNCH_TS).is_not_null() & (pl.col(Col.KIND) == Kind.KERNEL)).then(
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


def _flame(stacks: GpuStacks, strings: Strings) -> dict[str, Any]:
    """Icicle nodes as flat arrays (parent index, name, value ns); leaves are GPU events by name."""
    folded = stacks.folded()
    total = sum(w for _, _, w in folded)
    tree: dict[tuple[str, ...], int] = {}
    for frames, name, weight in folded:
        path = (*frames, name)
        for depth in range(1, len(path) + 1):
            tree[path[:depth]] = tree.get(path[:depth], 0) + weight
    floor = total * FLAME_MIN_SHARE
    parent: list[int] = [-1]
    name_ids: list[int] = [strings("all GPU time")]
    value: list[int] = [total]
    index: dict[tuple[str, ...], int] = {(): 0}
    other: dict[int, int] = {}
    for path in sorted(tree, key=lambda p: (len(p), -tree[p], p)):
        up = index.get(path[:-1])
        if up is None:
            continue  # an ancestor was folded away
        if tree[path] < floor:
            other[up] = other.get(up, 0) + tree[path]
            continue
        index[path] = len(parent)
        parent.append(up)
        name_ids.append(strings(path[-1]))
        value.append(tree[path])
    for up, weight in sorted(other.items()):
        parent.append(up)
        name_ids.append(strings("(other)"))
        value.append(weight)
    return {"parent": parent, "name": name_ids, "value": value, "total_ns": total}


def _launch_delay(events: pl.DataFrame) -> dict[str, Any]:
    kernels = events.filter((pl.col(Col.KIND) == Kind.KERNEL) & pl.col(LAUNCH_TS).is_not_null())
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


__all__ = ["NODE", "SCHEMA", "ReportOptions", "trace_report"]
