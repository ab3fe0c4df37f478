"""The CPU side of the timeline: one lane per thread that launched GPU work (its operators, the launch calls and
the synchronising calls it made), each launch linked to the GPU event it started, and the idle pieces of each
device with their cause (analysis/timeline/idle.py: host wait, sync wait, other). The HTML report's timeline
(report/html/cpu_lanes.py) packs these results for the page; nothing here knows about the page.

A launch points at its GPU event by (GPU lane, start relative to `t0`), GPU lanes in (device, stream) order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import polars as pl

from opscope.analysis.base import intervals
from opscope.analysis.base import window as win
from opscope.analysis.base.linking import OP_KINDS, ROW
from opscope.analysis.timeline.idle import _classified_gaps
from opscope.analysis.timeline.syncs import END, sync_calls
from opscope.model.schema import Col

if TYPE_CHECKING:
    from opscope.analysis.timeline.activity import Activity
    from opscope.model.trace import Trace

S, E = intervals.START, intervals.END
OP, LAUNCH, SYNC = 0, 1, 2  # CPU event kinds
HOST_WAIT, SYNC_WAIT, OTHER = 0, 1, 2  # idle causes, as in analysis/timeline/idle.py
MAX_CPU_EVENTS = 100_000  # beyond, the longest operators (launches and syncs are always kept)
MAX_GAPS = 20_000  # idle pieces per report, the longest


def _gpu_lanes(events: pl.DataFrame) -> pl.DataFrame:
    """The GPU lane index of each (device, stream), in report/html/timeline_data.py's order."""
    lanes = events.select(Col.DEVICE, Col.STREAM).unique().sort([Col.DEVICE, Col.STREAM], nulls_last=True)
    return lanes.with_row_index("gpu_lane").with_columns(pl.col("gpu_lane").cast(pl.Int64))


@dataclass(frozen=True)
class IdlePieces:
    """Idle pieces inside the window, the longest MAX_GAPS, in (device, start) order: device, start_ns, end_ns,
    cause (HOST_WAIT, SYNC_WAIT or OTHER); `devices`: every device with activity."""

    devices: list[Any]
    pieces: list[tuple[Any, int, int, int]]


@dataclass(frozen=True)
class CpuLanes:
    """`threads`: pid, tid (text), lane; `events`: lane, ts (absolute ns), dur, name, kind (OP, LAUNCH, SYNC),
    gpu_lane, gpu_start (launches: their GPU event relative to `t0`; -1 otherwise), sorted by lane, start,
    longest first; `total`: events inside the window before the MAX_CPU_EVENTS cut; `idle`: the idle pieces."""

    threads: pl.DataFrame
    events: pl.DataFrame
    total: int
    idle: IdlePieces


def cpu_lanes(trace: Trace, act: Activity, t0: int, t1: int) -> CpuLanes:
    """The CPU lanes and idle pieces of the window [t0, t1) (see the module doc)."""
    gpu = act.events.join(act.linkage.gpu.select(ROW, "launch_pid", "launch_tid"), on=ROW, how="left")
    gpu = gpu.join(_gpu_lanes(act.events), on=[Col.DEVICE, Col.STREAM], how="left", nulls_equal=True)
    launched = gpu.filter(pl.col("launch_ts_ns").is_not_null() & pl.col("launch_pid").is_not_null())
    threads = (
        launched.select(
            pl.col("launch_pid").cast(pl.String).alias("pid"),
            pl.col("launch_tid").cast(pl.String).alias("tid"),
        )
        .unique()
        .sort("pid", "tid")
        .with_row_index("lane")
        .with_columns(pl.col("lane").cast(pl.Int64))
    )
    inside = (pl.col("end") > t0) & (pl.col("ts") < t1)
    launches = launched.select(
        pl.col("launch_pid").cast(pl.String).alias("pid"),
        pl.col("launch_tid").cast(pl.String).alias("tid"),
        pl.col("launch_ts_ns").alias("ts"),
        pl.col("launch_dur_ns").fill_null(0).clip(lower_bound=0).alias("dur"),
        pl.col("launch_name").alias("name"),
        pl.lit(LAUNCH).alias("kind"),
        "gpu_lane",
        (pl.col(Col.TS_NS) - t0).alias("gpu_start"),
    )
    scopes = act.linkage.scopes.filter(pl.col(Col.KIND).is_in(list(OP_KINDS)))
    ops = scopes.select(
        pl.col(Col.PID).cast(pl.String).alias("pid"),
        pl.col(Col.TID).cast(pl.String).alias("tid"),
        pl.col(Col.TS_NS).alias("ts"),
        pl.col(Col.DUR_NS).clip(lower_bound=0).alias("dur"),
        pl.col(Col.NAME).cast(pl.String).alias("name"),
        pl.lit(OP).alias("kind"),
        pl.lit(-1, dtype=pl.Int64).alias("gpu_lane"),
        pl.lit(-1, dtype=pl.Int64).alias("gpu_start"),
    )
    sync_rows = sync_calls(trace)
    syncs = sync_rows.select(
        "pid",
        "tid",
        pl.col(Col.TS_NS).alias("ts"),
        pl.col(Col.DUR_NS).alias("dur"),
        "name",
        pl.lit(SYNC).alias("kind"),
        pl.lit(-1, dtype=pl.Int64).alias("gpu_lane"),
        pl.lit(-1, dtype=pl.Int64).alias("gpu_start"),
    )
    frames = [
        f.with_columns(
            pl.col("kind").cast(pl.Int64),
            pl.col("gpu_lane").cast(pl.Int64),
            pl.col("gpu_start").cast(pl.Int64),
            pl.col("ts").cast(pl.Int64),
            pl.col("dur").cast(pl.Int64),
            pl.col("name").cast(pl.String),
        )
        for f in (ops, launches, syncs)
    ]
    events = (
        pl.concat(frames)
        .join(threads, on=["pid", "tid"], how="inner")
        .filter(pl.col("ts").is_not_null())
        .with_columns((pl.col("ts") + pl.col("dur")).alias("end"))
        .filter(inside)
    )
    total = events.height
    if total > MAX_CPU_EVENTS:  # keep every launch and sync, then the longest operators
        kept = events.filter(pl.col("kind") != OP)
        room = max(MAX_CPU_EVENTS - kept.height, 0)
        events = pl.concat(
            [kept, events.filter(pl.col("kind") == OP).sort("dur", descending=True).head(room)]
        )
    # by lane, start, longest first: a parent is drawn before the operators inside it
    events = events.sort(["lane", "ts", "dur"], descending=[False, False, True])
    return CpuLanes(threads=threads, events=events, total=total, idle=idle_gaps(trace, act, sync_rows))


