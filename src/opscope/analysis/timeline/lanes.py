"""The CPU side of the timeline: one lane per thread that launched GPU work (its operators, the launch calls and
the synchronising calls it made), each launch linked to the GPU event it started, and the idle pieces of each
device with their cause (analysis/timeline/idle.py: host wait, sync wait, other). The HTML report's timeline
(report/html/cpu_lanes.py) packs these results for the page; nothing here knows about the page.

A launch points at its GPU event by (GPU lane, start relative to `t0`), GPU lanes in (device, stream) order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from opscope.analysis.base import intervals
from opscope.analysis.base import window as win
from opscope.analysis.base.linking import OP_KINDS, ROW, thread_key
from opscope.analysis.timeline.idle import device_gaps
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
    launches = _on_lanes(launched, "launch_pid", "launch_tid", threads).select(
        "lane",
        pl.col("launch_ts_ns").alias("ts"),
        pl.col("launch_dur_ns").fill_null(0).clip(lower_bound=0).alias("dur"),
        pl.col("launch_name").alias("name"),
        pl.lit(LAUNCH).alias("kind"),
        "gpu_lane",
        (pl.col(Col.TS_NS) - t0).alias("gpu_start"),
    )
    scopes = act.linkage.scopes.filter(pl.col(Col.KIND).is_in(list(OP_KINDS)))
    ops = _on_lanes(scopes, Col.PID, Col.TID, threads).select(
        "lane",
        pl.col(Col.TS_NS).alias("ts"),
        pl.col(Col.DUR_NS).clip(lower_bound=0).alias("dur"),
        Col.NAME,
        pl.lit(OP).alias("kind"),
        pl.lit(-1, dtype=pl.Int64).alias("gpu_lane"),
        pl.lit(-1, dtype=pl.Int64).alias("gpu_start"),
    )
    sync_rows = sync_calls(trace)
    syncs = sync_rows.join(threads, on=["pid", "tid"], how="inner").select(
        "lane",
        pl.col(Col.TS_NS).alias("ts"),
        pl.col(Col.DUR_NS).alias("dur"),
        "name",
        pl.lit(SYNC).alias("kind"),
        pl.lit(-1, dtype=pl.Int64).alias("gpu_lane"),
        pl.lit(-1, dtype=pl.Int64).alias("gpu_start"),
    )
    ops, launches, syncs = (
        f.with_columns(
            pl.col("kind").cast(pl.Int64),
            pl.col("gpu_lane").cast(pl.Int64),
            pl.col("gpu_start").cast(pl.Int64),
            pl.col("ts").cast(pl.Int64),
            pl.col("dur").cast(pl.Int64),
        )
        .filter(pl.col("ts").is_not_null())
        .with_columns((pl.col("ts") + pl.col("dur")).alias("end"))
        .filter(inside)
        for f in (ops, launches, syncs)
    )
    total = ops.height + launches.height + syncs.height
    if total > MAX_CPU_EVENTS:
        # keep every launch and sync, then the longest operators (ties: earliest first)
        room = max(MAX_CPU_EVENTS - launches.height - syncs.height, 0)
        ops = ops.top_k(room, by=["dur", "ts", "lane"], reverse=[False, True, True])
    # the names become text only now, for the rows kept (1.9 M operator names on the 1 GB benchmark trace)
    events = pl.concat([f.with_columns(pl.col("name").cast(pl.String)) for f in (ops, launches, syncs)])
    # by lane, start, longest first: a parent is drawn before the operators inside it
    events = events.sort(["lane", "ts", "dur"], descending=[False, False, True])
    return CpuLanes(threads=threads, events=events, total=total, idle=idle_gaps(trace, act, sync_rows))


def _on_lanes(frame: pl.DataFrame, pid: str, tid: str, threads: pl.DataFrame) -> pl.DataFrame:
    """The rows of `frame` on a thread of `threads`, with its `lane`. The (process, thread) pairs are matched as
    text once per distinct pair; the rows find their lane by one integer made of the pair's categorical codes
    (no text per row; a lookup in the few pairs instead of a join: 0.02 s instead of 0.11 s for 1.5 M rows)."""
    key = thread_key(pid, tid)
    pairs = frame.select(key.alias("_key"), pid, tid).unique(subset="_key")
    lanes = pairs.select(
        "_key", pl.col(pid).cast(pl.String).alias("pid"), pl.col(tid).cast(pl.String).alias("tid")
    ).join(threads, on=["pid", "tid"], how="inner")
    lane = key.replace_strict(lanes["_key"], lanes["lane"], default=None, return_dtype=pl.Int64)
    return frame.with_columns(lane.alias("lane")).filter(pl.col("lane").is_not_null())


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
    s_lo, s_hi = syncs[S].to_numpy().astype(np.int64), syncs[E].to_numpy().astype(np.int64)
    found_pieces: list[tuple[np.ndarray, ...]] = []  # per device and cause: (device index, start, end, cause)
    for d, device in enumerate(devices):  # a handful of devices, each a vectorised pass
        _, host, other = device_gaps(act, device)
        for frame, cause in ((win.restrict(host, window), HOST_WAIT), (win.restrict(other, window), OTHER)):
            start, end, in_sync = _split(frame[S].to_numpy(), frame[E].to_numpy(), s_lo, s_hi)
            causes = np.where(in_sync, CAUSES.index(SYNC_WAIT), CAUSES.index(cause))
            found_pieces.append((np.full(len(start), d), start, end, causes))
    if not found_pieces:
        return IdlePieces(devices=devices, pieces=[])
    device_at, start, end, cause_at = (np.concatenate(x) for x in zip(*found_pieces, strict=True))
    # the longest MAX_GAPS (a stable sort: equally long pieces keep their order), then by device and start
    chosen = np.argsort(-(end - start), kind="stable")[:MAX_GAPS]
    chosen = chosen[np.lexsort((start[chosen], device_at[chosen]))]
    pieces = [
        (devices[d], int(lo_ns), int(hi_ns), CAUSES[c])
        for d, lo_ns, hi_ns, c in zip(
            device_at[chosen].tolist(), start[chosen], end[chosen], cause_at[chosen].tolist(), strict=True
        )
    ]
    return IdlePieces(devices=devices, pieces=pieces)


CAUSES = (SYNC_WAIT, HOST_WAIT, OTHER)


def _split(
    lo: np.ndarray, hi: np.ndarray, s_lo: np.ndarray, s_hi: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The parts [lo, hi) cut at the sorted, disjoint sync intervals [s_lo, s_hi): (start, end, inside a sync)
    of each non-empty piece, part by part (parts sorted by start, then end), each part's pieces in time order.
    Each part's syncs are found by two binary searches; the pieces outside them are the stretches between the
    syncs' clipped ends and the next clipped starts (the part's own ends at either side)."""
    order = np.lexsort((hi, lo))
    lo, hi = lo[order].astype(np.int64), hi[order].astype(np.int64)
    first = np.searchsorted(s_hi, lo, side="right")  # the first sync ending after the part's start
    stop = np.searchsorted(s_lo, hi, side="left")  # the first sync starting at or after its end
    count = np.maximum(stop - first, 0)
    part = np.repeat(np.arange(len(lo)), count)
    before = np.cumsum(count) - count
    rank = np.arange(int(count.sum())) - np.repeat(before, count)  # the sync's rank within its part
    k = np.repeat(first, count) + rank
    in_lo, in_hi = np.maximum(s_lo[k], lo[part]), np.minimum(s_hi[k], hi[part])
    # outside: before each sync (from the part's start or the previous sync's end), and one after the last
    prev_hi = np.concatenate(([0], in_hi[:-1])) if len(in_hi) else in_hi
    out_lo = np.where(rank == 0, lo[part], prev_hi)
    last = before + count - 1
    tail_lo = np.where(count > 0, in_hi[np.clip(last, 0, None)] if len(in_hi) else lo, lo)
    starts = np.concatenate((out_lo, in_lo, tail_lo))
    ends = np.concatenate((in_lo, in_hi, hi))
    inside = np.concatenate((np.zeros(len(k), bool), np.ones(len(k), bool), np.zeros(len(lo), bool)))
    which = np.concatenate((part, part, np.arange(len(lo))))
    at = np.concatenate((2 * rank, 2 * rank + 1, 2 * count))
    keep = ends > starts
    sort = np.lexsort((at[keep], which[keep]))
    return starts[keep][sort], ends[keep][sort], inside[keep][sort]


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
