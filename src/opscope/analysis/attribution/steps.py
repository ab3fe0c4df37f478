"""Per-step timeline figures: for each ProfilerStep#N window (or the whole trace when there are no markers) and
each GPU, the wall time, GPU busy time, kernel / memcpy / memset / communication time and idle time. This is
what `opscope steps` prints, and what `analyze` and `diff` read through `step_stats` and `step_windows`.

Every time is a union of intervals clipped to the window (`analysis.base.intervals`), so two kernels overlapping on
two streams count once: busy = |union of all GPU activity|, kernel = |union of kernels| (communication
kernels included), comm = |union of communication kernels|, memcpy, memset likewise, idle = wall - busy; each
set as `analyze`'s kernel categories define it (the one rule table, `analysis.kernels.category_rules`). GPU time
is cut at window edges: a kernel launched in step N that runs after step N ends counts in the window it runs
in. Windows may overlap (each window is measured on its own; overlaps are counted and reported); GPU activity
outside every window is counted and reported too. Definitions: docs/analysis-attribution.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import polars as pl

from opscope.analysis.base import intervals, select
from opscope.analysis.base.codetag import analysis_tag
from opscope.analysis.base.linking import (
    Linkage,
    LinkStats,
    is_trace_link,
    link,
    selected_gpu,
    unattributed_share,
)
from opscope.analysis.base.stored import kept_value
from opscope.analysis.base.windows import StepWindow, overlap_pairs, select_windows, step_windows
from opscope.analysis.kernels.categories import CATEGORY, with_category
from opscope.analysis.kernels.category_rules import COMMUNICATION, MEMCPY, MEMSET
from opscope.model.schema import Col
from opscope.model.trace import Trace
from opscope.tables import Tabular, dataclass_rows

__all__ = [
    "StepDevice",
    "StepOptions",
    "StepRow",
    "StepStats",
    "StepWindow",
    "busy_ns",
    "step_stats",
    "step_windows",
    "window_pieces",
]


@dataclass(frozen=True)
class StepOptions:
    devices: tuple[int, ...] | None = None
    streams: tuple[int, ...] | None = None
    steps: str | None = None  # a --steps spec: "3", "3-5", "2,4"


@dataclass(frozen=True)
class StepDevice:
    device: int | None
    busy_ns: int
    kernel_ns: int
    memcpy_ns: int
    memset_ns: int
    comm_ns: int
    idle_ns: int
    utilization: float  # busy / wall


@dataclass(frozen=True)
class StepRow:
    window: StepWindow
    devices: tuple[StepDevice, ...]  # one per GPU with activity anywhere in the selection
    gpu_events: int  # GPU events overlapping the window
    slowest: bool  # the longest wall time among the rows

    @property
    def wall_ns(self) -> int:
        return self.window.dur_ns


@dataclass(frozen=True)
class StepStats(Tabular):
    path: str
    rows: tuple[StepRow, ...]
    from_markers: bool  # False: no ProfilerStep markers, one whole-trace window
    devices: tuple[int | None, ...]
    gpu_time_ns: int  # summed durations of the selected GPU activity (whole trace)
    overlapping_steps: int  # windows starting before an earlier window ended
    overlap_ns: int  # sum of window lengths minus the length of their union
    outside_events: int  # GPU events overlapping no window
    outside_ns: int  # GPU time (summed durations) outside every window
    unattributed_share: float  # of the selected GPU time, see `analysis.base.linking`
    link: LinkStats | None
    options: StepOptions
    warnings: tuple[str, ...] = field(default=())

    @property
    def busy_share(self) -> float | None:
        """GPU busy time summed over the rows and devices / (their wall time x the number of devices): the
        devices' utilization over all the steps (what `opscope demo` and `opscope bench` report); None when
        there is no GPU activity or no wall time."""
        capacity = sum(row.wall_ns for row in self.rows) * len(self.devices)
        busy = sum(d.busy_ns for row in self.rows for d in row.devices)
        return busy / capacity if capacity > 0 else None

    def _table_rows(self) -> list[dict[str, Any]]:
        """One row per step and device (device None: a step with no GPU activity anywhere)."""
        out = []
        for row in self.rows:
            w = row.window
            base = {
                "step": w.step,
                "name": w.name,
                "start_ns": w.start_ns,
                "end_ns": w.end_ns,
                "wall_ns": w.dur_ns,
                "gpu_events": row.gpu_events,
                "slowest": row.slowest,
            }
            for d in row.devices or (None,):
                out.append({**base, **(dataclass_rows([d])[0] if d is not None else {"device": None})})
        return out


def _window_frame(chosen: tuple[StepWindow, ...]) -> pl.DataFrame:
    return pl.DataFrame(
        {intervals.START: [w.start_ns for w in chosen], intervals.END: [w.end_ns for w in chosen]},
        schema={intervals.START: pl.Int64, intervals.END: pl.Int64},
    )


def _category(category: pl.Expr) -> list[tuple[str, pl.Expr]]:
    # The categories of `analyze` (one rule table, issue 28): communication is DeepEP, NVSHMEM, custom
    # all-reduce ... as well as NCCL / RCCL; ROCm's copy / fill blit kernels are memcpy / memset, not kernels.
    return [
        ("kernel_ns", ~category.is_in([MEMCPY, MEMSET])),
        ("memcpy_ns", category == MEMCPY),
        ("memset_ns", category == MEMSET),
        ("comm_ns", category == COMMUNICATION),
    ]


def step_stats(trace: Trace, options: StepOptions | None = None, linkage: Linkage | None = None) -> StepStats:
    """Per-step, per-device figures of `trace` (see the module doc). `linkage` (optional) is reused for the
    unattributed share; without one, linking runs only when the trace has GPU activity. Those of every step
    and device over the trace's own link table are kept beside the trace cache (`Trace.persisted`): `analyze`,
    `advise`, `report`, `steps`, `diff` and `history add` on the same trace compute them once (issue 25)."""
    opts = options or StepOptions()
    if opts != StepOptions() or linkage is None or not is_trace_link(trace, linkage):
        return _step_stats(trace, opts, linkage)
    kept = kept_value(
        trace, "step_stats", analysis_tag(), StepStats, lambda: _step_stats(trace, opts, linkage)
    )
    return replace(kept, path=trace.path, link=linkage.stats, options=opts, warnings=trace.meta.warnings)


def _step_stats(trace: Trace, opts: StepOptions, linkage: Linkage | None) -> StepStats:
    chosen = select_windows(trace, opts.steps)
    from_markers = bool(chosen) and chosen[0].step is not None
    # the GPU events of the selection: the link table's when there is one (no pass over the trace), name and kind
    # left categorical (`with_category` classifies each distinct pair once; no text per event)
    columns = (Col.KIND, Col.NAME, Col.DEVICE, Col.TS_NS, pl.col(Col.DUR_NS).clip(lower_bound=0))
    if linkage is not None:
        gpu = with_category(selected_gpu(trace, linkage, opts.devices, opts.streams).select(*columns))
    else:
        gpu_lazy = select.by_streams(select.by_devices(trace.gpu_events(), opts.devices), opts.streams)
        gpu = with_category(gpu_lazy.select(*columns).collect())
    pieces = window_pieces(gpu, chosen)
    event, window = pieces["ev"].to_numpy(), pieces["win"].to_numpy()
    devices: tuple[int | None, ...] = tuple(
        sorted(gpu[Col.DEVICE].unique().to_list(), key=lambda d: (d is None, d))
    )
    figures = _figures(gpu, chosen)
    counts = dict(zip(*np.unique(window, return_counts=True))) if len(window) else {}
    walls = [w.dur_ns for w in chosen]
    slowest = int(np.argmax(walls)) if len(walls) > 1 else -1
    rows = []
    for i, w in enumerate(chosen):
        per_device = []
        for d in devices:
            got = figures.get((i, d), {})
            busy = got.get("busy_ns", 0)
            per_device.append(
                StepDevice(
                    d,
                    busy,
                    got.get("kernel_ns", 0),
                    got.get("memcpy_ns", 0),
                    got.get("memset_ns", 0),
                    got.get("comm_ns", 0),
                    max(w.dur_ns - busy, 0),
                    busy / w.dur_ns if w.dur_ns > 0 else 0.0,
                )
            )
        rows.append(StepRow(w, tuple(per_device), int(counts.get(i, 0)), i == slowest))
    inside = np.zeros(gpu.height, dtype=bool)
    inside[event] = True
    total = int(gpu[Col.DUR_NS].sum() or 0)
    merged = intervals.merge(_window_frame(chosen))
    union = int((merged[intervals.END] - merged[intervals.START]).sum() or 0)
    overlapping = _overlapping(chosen)
    linked = linkage or (link(trace) if gpu.height else None)
    share = 0.0
    if linked is not None and gpu.height:
        share = unattributed_share(selected_gpu(trace, linked, opts.devices, opts.streams, opts.steps))
    return StepStats(
        path=trace.path,
        rows=tuple(rows),
        from_markers=from_markers,
        devices=devices,
        gpu_time_ns=total,
        overlapping_steps=overlapping,
        overlap_ns=sum(walls) - union,
        outside_events=int((~inside).sum()),
        outside_ns=max(total - _inside_ns(pieces, overlapping > 0), 0),
        unattributed_share=share,
        link=linked.stats if linked is not None else None,
        options=opts,
        warnings=trace.meta.warnings,
    )


def window_pieces(events: pl.DataFrame, chosen: tuple[StepWindow, ...]) -> pl.DataFrame:
    """Each event of `events` (ts_ns, dur_ns >= 0, any other columns) cut to every window it overlaps: the
    event's columns plus ev (its row in `events`), win (the window's index) and start_ns / end_ns (the piece)."""
    start = events[Col.TS_NS].to_numpy()
    end = start + events[Col.DUR_NS].to_numpy()
    event, window = overlap_pairs(start, end, chosen)
    w_lo = np.array([w.start_ns for w in chosen], dtype=np.int64)[window] if chosen else np.empty(0, np.int64)
    w_hi = np.array([w.end_ns for w in chosen], dtype=np.int64)[window] if chosen else np.empty(0, np.int64)
    return events[event].with_columns(
        pl.Series("ev", event, dtype=pl.Int64),
        pl.Series("win", window, dtype=pl.Int64),
        pl.Series(intervals.START, np.maximum(start[event], w_lo), dtype=pl.Int64),
        pl.Series(intervals.END, np.minimum(end[event], w_hi), dtype=pl.Int64),
    )


def busy_ns(events: pl.DataFrame, chosen: tuple[StepWindow, ...], by: Sequence[str] = ()) -> dict[tuple, int]:
    """The busy time of `opscope steps` for any set of events (ts_ns, dur_ns >= 0): per window and `by` group,
    the length of the union of the events' intervals cut to the window. Keys: (window index, *group values);
    windows and groups without busy time are absent. `step_stats` measures GPU activity per device with it, a
    CPU-only capture its CPU operators (`attribution.cpu_ops`)."""
    return _busy(events, chosen, list(by), _group_ids(events, list(by)), None)


def _group_ids(events: pl.DataFrame, by: list[str]) -> tuple[list[tuple[Any, ...]], np.ndarray]:
    """The distinct values of the `by` columns (tuples, sorted) and each event's index among them."""
    if not by:
        return [()], np.zeros(events.height, dtype=np.int64)
    groups, gid = intervals.group_ids(events, by)
    return list(groups.iter_rows()), gid