def idle_gaps(trace: Trace, act: Activity, calls_found: pl.DataFrame | None = None) -> IdlePieces:
    """The idle pieces of each device inside the window, each with its cause: sync wait where a synchronising
    call is in progress, else host wait / other as `analysis.timeline.idle` splits the gap. `calls_found`:
    `sync_calls(trace)` when the caller has it."""
    window = act.window
    if not window.bounds or act.events.is_empty():
        return IdlePieces(devices=[], pieces=[])
    found = sync_calls(trace) if calls_found is None else calls_found
    calls = found.select(pl.col(Col.TS_NS).alias(S), pl.col(END).alias(E))
    syncs = intervals.merge(calls) if calls.height else calls
    devices = sorted(act.events[Col.DEVICE].unique().to_list(), key=lambda d: (d is None, d or 0))
    pieces: list[tuple[Any, int, int, int]] = []
    for device in devices:
        dev = act.events.filter(pl.col(Col.DEVICE).eq_missing(device))
        lo = min(window.bounds[0][0], int(dev[S].min()))  # type: ignore[arg-type]
        hi = max(window.bounds[-1][1], int(dev[E].max()))  # type: ignore[arg-type]
        _, host, other = _classified_gaps(dev, lo, hi)
        for frame, cause in ((win.restrict(host, window), HOST_WAIT), (win.restrict(other, window), OTHER)):
            for (lo_ns, hi_ns), in_sync in _split(frame.select(S, E).rows(), syncs.select(S, E).rows()):
                pieces.append((device, lo_ns, hi_ns, SYNC_WAIT if in_sync else cause))
    pieces.sort(key=lambda p: p[2] - p[1], reverse=True)
    pieces = sorted(pieces[:MAX_GAPS], key=lambda p: (p[0] is None, p[0] or 0, p[1]))
    return IdlePieces(devices=devices, pieces=pieces)


def _split(parts: list[tuple[Any, ...]], syncs: list[tuple[Any, ...]]) -> list[tuple[tuple[int, int], bool]]:
    """Each part cut at the (sorted, disjoint) sync intervals: ((start, end), inside a sync)."""
    out: list[tuple[tuple[int, int], bool]] = []
    j = 0
    for lo, hi in sorted(parts):
        while j < len(syncs) and syncs[j][1] <= lo:
            j += 1
        at, k = lo, j
        while at < hi:
            if k < len(syncs) and syncs[k][0] < hi:
                s, e = max(syncs[k][0], at), min(syncs[k][1], hi)
                if s > at:
                    out.append(((at, s), False))
                if e > s:
                    out.append(((s, e), True))
                at = max(at, e)
                k += 1
            else:
                out.append(((at, hi), False))
                at = hi
    return out


__all__ = [
    "HOST_WAIT",
    "LAUNCH",
    "OP",
    "OTHER",
    "SYNC",
    "SYNC_WAIT",
    "CpuLanes",
    "IdlePieces",
    "cpu_lanes",
    "idle_gaps",
]
