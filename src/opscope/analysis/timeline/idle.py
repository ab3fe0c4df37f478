"""Why the GPU sat idle: each idle gap of a device split into host wait, sync wait and other.

A gap is a stretch of the device's timeline with no kernel, memcpy or memset running (the complement of the
union of its activity). Every instant t of a gap gets exactly one cause, in this order:

1. sync_wait: a synchronising host call (analysis/timeline/syncs.py: device/stream/event synchronize, stream wait
   event, blocking memcpy; any thread of the trace) or a Kineto `cuda_sync` record of this device is in
   progress at t. The GPU had nothing to do while the host was blocked waiting on it.
2. host_wait: t is before the start of the launch call of the work that ends the gap (when several
   activities start at the gap's end, the earliest of their launch calls). The GPU waited for the CPU to
   submit work: launch-bound. A gap that runs to the end of the window without further work on the device is
   host wait as a whole (nothing was submitted).
3. other: the rest: work was already submitted but had not started (launch latency, waits on other streams
   or events, GPU scheduling), and gaps whose next activity has no launch call in the trace (GPU-only
   captures, work launched before the profiler started), where the cause is unknown.

host_wait_ns + sync_wait_ns + other_ns = idle_ns = window_ns - busy_ns (timeline.py), on every device.
Gaps are found on the device's whole timeline, so that the work ending a gap is known even when it lies
beyond the window, then clipped to the window.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from opscope.analysis.base import intervals
from opscope.analysis.base import window as win
from opscope.analysis.base.windows import StepWindow
from opscope.analysis.timeline.activity import LAUNCH_TS, Activity, TimelineOptions, gpu_activity
from opscope.analysis.timeline.gap_causes import IdleCause, device_causes, host_sets
from opscope.analysis.timeline.syncs import END, gpu_sync_events, sync_calls
from opscope.model.schema import Col
from opscope.model.trace import Trace

S, E = intervals.START, intervals.END


@dataclass(frozen=True)
class DeviceIdle:
    device: int | None
    idle_ns: int
    host_wait_ns: int
    sync_wait_ns: int
    other_ns: int
    gaps: int  # idle gaps (pieces) inside the window
    longest_gap_ns: int
    # what the host was doing meanwhile, one cause per idle instant, adding up to idle_ns (gap_causes.py)
    causes: tuple[IdleCause, ...] = ()


@dataclass(frozen=True)
class IdleBreakdown:
    devices: tuple[DeviceIdle, ...]
    sync_calls: int  # synchronising host calls seen in the trace (used for sync_wait)
    steps: tuple[StepWindow, ...] = ()  # the step windows of the causes' `per_step`, in its order


def _length(frame: pl.DataFrame) -> int:
    return int(frame.select((pl.col(E) - pl.col(S)).sum()).item() or 0) if frame.height else 0


def _overlap(a: pl.DataFrame, b: pl.DataFrame) -> int:
    return intervals.intersection_ns(a, b) if a.height and b.height else 0


Gaps = tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]


def device_gaps(act: Activity, device: int | None) -> Gaps:
    """(all gaps, host-wait parts, other parts) of one device's activity from the earlier of the window's
    start and its first activity to the later of the window's end and its last one. The idle breakdown and the
    report's idle pieces both ask for them: computed once per activity and device (`Activity.memo`)."""
    key = ("device_gaps", device)
    found = act.memo.get(key)
    if found is None:
        dev = act.events.filter(pl.col(Col.DEVICE).eq_missing(device))
        lo = min(act.window.bounds[0][0], int(dev[S].min()))  # type: ignore[arg-type]
        hi = max(act.window.bounds[-1][1], int(dev[E].max()))  # type: ignore[arg-type]
        found = act.memo[key] = _classified_gaps(dev, lo, hi)
    return found  # type: ignore[return-value]