def _busy(
    events: pl.DataFrame,
    chosen: tuple[StepWindow, ...],
    by: list[str],
    groups: tuple[list[tuple[Any, ...]], np.ndarray],
    mask: np.ndarray | None,
) -> dict[tuple, int]:
    """`busy_ns` over the events where `mask` (all: None), with `groups` from `_group_ids(events, by)`: by
    `intervals.covered_per_window` (no piece per event and window), else by the pieces where its shifted
    times would not fit in int64."""
    keys, gid = groups
    start = events[Col.TS_NS].to_numpy()
    end = start + events[Col.DUR_NS].to_numpy()
    if mask is not None:
        start, end, gid = start[mask], end[mask], gid[mask]
    lo = np.array([w.start_ns for w in chosen], dtype=np.int64)
    hi = np.array([w.end_ns for w in chosen], dtype=np.int64)
    covered = intervals.covered_per_window(start, end, gid, len(keys), lo, hi)
    if covered is None:
        chosen_events = events if mask is None else events.filter(pl.Series(mask))
        return _union_per_window(window_pieces(chosen_events, chosen), by)
    win, group = np.nonzero(covered > 0)
    return {(int(w), *keys[g]): int(covered[w, g]) for w, g in zip(win.tolist(), group.tolist(), strict=True)}


def _union_per_window(pieces: pl.DataFrame, by: Sequence[str]) -> dict[tuple, int]:
    if pieces.height == 0:
        return {}
    keys = ["win", *by]
    busy = intervals.union_ns(pieces, by=keys)
    assert isinstance(busy, pl.DataFrame)
    return {tuple(row[:-1]): int(row[-1]) for row in busy.select(*keys, "busy_ns").iter_rows()}


def _figures(
    gpu: pl.DataFrame, chosen: tuple[StepWindow, ...]
) -> dict[tuple[int, int | None], dict[str, int]]:
    """Per (window index, device): the busy time and that of each category (`_category`), as `busy_ns`."""
    out: dict[tuple[int, int | None], dict[str, int]] = {}
    groups = _group_ids(gpu, [Col.DEVICE])
    parts: list[tuple[str, np.ndarray | None]] = [("busy_ns", None)]
    parts += [
        (name, gpu.select(cond.fill_null(False)).to_series().to_numpy())
        for name, cond in _category(pl.col(CATEGORY))
    ]
    for name, mask in parts:
        for (win, device), ns in _busy(gpu, chosen, [Col.DEVICE], groups, mask).items():
            out.setdefault((int(win), device), {})[name] = ns
    return out


def _inside_ns(pieces: pl.DataFrame, windows_overlap: bool) -> int:
    """GPU time inside the union of the windows. Where windows overlap, an event's pieces may overlap too,
    so its time inside is the union of its pieces."""
    if not windows_overlap:
        return int((pieces[intervals.END] - pieces[intervals.START]).sum() or 0)
    merged = intervals.union_ns(pieces, by=["ev"])
    assert isinstance(merged, pl.DataFrame)
    return int(merged["busy_ns"].sum() or 0)


def _overlapping(chosen: tuple[StepWindow, ...]) -> int:
    ordered = sorted(chosen, key=lambda w: w.start_ns)
    count, reach = 0, None
    for w in ordered:  # one pass over the windows (a handful), not over events
        if reach is not None and w.start_ns < reach:
            count += 1
        reach = w.end_ns if reach is None else max(reach, w.end_ns)
    return count