def _classified_gaps(events: pl.DataFrame, lo: int, hi: int) -> Gaps:
    """(all gaps, host-wait parts, other parts) of one device over [lo, hi)."""
    gaps = intervals.gaps(intervals.merge(events), lo, hi)
    nxt = events.group_by(S).agg(pl.col(LAUNCH_TS).min().alias("launch"), pl.len().alias("_n"))
    gaps = gaps.join(nxt.rename({S: E}), on=E, how="left")
    trailing = pl.col("_n").is_null()
    known = pl.col("launch").is_not_null()
    cut = pl.col("launch").clip(lower_bound=pl.col(S), upper_bound=pl.col(E))
    host = pl.concat(
        [
            gaps.filter(trailing).select(S, E),
            gaps.filter(known).select(S, cut.alias(E)),
        ]
    ).filter(pl.col(E) > pl.col(S))
    other = pl.concat(
        [
            gaps.filter(~trailing & ~known).select(S, E),
            gaps.filter(known).select(cut.alias(S), E),
        ]
    ).filter(pl.col(E) > pl.col(S))
    return gaps.select(S, E), host, other


def _launching_pids(act: Activity, device: int | None) -> list[str] | None:
    """The processes that launched work onto `device` (None when the trace does not say: every process)."""
    gpu = act.linkage.gpu
    if "launch_pid" not in gpu.columns:
        return None
    pids = (
        gpu.filter(pl.col(Col.DEVICE).eq_missing(device))
        .select(pl.col("launch_pid").cast(pl.String))
        .drop_nulls()
        .unique()["launch_pid"]
        .to_list()
    )
    return pids or None


def idle_breakdown(
    trace: Trace,
    options: TimelineOptions | None = None,
    activity: Activity | None = None,
    syncs: pl.DataFrame | None = None,
    steps: tuple[StepWindow, ...] = (),
) -> IdleBreakdown:
    """Idle time per device split into host_wait / sync_wait / other (see the module doc). `syncs`:
    `syncs.sync_calls(trace)` when the caller already has it; `steps`: step windows whose causes are wanted
    one by one too (`IdleCause.per_step`, `IdleBreakdown.steps`)."""
    act = activity or gpu_activity(trace, options)
    window = act.window
    calls = (sync_calls(trace) if syncs is None else syncs).select(
        pl.col(Col.TS_NS).alias(S), pl.col(END).alias(E)
    )
    gpu_syncs = gpu_sync_events(trace)
    rows = []
    if not window.bounds:
        return IdleBreakdown(devices=(), sync_calls=calls.height)
    clipped = act.clipped()
    devices = sorted(clipped[Col.DEVICE].unique().to_list(), key=lambda d: (d is None, d or 0))
    events = host_sets(trace, act.linkage) if devices else None
    for device in devices:
        gaps, host, other = device_gaps(act, device)
        device_syncs = gpu_syncs.filter(pl.col(Col.DEVICE).eq_missing(device) | pl.col(Col.DEVICE).is_null())
        syncs = win.restrict(
            pl.concat([calls, device_syncs.select(pl.col(Col.TS_NS).alias(S), pl.col(END).alias(E))]), window
        )
        gaps_w, host_w, other_w = (win.restrict(f, window) for f in (gaps, host, other))
        sync_ns = _overlap(gaps_w, syncs)
        lengths = gaps_w.select((pl.col(E) - pl.col(S)).alias("n"))["n"]
        assert events is not None
        causes = device_causes(
            gaps_w.select(S, E),
            other_w.select(S, E),
            device_syncs.select(pl.col(Col.TS_NS).alias(S), pl.col(END).alias(E)),
            events,
            _launching_pids(act, device),
            clipped.filter(pl.col(Col.DEVICE).eq_missing(device)),
            window,
            tuple((w.start_ns, w.end_ns) for w in steps),
        )
        rows.append(
            DeviceIdle(
                device=device,
                idle_ns=_length(gaps_w),
                host_wait_ns=_length(host_w) - _overlap(host_w, syncs),
                sync_wait_ns=sync_ns,
                other_ns=_length(other_w) - _overlap(other_w, syncs),
                gaps=gaps_w.height,
                longest_gap_ns=int(lengths.max() or 0) if lengths.len() else 0,  # type: ignore[arg-type]
                causes=causes,
            )
        )
    return IdleBreakdown(devices=tuple(rows), sync_calls=calls.height, steps=steps)
